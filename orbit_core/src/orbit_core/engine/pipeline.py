"""The group-commit pipeline: how commands become durable transactions.

Whichever caller finds no group in progress becomes the leader: it takes
every pending command and has the engine prepare them as one group (apply to
memory, decide, build the commit). The group is then committed in ONE store
transaction, inline or by a committer thread that merges every group prepared
meanwhile into one transaction while the next group is prepared. Only then are
the callers answered, so no caller learns of an event that is not durable. If
a commit fails, the engine rolls back what the failed groups (and every group
prepared on top of them) changed, and their callers get STORAGE_ERROR.

Parked commands (long polls and waits that found nothing) are answered later
by the group that completes them, after that group's own commit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from orbit_core.engine.commands import PENDING, Command, Signal, Tx
from orbit_core.errors import StorageError
from orbit_core.ports import CommitBatch, ExecutionChange, Store


class Group:
    """A prepared group: its changes, what to commit, and whom to answer.
    `parked` are its long polls and waits that found nothing yet: another
    group will complete them, after that group's own commit."""

    __slots__ = ("batch", "commit", "parked", "tx")

    def __init__(self, tx: Tx, commit: CommitBatch, batch: list[Command]) -> None:
        self.tx = tx
        self.commit = commit
        self.batch = batch
        self.parked = [cmd for cmd in batch if cmd.result is PENDING]


_STOP_GROUP = Group(Tx(0), CommitBatch(), [])


class _TwoRuns(Exception):
    """Two runs of one execution ended within one commit window."""


