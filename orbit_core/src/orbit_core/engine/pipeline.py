"""The group-commit pipeline: how commands become durable transactions.

Whichever caller finds no group in progress becomes the leader: it takes
every pending command and has the engine prepare them as one group (apply to
memory, decide, build the commit). The group is then committed in ONE store
transaction, inline or by a committer thread that merges every group prepared
meanwhile into one transaction while the next group is prepared. Only then are
the callers answered, so no caller learns of an event that is not durable. If
a commit fails, the engine rolls back what the failed groups (and every group
prepared on top of them) changed, and their callers get STORAGE_ERROR.

With a committer thread, a group that prepares cleanly never waits for the
groups queued before it: only undoing a failed prepare does (`_drain`),
because the store must hold everything before it to rebuild from. The
server runs without one (`pipeline` off, the default): the leader commits
its own group before it hands the lead on, so the commands that arrive while
a group is written make up the next, larger group.

Memory never runs ahead of the store, whatever fails:

- A group that fails while it is prepared (any exception, from a command or
  from the group's own work) is undone: the executions it touched are rebuilt
  from the store (after the groups queued before it are settled, with a
  committer thread), and the polls it claimed are answered with no task. When
  one command's own run raised, only that caller gets the error (`INTERNAL`,
  or the `OrbitError` it raised); the others run again as the next group.
- If the rebuild itself fails, memory can no longer be trusted: the engine
  stops taking commands (STORAGE_ERROR) until it is restarted.
- An exception while a committed group is published is reported and its
  callers are still answered; the committer thread never dies.

Failures are reported through the `Faults` port; storage errors keep the
store's exception as their cause.

Parked commands (long polls and waits that found nothing) are answered later
by the group that completes them, after that group's own commit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TypeVar

from orbit_core.engine.commands import PENDING, Command, Parked, Signal, Tx
from orbit_core.engine.counters import Counters
from orbit_core.errors import OrbitError, StorageError
from orbit_core.ports import CommitBatch, ExecutionChange, Faults, Store

T = TypeVar("T")

_BROKEN = (
    "the engine stopped: a failed group could not be undone because the store "
    "could not be read; restart it"
)


class Group:
    """A prepared group: its changes, what to commit, and whom to answer.
    `parked` are its long polls and waits that found nothing yet: another
    group will complete them, after that group's own commit."""

    __slots__ = ("barrier", "batch", "commit", "parked", "tx")

    def __init__(self, tx: Tx, commit: CommitBatch, batch: list[Command]) -> None:
        self.tx = tx
        self.commit = commit
        self.batch = batch
        self.parked = [cmd for cmd in batch if cmd.result is PENDING]
        # Set once every group queued before this one is settled (an empty
        # group queued only to wait for that).
        self.barrier: Signal | None = None


_STOP_GROUP = Group(Tx(0), CommitBatch(), [])


class _TwoRuns(Exception):
    """Two runs of one execution ended within one commit window."""


class PrepareFailed(Exception):
    """Raised by `prepare` when a group could not be prepared. `tx` holds what
    was applied before the failure; `culprit` is the command whose own run
    raised (None when the failure is not one command's); `error` is what its
    caller (or, without a culprit, every caller) gets; the original exception
    is the `__cause__`."""

    def __init__(self, tx: Tx, culprit: Command | None, error: OrbitError) -> None:
        super().__init__(error.message)
        self.tx = tx
        self.culprit = culprit
        self.error = error


def internal_error(exc: BaseException) -> OrbitError:
    """What a caller gets for an unexpected exception inside the engine."""
    error = OrbitError(f"internal error: {type(exc).__name__}", "INTERNAL")
    error.__cause__ = exc
    return error


