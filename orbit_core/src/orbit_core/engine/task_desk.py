"""The task desk of a shared-mode server: one thread claims from the task
board (`coordination.TaskBoard`) for every poll waiting on this server.

A long poll waits in the engine for the server's own tasks and is
registered here at the same time (`enter`, then `parked` once it waits
there, `leave`): a round claims a task for it only after taking it back
from the engine (its `withdraw`, which fails when the engine gave it a
task meanwhile), so a poll never gets two. A round that found fewer tasks
than polls marks their group drained, and a poll that joins a drained
group does not start a round: nearly every task is taken in its owner's
engine, and the queue holds only those no poll there took.

Each waiting poll running its own claim would make every announcement on
`TASKS` cost one claim per waiting poll, nearly all of them finding
nothing (the first takes the task, the others skip it), and would queue
those claims behind the few connections of the board's adapter. Instead a poll hands itself to the desk and sleeps; the
desk's thread runs a round when there are waiting polls and something may
have changed (an announcement on `TASKS`, a poll that arrived since
the last round, or `recheck_s` without either), claiming for all of them in
one claim per group of polls that can take the same tasks (same
contracts and runtime, oldest poll first), this node's own tasks first
(`TaskBoard.claim_for`). A claim is made for one poll:
its session id goes with the claimed task and, when the task's execution is
owned elsewhere, into the owner's `dispatched` message, so a claim is never
passed to another poll.

A poll leaves when its wait is over, but not before one round has looked
for it (a poll with no wait, through `take`, still claims once) and not in
the middle of a round that may claim for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from orbit_core.coordination import Claim, TaskBoard
from orbit_core.errors import StorageError

# Contracts and runtime: the polls of one group can take the same tasks.
GroupKey = tuple[tuple[tuple[str, str], ...], str]
# A group's round: the claim of each poll answered, and whether the queue
# had no more for the group; or the error that stopped it.
Answers = tuple[dict["Waiter", Claim], bool] | StorageError


class Waiter:
    """One poll waiting at the desk."""

    __slots__ = (
        "claim",
        "error",
        "in_engine",
        "in_round",
        "key",
        "leaving",
        "looked",
        "session_id",
        "wake",
        "withdraw",
        "worker_id",
    )

    def __init__(
        self, key: GroupKey, session_id: str, worker_id: str, lock: threading.Lock
    ) -> None:
        self.key = key
        self.session_id = session_id
        self.worker_id = worker_id
        # Its own condition (on the desk's lock): a round wakes only the
        # polls it answered or that wait to leave, not every waiting poll.
        self.wake = threading.Condition(lock)
        self.claim: Claim | None = None
        self.error: StorageError | None = None
        self.looked = False  # a round has looked for it
        self.in_round = False  # a round in progress may claim for it
        self.leaving = False  # would have left, but a round holds it
        self.in_engine = False  # entered with `enter` (waits in the engine), not `take`
        # Takes the poll back from the engine (`Engine.poll_withdrawable`):
        # None until it waits there.
        self.withdraw: Callable[[], bool] | None = None


class Claims(Protocol):
    """How a shared engine's polls get tasks from the board: `TaskDesk`, or
    a desk that claims on the caller's thread (the simulation's)."""

    def take(
        self,
        contracts: list[tuple[str, str]],
        runtime: str,
        session_id: str,
        worker_id: str,
        deadline: float,
        *,
        gone: Callable[[], bool],
        alive: Callable[[], None],
    ) -> Claim | None: ...

    def enter(
        self, contracts: list[tuple[str, str]], runtime: str, session_id: str, worker_id: str
    ) -> Waiter: ...

    def parked(self, waiter: Waiter, withdraw: Callable[[], bool]) -> None: ...

    def leave(self, waiter: Waiter) -> tuple[Claim | None, StorageError | None]: ...


class TaskDesk:
    def __init__(
        self,
        tables: TaskBoard,
        token: Callable[[str], str],
        *,
        recheck_s: float,
        on_error: Callable[[StorageError], None],
    ) -> None:
        self._tables = tables
        # Groups whose last round found fewer tasks than polls, and no
        # notification since: a poll that `enter`s one needs no round.
        self._drained: set[GroupKey] = set()
        self._token = token
        self._recheck_s = recheck_s
        self._on_error = on_error
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # the claiming thread's
        self._waiting: dict[GroupKey, list[Waiter]] = {}
        self._stirred = False  # a notification or a new poll since the last round
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="orbit-claims", daemon=True)
        self._thread.start()

    def stir(self, payloads: list[str] | None = None) -> None:
        """Something may be claimable: an announcement on `TASKS`."""
        with self._lock:
            self._drained.clear()
            self._stirred = True
            self._work.notify()

    def take(
        self,
        contracts: list[tuple[str, str]],
        runtime: str,
        session_id: str,
        worker_id: str,
        deadline: float,
        *,
        gone: Callable[[], bool],
        alive: Callable[[], None],
    ) -> Claim | None:
        """Waits until a round claims a task for this poll (returned), or
        until `deadline` (monotonic) or `gone()` (None). `alive` is called
        about every `recheck_s` while it waits. Raises the round's
        StorageError when the database refused the claim."""
        waiter = Waiter((tuple(sorted(contracts)), runtime), session_id, worker_id, self._lock)
        with self._lock:
            self._waiting.setdefault(waiter.key, []).append(waiter)
            self._stirred = True
            self._work.notify()
            try:
                while True:
                    if waiter.error is not None:
                        raise waiter.error
                    if waiter.claim is not None:
                        return waiter.claim
                    if self._stop:
                        return None
                    remaining = deadline - time.monotonic()
                    if (remaining <= 0 and waiter.looked) or gone():
                        if not waiter.in_round:
                            return None
                        waiter.leaving = True
                    elif remaining <= 0:
                        waiter.leaving = True  # after the round that looks for it
                    # (A poll about to leave is woken by the end of the round.)
                    wait = min(remaining, self._recheck_s)
                    waiter.wake.wait(self._recheck_s if waiter.leaving else max(0.001, wait))
                    if waiter.claim is None:
                        alive()
            finally:
                self._forget(waiter)

    def enter(
        self, contracts: list[tuple[str, str]], runtime: str, session_id: str, worker_id: str
    ) -> Waiter:
        """Registers a poll that waits in the engine for this server's own
        tasks, until it calls `leave`; rounds claim for it once `parked`
        gave its `withdraw`, which a round calls before it claims a task for
        the poll (so the poll never gets a task from both)."""
        waiter = Waiter((tuple(sorted(contracts)), runtime), session_id, worker_id, self._lock)
        waiter.in_engine = True
        with self._lock:
            self._waiting.setdefault(waiter.key, []).append(waiter)
        return waiter

    def parked(self, waiter: Waiter, withdraw: Callable[[], bool]) -> None:
        """The poll waits in the engine now: `withdraw` takes it back."""
        with self._lock:
            waiter.withdraw = withdraw
            if waiter.key not in self._drained:
                self._stirred = True
                self._work.notify()

    def leave(self, waiter: Waiter) -> tuple[Claim | None, StorageError | None]:
        """Ends an `enter`: after the round that may be claiming for it, so
        that no claim is made for a poll that left; its claim or error."""
        with self._lock:
            while waiter.in_round and not self._stop:
                waiter.leaving = True
                waiter.wake.wait(self._recheck_s)
            self._forget(waiter)
            return waiter.claim, waiter.error

    def _forget(self, waiter: Waiter) -> None:
        """No round claims for it any more (under the lock)."""
        group = self._waiting.get(waiter.key)
        if group is not None and waiter in group:
            group.remove(waiter)
            if not group:
                del self._waiting[waiter.key]

    def close(self) -> None:
        with self._lock:
            self._stop = True
            self._work.notify()
            for waiters in self._waiting.values():
                for waiter in waiters:
                    waiter.wake.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        last = time.monotonic()
        while True:
            groups = self._next_round(last)
            if groups is None:
                return
            last = time.monotonic()
            self._answer(groups, {key: self._claim(key, ws) for key, ws in groups.items()})

    def _next_round(self, last: float) -> dict[GroupKey, list[Waiter]] | None:
        """Waits until a round is due; the polls it claims for (None: closed)."""
        with self._lock:
            while not self._stop:
                due = last + self._recheck_s
                if self._waiting and (self._stirred or time.monotonic() >= due):
                    break
                self._work.wait(max(0.0, due - time.monotonic()) if self._waiting else None)
            if self._stop:
                return None
            self._stirred = False
            # (A poll of `enter` is not claimed for before it waits in the engine.)
            groups = {
                key: kept
                for key, ws in self._waiting.items()
                if (kept := [w for w in ws if not w.in_engine or w.withdraw is not None])
            }
            for waiters in groups.values():
                for waiter in waiters:
                    waiter.in_round = True
            return groups

    def _claim(self, key: GroupKey, waiters: list[Waiter]) -> Answers:
        """Claims for a group's polls: each claim with its poll, and whether
        the queue had no more for them (every poll asked, and fewer found)."""
        kept: list[Waiter] = []
        refused = False

        def keep(i: int) -> bool:
            nonlocal refused
            waiter = waiters[i]
            withdraw = waiter.withdraw
            if not waiter.in_engine or (withdraw is not None and withdraw()):
                kept.append(waiter)
                return True
            refused = True
            return False

        try:
            claims = self._tables.claim_for(
                list(key[0]),
                key[1],
                [(w.session_id, w.worker_id) for w in waiters],
                self._token,
                keep,
            )
        except StorageError as exc:
            self._on_error(exc)
            return exc
        except Exception as exc:  # the thread must outlive any one failure
            error = StorageError(f"claiming a task failed: {exc}")
            error.__cause__ = exc
            self._on_error(error)
            return error
        drained = not refused and len(claims) < len(waiters)
        return dict(zip(kept, claims, strict=False)), drained

    def _answer(
        self, groups: dict[GroupKey, list[Waiter]], results: dict[GroupKey, Answers]
    ) -> None:
        with self._lock:
            for key, waiters in groups.items():
                result = results[key]
                if isinstance(result, StorageError) or not result[1]:
                    self._drained.discard(key)
                else:
                    self._drained.add(key)
                for waiter in waiters:
                    waiter.looked = True
                    waiter.in_round = False
                    if isinstance(result, StorageError):
                        if waiter.in_engine and not waiter.leaving:
                            continue  # still waits in the engine: the next round
                        waiter.error = result
                    elif waiter in result[0]:
                        waiter.claim = result[0][waiter]
                    else:
                        if waiter.leaving:
                            waiter.wake.notify()
                        continue
                    # Answered: no later round claims for it. (Only a poll
                    # that `close` ended has left during a round.)
                    self._forget(waiter)
                    waiter.wake.notify()
