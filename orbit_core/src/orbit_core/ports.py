"""The engine's ports: what it needs from the outside world, as Protocols.
Adapters (the in-memory store here, the SQL stores in `orbit_store`, the
real and simulated clocks) satisfy them structurally.

`Faults` is the one port the engine talks out through rather than asks: the
failures it handles by itself (a commit the store refused, an exception in a
background thread or while a group was prepared) are reported there, and the
component is marked healthy again once it works. `FaultLog`, the default,
only remembers; the server's adapter also logs and counts them.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

import attrs

from orbit_core.api import ContractRef, ErrorDoc, ExecutionSummary
from orbit_core.events import Event, WorkflowPaused, WorkflowResumed
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.visibility.check import Filter
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.page import SearchQuery


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def subscribe(self, listener: Callable[[], None]) -> bool:
        """Asks to be told after each move of time. True: the clock calls
        `listener` when it advances (a simulated clock), so the engine ticks
        then and starts no thread to tick; False: time moves by itself."""
        ...

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        """Stops telling `listener` (a closed engine); unknown ones are ignored."""
        ...


class IdSource(Protocol):
    """Every identifier the engine hands out: task tokens, execution ids, sessions."""

    def token(self) -> str: ...

    def execution_id(self) -> str: ...

    def session_id(self) -> str: ...


@attrs.define(slots=True)
class ExecutionRow:
    """The `workflow_executions` projection of one execution."""

    execution_id: str
    workflow: str
    version: str
    definition_hash: str
    status: str
    created_at_ms: int
    updated_at_ms: int
    last_seq: int
    run: int = 1

    def to_json(self) -> ExecutionSummary:
        return {
            "execution_id": self.execution_id,
            "workflow": self.workflow,
            "version": self.version,
            "status": self.status,
            "created_at_ms": self.created_at_ms,
            "updated_at_ms": self.updated_at_ms,
        }


@attrs.frozen
class PauseMark:
    """When a paused execution was paused, and why (None: no reason given)."""

    paused_at_ms: int
    reason: str | None


def pause_marks(events: Iterable[tuple[str, Event]]) -> dict[str, PauseMark]:
    """Folds (execution id, event) pairs in history order, only pauses and
    resumes needed, into the marks of those left paused."""
    marks: dict[str, PauseMark] = {}
    for eid, event in events:
        if isinstance(event, WorkflowPaused):
            marks[eid] = PauseMark(event.timestamp_ms, event.reason)
        elif isinstance(event, WorkflowResumed):
            marks.pop(eid, None)
    return marks


@attrs.define(slots=True)
class WorkerRow:
    """The latest registration of a worker id (`worker_registry`)."""

    worker_id: str
    runtime: str
    sdk: str | None
    contracts: list[ContractRef]
    registered_at_ms: int
    last_seen_ms: int


@attrs.define(slots=True)
class DefinitionRow:
    name: str
    version: str
    definition_hash: str
    ir: JsonObject
    created_at_ms: int
    # The row takes the place of the one stored for (name, version): a
    # development server's replacement (Engine.deploy(replace=True)).
    replaces: bool = False


@attrs.frozen(slots=True)
class IdempotencyRow:
    """A start's idempotency key (docs/language/flow-control.md): the
    execution it made, the workflow and a digest of the input it was asked
    with, and until when the key holds."""

    key: str
    execution_id: str
    workflow: str
    input_digest: str
    created_ms: int
    expires_ms: int


@attrs.frozen(slots=True)
class RateRow:
    """The token bucket of one key of a workflow's start `rate`
    (orbit_core/flow/rate.py): its theoretical arrival time in microseconds.
    Written in the commit of the start that took the token."""

    workflow: str
    key: str
    tat_us: int
    # When the group that wrote it ran (not stored: a bucket whose time is
    # before it is full, and the store may delete it).
    at_ms: int = 0


@attrs.frozen(slots=True)
class StepSlot:
    """A slot of a step's `concurrency` counted in the store (shared mode,
    engine/step_slots.py): `flow` is `<workflow>/<step>`, `key` the key's
    text, and the holder the offer of one unit (its execution, unit key,
    run and `StepScheduled` seq)."""

    flow: str
    key: str
    execution_id: str
    unit_key: str
    run: int
    offer_seq: int


@attrs.frozen(slots=True)
class StepWait:
    """A unit waiting for a slot of a step's `concurrency`, as the store
    keeps its row (shared mode, engine/step_slots.py): its offer, and its
    place in the line (`priority`, then `since_ms`)."""

    offer: StepSlot
    priority: int
    since_ms: int


@attrs.define(slots=True)
class ExecutionChange:
    """What one commit adds to one execution. With `archive_run` set, the run
    ended with continue-as-new: `archived` is appended to it, its whole history
    moves to the run archive, and `events` starts the next run."""

    execution_id: str
    row: ExecutionRow
    events: list[Event] = attrs.field(factory=list)
    archive_run: int | None = None
    # Read only (never appended to), so one empty tuple serves every change.
    archived: Sequence[Event] = ()
    new: bool = False
    # Search-index rows the events make known (orbit_core.visibility), written
    # in the same transaction; empty for workflows without a `search` block.
    search: list[SearchValue] = attrs.field(factory=list)
    # The idempotency key of the start that created the execution, written
    # in the transaction that creates it.
    idempotency: IdempotencyRow | None = None
    # The ownership tree a new top-level execution joins when it is not its
    # own: the flow gate of its key, in shared mode (engine/flow_gates.py).
    # Other stores ignore it.
    root: str | None = None


@attrs.frozen(slots=True)
class TaskOffer:
    """A worker task queued by a group, for an engine built with
    `offer_tasks=True` (servers sharing executions, chapter 44): the store
    writes it to a queue that every server claims from, in the group's
    transaction, instead of the engine keeping it in its own index.
    `assignment` is what a worker is handed, less the token and deadline
    the claiming server adds; `runtime` is the routing runtime (None: any).
    `priority`, `fair_key` and `weight` are the step's flow control, as the
    engine's own index orders by them (engine/step_gate.py, `Order`): the
    board orders its tasks by them too."""

    execution_id: str
    unit_key: str
    offer_seq: int
    task: str
    contract_version: str
    runtime: str | None
    timeout_ms: int | None
    assignment: JsonObject
    priority: int = 0
    fair_key: str | None = None
    weight: int = 1


@attrs.frozen(slots=True)
class OwnerMessage:
    """Shared mode: an inbox entry a group writes in its own transaction for
    the owner of `target` (an execution, or a flow gate), so that what it
    asks of another server is durable with the events that decided it (a
    gated child's start, its end, its cancellation: engine/remote_children.py).
    `kind` and `payload` are an inbox entry's."""

    target: str
    kind: str
    payload: JsonObject


@attrs.define(slots=True)
class CommitBatch:
    """Everything one group commit writes, in one transaction."""

    definitions: list[DefinitionRow] = attrs.field(factory=list)
    executions: list[ExecutionChange] = attrs.field(factory=list)
    workers: list[WorkerRow] = attrs.field(factory=list)
    # Only with `Engine(offer_tasks=True)`; other stores ignore it.
    offers: list[TaskOffer] = attrs.field(factory=list)
    # What the caller of each command applied named it (`Engine.receipt`):
    # a store may record them in the transaction, so that whether a request
    # was applied commits with its events. Other stores ignore them.
    receipts: list[str] = attrs.field(factory=list)
    # The buckets of start rates the group's starts took tokens from (kept by
    # the store in the same transaction).
    rates: list[RateRow] = attrs.field(factory=list)
    # Shared mode: the step slots whose units left their offer in this
    # group (engine/step_slots.py), deleted in the same transaction. Other
    # stores ignore them (a single server keeps its step slots in memory).
    freed_slots: list[StepSlot] = attrs.field(factory=list)
    # Shared mode: the waiting rows of units that left a step's line in this
    # group without a slot (cancelled, paused, ended: engine/step_slots.py),
    # deleted in the same transaction. Other stores ignore them.
    freed_waits: list[StepSlot] = attrs.field(factory=list)
    # Shared mode: inbox entries for other executions' owners, written in
    # the same transaction (engine/remote_children.py). Other stores ignore
    # them (only an engine built with a `Sharing` makes any).
    messages: list[OwnerMessage] = attrs.field(factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.definitions
            or self.executions
            or self.workers
            or self.offers
            or self.receipts
            or self.rates
            or self.freed_slots
            or self.freed_waits
            or self.messages
        )


@attrs.frozen(slots=True)
class ScheduleRow:
    """One row of `orbit_schedules`: a schedule's settings (`spec`, the JSON
    of `orbit_core.schedules.spec.ScheduleSpec`) and its firing state.
    `next_fire_ms` is the pending occurrence and `due_ms` when it fires (its
    jitter, or a retry time); both are None while paused or once ended."""

    schedule_id: str
    spec: JsonObject
    paused: bool
    next_fire_ms: int | None
    due_ms: int | None
    last_fire_ms: int | None
    last_execution_id: str | None
    fired: int
    skipped: int
    last_error: str | None
    created_at_ms: int
    updated_at_ms: int
    claimed_by: str | None = None
    claimed_until_ms: int | None = None


@attrs.frozen(slots=True)
class ScheduleAdvance:
    """The second compare-and-set of a fire: applied only while the row still
    holds `owner`'s claim on `occurrence_ms`. Counters are added; a None
    `last_fire_ms` or `last_execution_id` leaves the stored one."""

    schedule_id: str
    occurrence_ms: int
    next_fire_ms: int | None
    due_ms: int | None
    last_fire_ms: int | None
    last_execution_id: str | None
    fired: int
    skipped: int
    last_error: str | None
    updated_at_ms: int


class Store(Protocol):
    """Durable storage. `commit` is one transaction (one fsync) or nothing."""

    def load_definitions(self) -> list[DefinitionRow]: ...

    def load_active(self) -> list[tuple[str, list[Event]]]:
        """Every non-terminal execution with its current run's history."""
        ...

    def commit(self, batch: CommitBatch) -> None: ...

    def history(self, execution_id: str, run: int | None = None) -> list[Event] | None: ...

    def execution_row(self, execution_id: str) -> ExecutionRow | None: ...

    def find_idempotency(self, key: str, now_ms: int) -> IdempotencyRow | None:
        """The row of start idempotency key `key` unless it expired before
        `now_ms` (docs/language/flow-control.md)."""
        ...

    def load_rates(self) -> list[RateRow]:
        """Every start-rate bucket written, the last value of each
        (workflow, key), read at recovery (engine/start_gates.py)."""
        ...

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        """`{id: definition_hash}` for the ids among `execution_ids` the store
        holds, in one read: the engine checks the ids of a group's starts at
        once with it, not with one `execution_row` each."""
        ...

    def list_executions(
        self, status: str | None, workflow: str | None, limit: int
    ) -> list[ExecutionRow]: ...

    def search_executions(self, query: SearchQuery) -> list[ExecutionRow]:
        """Up to `query.limit` executions that pass the typed filter, the
        status and workflow, after the cursor, newest first (docs/language/
        visibility.md); the filter runs in the store, on its index."""
        ...

    def pauses(self, execution_ids: list[str]) -> dict[str, PauseMark]:
        """The ids among `execution_ids` whose current run is paused (its
        last WorkflowPaused has no WorkflowResumed after it), in one read:
        the listing marks them (docs/operating-executions.md)."""
        ...

    def list_workers(self) -> list[WorkerRow]: ...

    # ---- schedules (each call is its own transaction)

    def load_schedules(self) -> list[ScheduleRow]: ...

    def get_schedule(self, schedule_id: str) -> ScheduleRow | None: ...

    def insert_schedule(self, row: ScheduleRow) -> bool:
        """False (and nothing written) when the id exists."""
        ...

    def update_schedule(self, row: ScheduleRow) -> bool:
        """Writes the settings, `paused`, `next_fire_ms`, `due_ms`,
        `last_error` and `updated_at_ms`, and drops any claim; counters and
        the last fire are kept. False when the schedule does not exist."""
        ...

    def delete_schedule(self, schedule_id: str) -> bool: ...

    def claim_schedules(
        self, claims: list[tuple[str, int]], owner: str, until_ms: int, now_ms: int
    ) -> list[str]:
        """For each (schedule, occurrence): claims it for `owner` until
        `until_ms` if the row is unpaused, still pending that occurrence and
        holds no live claim. Returns the ids claimed."""
        ...

    def advance_schedules(self, advances: list[ScheduleAdvance], owner: str) -> list[str]:
        """Applies each advance whose claim `owner` still holds; returns their ids."""
        ...

    def record_schedule_trigger(self, schedule_id: str, execution_id: str, now_ms: int) -> bool:
        """A manual start: one more fired, the last execution, the update time."""
        ...

    def record_schedule_skip(self, schedule_id: str, now_ms: int) -> bool:
        """A manual start the overlap policy declined: one more skipped and
        the update time. False when the schedule does not exist."""
        ...

    def release_schedule_claims(self) -> None:
        """Drops every claim (a single server starting: their owner is gone)."""
        ...

    def close(self) -> None: ...


@attrs.frozen
class BatchRow:
    """A batch operation (docs/operating-executions.md): `action` over the
    executions `filter` selected. `state` is `selecting` (the selection is
    being written), `running` or `done`; `processed` of `total` items have
    an outcome."""

    batch_id: str
    action: str
    params: JsonObject
    filter: JsonObject
    state: str
    total: int
    processed: int
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: int | None = None


@attrs.frozen
class BatchItem:
    """One selected execution of a batch, and what became of it (`outcome`
    None: not yet acted on; `claimed_at_ms` set: acting began)."""

    position: int
    execution_id: str
    claimed_at_ms: int | None = None
    outcome: str | None = None
    code: str | None = None
    message: str | None = None


class BatchStore(Protocol):
    """Where batch operations are kept, beside `Store`. Each call is its own
    short transaction, outside any group commit."""

    def prepare_batches(self) -> None:
        """Creates the batch tables (the first batch does it)."""
        ...

    def has_batches(self) -> bool:
        """Whether the batch tables exist (a database never used with them has none)."""
        ...

    def insert_batch(self, row: BatchRow) -> None: ...

    def batch_targets(
        self,
        workflow: str | None,
        status: str | None,
        after: tuple[int, str] | None,
        limit: int,
        where: Filter | None = None,
    ) -> list[tuple[int, str]]:
        """(created_at_ms, execution_id) of the executions matching (and
        passing the typed filter `where`, as `search_executions` reads it),
        oldest first, after `after`: the selection, read a slice at a time."""
        ...

    def add_batch_items(
        self, batch_id: str, first: int, execution_ids: Sequence[str], now_ms: int
    ) -> bool:
        """Items `first`, `first + 1`, ... of a batch still `selecting` whose
        `total` is `first`; the total becomes the count written, in the same
        transaction. False, and nothing written, when the total is not
        `first` (another server went on with the selection)."""
        ...

    def set_batch(self, batch_id: str, *, state: str, total: int, now_ms: int) -> None: ...

    def batch(self, batch_id: str) -> BatchRow | None: ...

    def batches(self, limit: int) -> list[BatchRow]:
        """Newest first."""
        ...

    def open_batches(self) -> list[BatchRow]:
        """The batches not done, oldest first (to go on after a restart)."""
        ...

    def batch_items(
        self, batch_id: str, *, pending: bool, after: int, limit: int
    ) -> list[BatchItem]:
        """Items by position after `after`; `pending`: only those without an outcome."""
        ...

    def batch_outcomes(self, batch_id: str) -> dict[str, int]:
        """How many items have each outcome (one aggregate read)."""
        ...

    def claim_batch_items(self, batch_id: str, positions: Sequence[int], now_ms: int) -> None: ...

    def finish_batch_items(
        self, batch_id: str, items: Sequence[BatchItem], now_ms: int, done: bool
    ) -> None:
        """Records the outcomes of `items` and the progress, in one
        transaction; `done`: the batch has no item left."""
        ...


class RetentionStore(Protocol):
    """What the retention sweeper of a server (`orbit server --retention`)
    needs of a store, beside `Store`: which finished executions may go, and
    their deletion. Each call is its own short transaction, made outside any
    group commit, so a sweep never holds the engine's lead."""

    def prepare_retention(self) -> None:
        """Creates what the other calls need (once, when a server with
        retention opens the store)."""
        ...

    def set_retention(self, execution_id: str, retention_ms: int) -> None:
        """An execution's own retention, in place of the server's."""
        ...

    def retention_candidates(
        self,
        now_ms: int,
        retention_ms: int,
        limit: int,
        after: tuple[int, str] | None = None,
        by_definition: Mapping[str, int] | None = None,
    ) -> list[ExecutionRow]:
        """Finished executions whose end (`updated_at_ms`) is longer ago
        than their retention, by end then id, after the (end, id) `after`:
        never a schedule's last execution, nor a child whose parent has not
        finished. An execution's retention is its own (`set_retention`),
        else its definition's (`by_definition`, keyed by definition hash),
        else `retention_ms`."""
        ...

    def retention_histories(
        self, execution_ids: Sequence[str]
    ) -> list[tuple[ExecutionRow, list[list[Event]]]]:
        """The row and every run's history (first run first) of each of
        `execution_ids` that is stored, in one read, in the order asked."""
        ...

    def retention_search_values(self, execution_ids: Sequence[str]) -> dict[str, list[SearchValue]]:
        """The search index rows of each of `execution_ids` that has some
        (what the archive keeps so that `orbit ps --archived --where` filters
        as the live index does)."""
        ...

    def delete_executions(self, execution_ids: Sequence[str]) -> int:
        """Deletes those of `execution_ids` that are finished, with every
        event of every run and their own retention, in one transaction;
        returns how many."""
        ...


class BuiltinTasks(Protocol):
    """Runs built-in tasks (`orbit.*`) inside the runtime. `run` is called on
    an engine thread and reports through `done(output, error)`, exactly once."""

    def supports(self, task_name: str) -> bool: ...

    def run(
        self,
        task_name: str,
        input: JsonValue,
        timeout_ms: int | None,
        done: Callable[[JsonValue, ErrorDoc | None], None],
    ) -> None: ...


class RandomSource(Protocol):
    """Uniform floats in [0, 1): the jitter of retry delays. `random.Random`
    satisfies it; seed one for deterministic tests."""

    def random(self) -> float: ...


# What `Faults.report` is told about: where the engine caught a failure.
FAULT_COMPONENTS = ("store", "prepare", "command", "tick", "commit", "handler", "builtin")


class Faults(Protocol):
    """Failures the engine handled itself, so that someone can see them.

    `report` is called from whichever engine thread caught the failure (never
    with a lock of the engine held that a caller could need) and must not
    raise; `recovered` when the component works again (the store after a
    commit succeeded). `counts` and `failing` are what the server's health and
    metrics read."""

    def report(self, component: str, error: BaseException) -> None: ...

    def recovered(self, component: str) -> None: ...

    def counts(self) -> Mapping[str, int]:
        """Failures reported so far, by component."""
        ...

    def failing(self) -> Mapping[str, str]:
        """The components failing now, with the message of their last failure."""
        ...


class FaultLog:
    """The default `Faults`: counts failures and remembers which components
    fail now and the last error of each; nothing is printed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._failing: dict[str, str] = {}
        self.last: dict[str, BaseException] = {}

    def report(self, component: str, error: BaseException) -> None:
        with self._lock:
            self._counts[component] = self._counts.get(component, 0) + 1
            self._failing[component] = f"{type(error).__name__}: {error}"
            self.last[component] = error

    def recovered(self, component: str) -> None:
        with self._lock:
            self._failing.pop(component, None)

    def counts(self) -> Mapping[str, int]:
        with self._lock:
            return dict(self._counts)

    def failing(self) -> Mapping[str, str]:
        with self._lock:
            return dict(self._failing)


def system_random() -> RandomSource:
    """The default jitter source: the operating system's randomness."""
    return random.SystemRandom()


class SystemClock:
    """Wall-clock milliseconds since the Unix epoch."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def subscribe(self, listener: Callable[[], None]) -> bool:
        return False  # wall-clock time moves by itself: the engine ticks on a thread

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        return None


# The UUID variant digit (8, 9, a or b) for each random hex digit.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
_urandom = os.urandom


def _uuid4() -> str:
    h = _urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


class UuidIds:
    """Random UUIDv4 identifiers (formatted directly, and each method is the
    function itself rather than a wrapper: tokens are on the hot path)."""

    token = staticmethod(_uuid4)
    execution_id = staticmethod(_uuid4)
    session_id = staticmethod(_uuid4)