class GroupCommit:
    """Runs commands in groups and answers them once their group is durable."""

    def __init__(
        self,
        store: Store,
        counters: dict[str, int],
        *,
        prepare: Callable[[list[Command]], Group],
        publish: Callable[[Tx], None],
        rollback: Callable[[Tx], None],
        threaded: bool,
    ) -> None:
        """`prepare` applies a batch of commands to memory and decides,
        `publish` makes a committed group's deferred changes, and `rollback`
        undoes a group whose commit failed (the engine side of a commit)."""
        self._store = store
        self._counters = counters
        self._prepare = prepare
        self._publish = publish
        self._rollback = rollback
        # Guards the pending list and the parking states of commands.
        self.lock = threading.Lock()
        # Held while memory is changed: by the group leader while it prepares
        # a group, and by the committer while it publishes or rolls back.
        self._state_lock = threading.RLock()
        self._commits: queue.SimpleQueue[Group] = queue.SimpleQueue()
        self._committer: threading.Thread | None = None
        self._pending: list[Command] = []
        self._leading = False
        self.closed = False
        if threaded:
            # Durable commits wait for the disk: the next group is prepared
            # while the previous one is being written.
            self._committer = threading.Thread(
                target=self._commit_loop, name="orbit-commit", daemon=True
            )
            self._committer.start()

    def close(self) -> None:
        """Refuses new commands from now on."""
        self.closed = True

    def join(self) -> None:
        """Commits what is still queued and stops the committer thread."""
        if self._committer is not None:
            self._commits.put(_STOP_GROUP)
            self._committer.join(timeout=30)

    # ---- running commands

    def submit(self, fn: Callable[[Tx], Any], read: bool = False) -> Any:
        return self.run(Command(fn, read=read))

    def run(self, cmd: Command) -> Any:
        if self.closed:
            raise StorageError("the engine is closed")
        with self.lock:
            self._pending.append(cmd)
            leads = not self._leading
            if leads:
                self._leading = True
            if not leads or self._committer is not None:
                cmd.event = Signal()
        if leads:
            self._lead()
        while True:
            # The event is read before the flags: whoever swaps in a new event
            # sets its flag first, so a caller never waits on an event that
            # nobody will set.
            event = cmd.event
            if cmd.answered:
                break
            if cmd.leads:
                cmd.leads = False
                self._lead()
                continue
            assert event is not None
            event.wait()
        if cmd.error is not None:
            raise cmd.error
        return cmd.result

    def _lead(self) -> None:
        """Prepares and commits (or queues) one group: every pending command."""
        with self.lock:
            batch = self._pending
            self._pending = []
        try:
            with self._state_lock:
                group = self._prepare(batch)
            if self._committer is None:
                self._settle_groups([group])
            else:
                self._commits.put(group)
        except BaseException as exc:  # never leave callers hanging
            for cmd in batch:
                if not cmd.done:
                    cmd.error = exc
                    self.finish(cmd)
            raise
        finally:
            self._pass_lead()

    def _pass_lead(self) -> None:
        """Hands the next group to the oldest waiting caller, so a leader
        returns to its own caller after one group however busy the engine is."""
        with self.lock:
            if not self._pending:
                self._leading = False
                return
            successor = self._pending[0]
            successor.leads = True
            woken = successor.event
            successor.event = Signal()
        assert woken is not None
        woken.set()

    # ---- committing

    def _settle_groups(self, groups: list[Group]) -> bool:
        """Commits prepared groups in one transaction, then publishes their
        effects and answers their callers, in order."""
        try:
            commit = _merge([g.commit for g in groups])
        except _TwoRuns:
            # A run ended twice in this window: one transaction per group.
            for i, group in enumerate(groups):
                if not self._settle_groups([group]):
                    self._fail_groups(groups[i + 1 :], StorageError("an earlier commit failed"))
                    return False
            return True
        if commit:
            try:
                self._store.commit(commit)
            except Exception as exc:
                self._fail_groups(groups, StorageError(str(exc)))
                return False
            self._counters["commits"] += 1
        for group in groups:
            if group.tx.after_commit or group.tx.terminal:
                with self._state_lock:
                    self._publish(group.tx)
            for cmd in group.batch:
                if group.parked and cmd in group.parked:
                    self._answer(cmd)
                else:
                    self.finish(cmd)
            for cmd in group.tx.claimed:
                self.finish(cmd)
        return True

    def _fail_groups(self, groups: list[Group], error: StorageError) -> None:
        """Undoes failed groups in memory and answers their callers with the
        storage error."""
        with self._state_lock:
            if self._committer is not None:
                # Later groups were prepared on top of the failed one.
                while True:
                    try:
                        groups.append(self._commits.get_nowait())
                    except queue.Empty:
                        break
            for group in groups:
                self._rollback(group.tx)
        for group in groups:
            for cmd in [*group.batch, *group.tx.claimed]:
                with self.lock:
                    cmd.parked = None if cmd.parked is None else "expired"
                cmd.error, cmd.result = error, None
                self.finish(cmd)

    def _commit_loop(self) -> None:
        while True:
            groups = [self._commits.get()]
            while True:  # everything prepared meanwhile joins this commit
                try:
                    groups.append(self._commits.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP_GROUP in groups
            groups = [g for g in groups if g is not _STOP_GROUP]
            if groups:
                self._settle_groups(groups)
            if stop:
                return

    # ---- answering and parking

    def finish(self, cmd: Command) -> None:
        cmd.done = True
        cmd.answered = True
        if cmd.event is not None:
            cmd.event.set()

    def _answer(self, cmd: Command) -> None:
        """Hands a parked command back to its caller, who then waits on it."""
        with self.lock:
            cmd.answered = True
            event = cmd.event
            if cmd.parked == "waiting":
                cmd.event = Signal()
        if event is not None:
            event.set()

    def park(self, cmd: Command) -> Any:
        """Parks a command until a later group completes it or it expires."""
        with self.lock:
            cmd.parked = "waiting"
            if cmd.event is None:
                cmd.event = Signal()
        return PENDING

    def claim(self, cmd: Command) -> bool:
        with self.lock:
            if cmd.parked != "waiting":
                return False
            cmd.parked = "claimed"
            return True

    def expire(self, cmd: Command) -> bool:
        """Gives up on a parked command; True unless a group already claimed it."""
        with self.lock:
            if cmd.parked == "waiting":
                cmd.parked = "expired"
            expired = cmd.parked == "expired"
            event = cmd.event
        if expired and event is not None:
            event.set()
        return expired

    def await_parked(self, cmd: Command, timeout_ms: int) -> bool:
        """Waits for a parked command; True when it got a result."""
        with self.lock:
            event = cmd.event
        if event is not None and not cmd.done:
            event.wait(timeout_ms / 1000.0)
        if self.expire(cmd) and not cmd.done:
            return False
        while not cmd.done:
            with self.lock:
                event = cmd.event
            if event is not None:
                event.wait(0.005)
        if cmd.error is not None:
            raise cmd.error
        return cmd.result is not None


def _merge(batches: list[CommitBatch]) -> CommitBatch:
    """One batch with the changes of several, in order."""
    if len(batches) == 1:
        return batches[0]
    merged = CommitBatch()
    changes: dict[str, ExecutionChange] = {}
    for batch in batches:
        merged.definitions.extend(batch.definitions)
        merged.workers.extend(batch.workers)
        for change in batch.executions:
            into = changes.get(change.execution_id)
            if into is None:
                changes[change.execution_id] = ExecutionChange(
                    change.execution_id,
                    change.row,
                    list(change.events),
                    change.archive_run,
                    list(change.archived),
                    change.new,
                )
                continue
            if change.archive_run is not None:
                if into.archive_run is not None:
                    raise _TwoRuns
                # A run ended: what came before joins the archived run.
                into.archived = into.events + change.archived
                into.archive_run = change.archive_run
                into.events = list(change.events)
            else:
                into.events.extend(change.events)
            into.row = change.row
    merged.executions = list(changes.values())
    return merged