class GroupCommit:
    """Runs commands in groups and answers them once their group is durable."""

    def __init__(
        self,
        store: Store,
        counters: Counters,
        *,
        prepare: Callable[[list[Command]], Group],
        publish: Callable[[Tx], None],
        rollback: Callable[[Tx], None],
        threaded: bool,
        faults: Faults,
    ) -> None:
        """`prepare` applies a batch of commands to memory and decides (and
        raises `PrepareFailed` when it cannot), `publish` makes a committed
        group's deferred changes, and `rollback` rebuilds from the store what
        a group changed in memory (the engine side of a commit)."""
        self._store = store
        self._counters = counters
        self._prepare = prepare
        self._publish = publish
        self._rollback = rollback
        self._faults = faults
        self._store_failing = False
        # Set when memory could not be rebuilt after a failure.
        self.broken = False
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

    def submit(
        self,
        fn: Callable[[Tx], T],
        read: bool = False,
        origin: str = "command",
        lookup: str | None = None,
    ) -> T:
        """Runs `fn` as one command and returns what it returned."""
        # `run` answers what `fn` returned; a `cast` here would cost a call.
        return self.run(Command(fn, read=read, origin=origin, lookup=lookup))  # type: ignore[return-value]

    def check_open(self) -> None:
        """Raises the StorageError a command gets once the engine is closed
        (or broken): for reads that go to the store without a command."""
        if self.closed:
            raise StorageError(_BROKEN if self.broken else "the engine is closed")

    def run(self, cmd: Command) -> object:
        self.check_open()
        with self.lock:
            self._pending.append(cmd)
            leads = not self._leading
            if leads:
                self._leading = True
            if not leads or self._committer is not None:
                cmd.event = Signal()
        if leads:
            self._lead()
        self._await(cmd)
        if cmd.error is not None:
            raise cmd.error
        return cmd.result

    def run_all(self, cmds: list[Command]) -> None:
        """Runs several commands as if each had its own caller, waiting for
        all: they join the pending list together, so they usually share one
        group, and the caller wakes once instead of once per command. Each
        command keeps its own answer (`result`, or the `error` a lone `run`
        would raise)."""
        if not cmds:
            return
        self.check_open()
        with self.lock:
            self._pending.extend(cmds)
            leads = not self._leading
            if leads:
                self._leading = True
            for cmd in cmds:
                cmd.event = Signal()
        if leads:
            self._lead()
        # Only the first of them can be handed the lead: the commands are
        # contiguous in the pending list and a leader takes the whole list.
        for cmd in cmds:
            self._await(cmd)

    def _await(self, cmd: Command) -> None:
        """Waits until `cmd` is answered, leading a group whenever its
        caller is handed the lead."""
        while True:
            # The event is read before the flags: whoever swaps in a new event
            # sets its flag first, so a caller never waits on an event that
            # nobody will set.
            event = cmd.event
            if cmd.answered:
                return
            if cmd.leads:
                cmd.leads = False
                self._lead()
                continue
            assert event is not None
            event.wait()

    def _lead(self) -> None:
        """Prepares and commits (or queues) one group: every pending command
        (again without the culprit when one command's run failed it)."""
        with self.lock:
            batch = self._pending
            self._pending = []
        try:
            while batch:
                batch = self._lead_group(batch)
        except BaseException as exc:  # never leave callers hanging
            for cmd in batch:
                if not cmd.done:
                    cmd.error = exc
                    self.finish(cmd)
            raise
        finally:
            self._pass_lead()

    def _lead_group(self, batch: list[Command]) -> list[Command]:
        """Runs one group; returns the commands to run again as the next one."""
        if self.broken:
            for cmd in batch:
                self._fail(cmd, StorageError(_BROKEN))
            return []
        try:
            with self._state_lock:
                group = self._prepare(batch)
                if self._committer is not None:
                    # Queued before memory is let go of, so that a failed
                    # commit undoing the groups queued before it finds it.
                    self._commits.put(group)
        except PrepareFailed as failed:
            return self._undo(failed, batch)
        except Exception as exc:  # a `prepare` that reports no transaction
            self._faults.report("prepare", exc)
            self._faults.recovered("prepare")
            error = internal_error(exc)
            for cmd in batch:
                self._fail(cmd, error)
            return []
        if self._committer is None:
            self._settle_groups([group])
        return []

    def _undo(self, failed: PrepareFailed, batch: list[Command]) -> list[Command]:
        """Undoes a group that failed while prepared and answers its culprit
        (or, without one, every caller); returns the commands to run again."""
        cause = failed.error.__cause__ or failed.error
        component = failed.culprit.origin if failed.culprit is not None else "prepare"
        self._faults.report(component, cause)
        self._faults.recovered(component)
        if self._committer is not None:
            # The group was prepared on top of groups not committed yet: the
            # store shows the state to go back to once they are settled.
            self._drain()
        try:
            with self._state_lock:
                self._rollback(failed.tx)
        except Exception as exc:
            self._break(exc)
            for cmd in [*batch, *failed.tx.claimed]:
                self._fail(cmd, StorageError(_BROKEN))
            return []
        for cmd in failed.tx.claimed:
            # Long polls of earlier groups: they end with no task, as at
            # their timeout, and poll again.
            cmd.result = None if cmd.want is None else []
            self.finish(cmd)
        if failed.culprit is None:
            for cmd in batch:
                self._fail(cmd, failed.error)
            return []
        self._fail(failed.culprit, failed.error)
        again = [cmd for cmd in batch if cmd is not failed.culprit]
        for cmd in again:
            cmd.reset()
        return again

    def _fail(self, cmd: Command, error: BaseException) -> None:
        if cmd.done:
            return
        with self.lock:
            cmd.parked = None if cmd.parked is None else Parked.EXPIRED
        cmd.error, cmd.result = error, None
        self.finish(cmd)

    def _break(self, exc: BaseException) -> None:
        """Memory could not be rebuilt from the store: stop taking commands."""
        self._faults.report("store", exc)
        self.broken = True
        self.closed = True

    def _drain(self) -> None:
        """Waits until every group queued so far is settled."""
        signal = Signal()
        barrier = Group(Tx(0), CommitBatch(), [])
        barrier.barrier = signal
        self._commits.put(barrier)
        committer = self._committer
        while not signal.wait(0.1):
            if committer is None or not committer.is_alive():
                return  # stopped (the engine closed): nothing is settled any more

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
                self._faults.report("store", exc)
                self._store_failing = True
                error = StorageError(str(exc))
                error.__cause__ = exc
                self._fail_groups(groups, error)
                return False
            if self._store_failing:
                self._store_failing = False
                self._faults.recovered("store")
            self._counters.commits += 1
        for group in groups:
            if group.tx.after_commit or group.tx.terminal:
                try:
                    with self._state_lock:
                        self._publish(group.tx)
                except Exception as exc:
                    # The group is durable: its callers get their answers.
                    self._faults.report("commit", exc)
                    self._faults.recovered("commit")
            for cmd in group.batch:
                if group.parked and cmd in group.parked:
                    self._answer(cmd)
                else:
                    self.finish(cmd)
            for cmd in group.tx.claimed:
                self.finish(cmd)
            if group.barrier is not None:
                group.barrier.set()
        return True

    def _fail_groups(self, groups: list[Group], error: OrbitError) -> None:
        """Undoes failed groups in memory and answers their callers with the
        storage error."""
        stop = False
        with self._state_lock:
            if self._committer is not None:
                # Later groups were prepared on top of the failed one.
                while True:
                    try:
                        later = self._commits.get_nowait()
                    except queue.Empty:
                        break
                    if later is _STOP_GROUP:
                        stop = True
                    else:
                        groups.append(later)
            try:
                for group in groups:
                    self._rollback(group.tx)
            except Exception as exc:
                self._break(exc)
        if stop:
            self._commits.put(_STOP_GROUP)
        for group in groups:
            for cmd in [*group.batch, *group.tx.claimed]:
                self._fail(cmd, error)
            if group.barrier is not None:
                group.barrier.set()

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
                try:
                    self._settle_groups(groups)
                except BaseException as exc:  # the thread outlives any failure
                    self._faults.report("commit", exc)
                    self._faults.recovered("commit")
                    # Whether or not the commit happened, the store is right.
                    self._fail_groups(groups, internal_error(exc))
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
            if cmd.parked is Parked.WAITING:
                cmd.event = Signal()
        if event is not None:
            event.set()

    def park(self, cmd: Command) -> object:
        """Parks a command until a later group completes it or it expires."""
        with self.lock:
            cmd.parked = Parked.WAITING
            if cmd.event is None:
                cmd.event = Signal()
        return PENDING

    def claim(self, cmd: Command) -> bool:
        with self.lock:
            if cmd.parked is not Parked.WAITING:
                return False
            cmd.parked = Parked.CLAIMED
            return True

    def expire(self, cmd: Command) -> bool:
        """Gives up on a parked command; True unless a group already claimed it."""
        with self.lock:
            if cmd.parked is Parked.WAITING:
                cmd.parked = Parked.EXPIRED
            expired = cmd.parked is Parked.EXPIRED
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
        merged.offers.extend(batch.offers)
        merged.receipts.extend(batch.receipts)
        merged.rates.extend(batch.rates)
        merged.freed_slots.extend(batch.freed_slots)
        merged.freed_waits.extend(batch.freed_waits)
        merged.messages.extend(batch.messages)
        for change in batch.executions:
            into = changes.get(change.execution_id)
            if into is None:
                changes[change.execution_id] = ExecutionChange(
                    change.execution_id,
                    change.row,
                    list(change.events),
                    change.archive_run,
                    change.archived,
                    change.new,
                    list(change.search),
                    change.idempotency,
                    change.root,
                )
                continue
            if change.archive_run is not None:
                if into.archive_run is not None:
                    raise _TwoRuns
                # A run ended: what came before joins the archived run.
                into.archived = [*into.events, *change.archived]
                into.archive_run = change.archive_run
                into.events = list(change.events)
            else:
                into.events.extend(change.events)
            into.search.extend(change.search)
            into.idempotency = into.idempotency or change.idempotency
            into.root = into.root or change.root
            into.row = change.row
    merged.executions = list(changes.values())
    return merged
