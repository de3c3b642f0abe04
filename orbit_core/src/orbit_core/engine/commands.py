"""A command (one caller's request) and the transaction its group builds."""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from orbit_core.dispatch import Session
from orbit_core.errors import OrbitError
from orbit_core.ports import DefinitionRow, ExecutionChange, OwnerMessage, TaskOffer, WorkerRow

if TYPE_CHECKING:
    from orbit_core import events as ev
    from orbit_core.engine.live import Live
    from orbit_core.plan import Plan

# The result of a command that parked (a long poll or a wait that found nothing yet).
PENDING: object = object()


class Signal:
    """A one-shot wake-up, cheaper than `threading.Event` (no Condition): the
    group commit wakes one waiting caller per command."""

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False

    def set(self) -> None:
        if not self._set:
            self._set = True
            try:
                self._lock.release()
            except RuntimeError:  # a racing set() released it first
                return

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        if self._lock.acquire(timeout=-1 if timeout is None else timeout):
            self._lock.release()
        return self._set


class Wake(Signal):
    """A parked command's wake-up for a caller that does not wait on a
    thread (the server's worker loop): every `set` calls `callback`, which
    must not block; the caller then looks at the command's state."""

    __slots__ = ("_callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        # No lock: nobody waits on this signal.
        self._callback = callback
        self._set = False

    def set(self) -> None:
        self._set = True
        self._callback()

    def wait(self, timeout: float | None = None) -> bool:
        return self._set


class _Receipts(threading.local):
    """The receipt the commands a thread submits carry (`Engine.receipt`);
    None outside its block (a class default, so reading it costs no lookup
    with a fallback on every command)."""

    current: str | None = None


RECEIPTS = _Receipts()


class Parked(enum.Enum):
    """Where a parked command (a long poll, a wait) is: WAITING for a group
    to answer it, CLAIMED by the group answering it, or EXPIRED (its caller
    gave up, or the engine ended it). Only a WAITING one can move, once."""

    WAITING = "waiting"
    CLAIMED = "claimed"
    EXPIRED = "expired"


class Command:
    """One caller's request, run by whichever thread leads its group.

    The fields most commands never change are class defaults rather than
    slots set in `__init__`: one command is made per request, and setting
    those ten fields was about a third of making one."""

    result: object = None
    error: BaseException | None = None
    done = False
    answered = False
    event: Signal | None = None
    # Set when the caller is handed the lead of the next group.
    leads = False
    # Long polls and waits: WAITING until claimed by a group or expired.
    parked: Parked | None = None
    session: Session | None = None
    # A parked claim of up to `want` tasks (answered with a list); None for a
    # poll (answered with one task).
    want: int | None = None
    # A parked poll's way to ask its transport whether the worker is still
    # there (None: assume it is). Checked before a task is handed to the poll
    # and on every tick.
    connected: Callable[[], bool] | None = None

    def __init__(
        self,
        fn: Callable[[Tx], object],
        read: bool = False,
        origin: str = "command",
        lookup: str | None = None,
    ) -> None:
        self.fn = fn
        self.read = read
        # Set by `Engine.receipt` in the submitting thread: recorded in the
        # commit of the group that applies this command (CommitBatch.receipts).
        self.receipt = RECEIPTS.current
        # The execution id a start names: its group asks the store about the
        # ids of all its starts in one read (`Tx.known`).
        self.lookup = lookup
        # Who asked (the `Faults` component named when its run raises).
        self.origin = origin

    def run(self, tx: Tx) -> None:
        """Runs the request against its group's transaction. An `OrbitError`
        is its caller's answer; any other exception fails the group."""
        try:
            self.result = self.fn(tx)
        except OrbitError as exc:
            self.error = exc
            return
        if self.receipt is not None and not self.read:
            tx.receipts.append(self.receipt)

    def reset(self) -> None:
        """Forgets a run whose group was undone, to run it again."""
        self.result = None
        self.error = None
        self.parked = None
        self.session = None
        self.want = None


class Tx:
    """What one group changes, committed as one transaction."""

    __slots__ = (
        "after_commit",
        "changes",
        "claimed",
        "definitions",
        "idempotency",
        "known",
        "last_event",
        "messages",
        "new_plans",
        "new_tasks",
        "now",
        "offers",
        "rates",
        "receipts",
        "reported",
        "terminal",
        "workers",
    )

    def __init__(self, now: int) -> None:
        self.now = now
        self.changes: dict[str, ExecutionChange] = {}
        # The event appended last: tells whether a command that raised had
        # already changed something.
        self.last_event: ev.Event | None = None
        self.definitions: list[DefinitionRow] = []
        # Definition hashes of the stored executions the group's starts
        # name, read in one query before they run (None: not stored).
        self.known: dict[str, str | None] = {}
        # Idempotency keys the group's starts recorded (engine/idempotency.py).
        self.idempotency: list[str] = []
        self.workers: list[WorkerRow] = []
        self.terminal: list[Live] = []
        self.new_tasks = False
        # Worker tasks queued for a shared queue (Engine(offer_tasks=True)).
        self.offers: list[TaskOffer] = []
        # Receipts of the commands applied (see Command.receipt).
        self.receipts: list[str] = []
        # Start-rate buckets the group took tokens from: (workflow, key) ->
        # the bucket's new state (engine/start_gates.py), stored with it.
        self.rates: dict[tuple[str, str], int] = {}
        self.claimed: list[Command] = []
        # Tokens whose results the group's commands took: if the group is
        # undone, those results are not recorded (Workers.unrecorded).
        self.reported: list[str] = []
        self.new_plans: list[Plan] = []
        # Changes to sessions and timers that must not happen if the commit fails.
        self.after_commit: list[Callable[[], None]] = []
        # Shared mode: inbox entries for other owners, in this group's commit
        # (engine/remote_children.py).
        self.messages: list[OwnerMessage] = []
