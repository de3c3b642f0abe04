"""Execution and unit state, and the fold that builds it from history.

`fold(events)` is a left fold of `apply(state, event)`. The state is a mutable
accumulator (building frozen objects per event would double the fold's cost);
the engine keeps one per active execution and applies each committed event to
it, so `fold(history)` and the live state must always agree (`to_json` of
both is compared by the tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import attrs

from orbit_core import events as ev
from orbit_core import unitkeys
from orbit_core.api import (
    EXEC_CANCELLED,
    EXEC_COMPENSATING,
    EXEC_COMPLETED,
    EXEC_CONTINUED_AS_NEW,
    EXEC_FAILED,
    EXEC_RUNNING,
    EXEC_TIMED_OUT,
    UNIT_ATTEMPT_FAILED,
    UNIT_CANCELLED,
    UNIT_DISPATCHED,
    UNIT_FAILED,
    UNIT_RETRY_WAIT,
    UNIT_RUNNING,
    UNIT_SCHEDULED,
    UNIT_SKIPPED,
    UNIT_SUCCEEDED,
    UNIT_UNCERTAIN,
    UNIT_WAITING,
    AbortDoc,
    ErrorDoc,
    ExecutionDoc,
    ExecutionStatus,
    FlowWaitDoc,
    HandlersDoc,
    ParentRef,
    SignalDoc,
    UnitDoc,
    UnitStatus,
)
from orbit_core.eval.scope import Scope
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.schedules.times import format_duration

# The statuses an execution ends in, and those a unit is done in (a pending
# unit has no status: None).
TERMINAL = frozenset(
    {
        EXEC_COMPLETED,
        EXEC_FAILED,
        EXEC_CANCELLED,
        EXEC_TIMED_OUT,
        EXEC_CONTINUED_AS_NEW,
    }
)
UNIT_DONE = frozenset({UNIT_SUCCEEDED, UNIT_SKIPPED, UNIT_FAILED, UNIT_CANCELLED})

# Marks a value never set (None is a JSON value); typed Any to stand in any field.
_ABSENT: Any = object()


@attrs.define(slots=True, eq=False)
class Unit:
    key: str
    status: UnitStatus | None = None
    attempt: int = 0
    input: JsonValue = _ABSENT
    idempotency_key: str | None = None
    output: JsonValue = _ABSENT
    error: ErrorDoc | None = None
    last_error: ErrorDoc | None = None
    redelivery: bool = False
    scheduled_at_ms: int | None = None
    dispatched_at_ms: int | None = None
    deadline_ms: int | None = None
    wake_at_ms: int | None = None
    finished_at_ms: int | None = None
    worker_id: str | None = None
    worker_session: str | None = None
    token: str | None = None
    tokens: list[list[str | int]] | None = None
    succeeded_seq: int | None = None
    dispatch_count: int = 0
    # Not in the API document: the seq of the latest StepScheduled, which
    # identifies the current offer of the unit to workers.
    offer_seq: int = 0
    # Not in the API document either: the time of the event that last changed
    # the unit, which `to_json` lists units by. The unit's own timestamps
    # cannot tell it (a failed attempt or a retry wait changes none of them).
    changed_at_ms: int = 0
    # Not in the API document: the tokens whose attempt failed while it was
    # theirs, other than by passing its deadline (a reported failure, an
    # output that broke the contract). That attempt has its answer, so a
    # later result for such a token is stale; a success after a timeout
    # still counts (chapter 42).
    answered: list[str] | None = None

    def attempts(self) -> list[tuple[str, int]]:
        """(token, attempt) of every attempt dispatched so far."""
        return [(str(token), int(attempt)) for token, attempt in self.tokens or ()]

    @property
    def done(self) -> bool:
        return self.status in UNIT_DONE

    def to_json(self) -> UnitDoc:
        out: dict[str, object] = {}
        if self.status is not None:
            out["status"] = self.status
        out["attempt"] = self.attempt
        if self.input is not _ABSENT:
            out["input"] = self.input
        if self.idempotency_key is not None:
            out["idempotency_key"] = self.idempotency_key
        if self.output is not _ABSENT:
            out["output"] = self.output
        for name in ("error", "last_error"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out["redelivery"] = self.redelivery
        for name in (
            "scheduled_at_ms",
            "dispatched_at_ms",
            "deadline_ms",
            "wake_at_ms",
            "finished_at_ms",
            "worker_id",
            "worker_session",
            "token",
            "tokens",
            "succeeded_seq",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out["dispatch_count"] = self.dispatch_count
        # Built key by key to keep the document's order; the keys are UnitDoc's.
        return cast(UnitDoc, out)


@attrs.define(slots=True, eq=False)
class ExecutionState:
    id: str
    workflow: str = ""
    version: str = ""
    definition_hash: str = ""
    input: JsonValue = None
    run: int = 1
    parent: ParentRef | None = None
    schedule_id: str | None = None
    status: ExecutionStatus = EXEC_RUNNING
    started: bool = False
    created_at_ms: int = 0
    updated_at_ms: int = 0
    finished_at_ms: int | None = None
    units: dict[str, Unit] = attrs.field(factory=dict)
    abort: AbortDoc | None = None
    compensation_order: list[str] | None = None
    signals: list[SignalDoc] = attrs.field(factory=list)
    compensation: str | None = None
    output: JsonValue = _ABSENT
    error: ErrorDoc | None = None
    handlers: HandlersDoc | None = None
    # Set while a flow-control limit holds the execution back (it has no
    # WorkflowStarted yet).
    waiting: FlowWaitDoc | None = None
    # Its place in line while waiting (WorkflowWaiting's ticket).
    flow_ticket: int = 0
    last_seq: int = 0
    # Derived, for the decider: outputs of succeeded main steps, the outcome
    # of compensation once known, and the event-handler instances started.
    outputs: JsonObject = attrs.field(factory=dict)
    compensation_outcome: str | None = None
    instances: list[str] = attrs.field(factory=list)
    next_run: int | None = None
    # Set while an operator holds the execution (WorkflowPaused until
    # WorkflowResumed): the decider does nothing and nothing is handed out.
    paused_at_ms: int | None = None
    pause_reason: str | None = None
    # The seq of the last WorkflowResumed: the decision right after it fires
    # the timers that fell due meanwhile in the order they fell due.
    resumed_seq: int = 0
    # A memo for the decider: the expression scope over this state's data.
    main_scope: Scope | None = None
    # A memo for the decider: (plan, n) when the first n main steps of that
    # plan have settled units. A settled unit never changes again, so the
    # decider starts its walk over the steps at n; a migration (new plan,
    # renamed units) drops it.
    main_settled: tuple[object, int] | None = None
    # Whether `status` is terminal: read several times per event, so kept
    # as a field (set with the status by `set_status`) and not a property.
    terminal: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        self.terminal = self.status in TERMINAL

    @property
    def paused(self) -> bool:
        return self.paused_at_ms is not None

    def set_status(self, status: ExecutionStatus) -> None:
        self.status = status
        self.terminal = status in TERMINAL

    def tokens(self) -> list[str]:
        """The token of every attempt dispatched in this run, of every unit
        (read once per finished execution: no call per unit)."""
        # A unit's entries are [token, attempt] pairs.
        tokens: list[str] = [
            entry[0]  # type: ignore[misc]  # a token is a str
            for unit in self.units.values()
            if unit.tokens
            for entry in unit.tokens
        ]
        return tokens

    def changed_unit(self, key: str, at_ms: int) -> Unit:
        """The unit `key` (created when new), stamped as changed at `at_ms`."""
        unit = self.units.get(key)
        if unit is None:
            unit = self.units[key] = Unit(key)
        unit.changed_at_ms = at_ms
        return unit

    def units_by_change(self) -> list[Unit]:
        """The units, the one changed longest ago first. Units changed in the
        same millisecond (one commit often changes several) are ordered by
        key, as the book's transcripts list them."""
        return sorted(self.units.values(), key=_change_order)

    def to_json(self) -> ExecutionDoc:
        """The execution state document of `GET /v1/executions/{id}`."""
        out: dict[str, object] = {"id": self.id}
        if self.run > 1:
            out["run"] = self.run
        if self.parent is not None:
            out["parent"] = self.parent
        if self.schedule_id is not None:
            out["schedule_id"] = self.schedule_id
        out["workflow"] = self.workflow
        out["version"] = self.version
        out["definition_hash"] = self.definition_hash
        out["input"] = self.input
        out["status"] = self.status
        if self.paused_at_ms is not None:
            out["paused"] = True
            out["paused_at_ms"] = self.paused_at_ms
            if self.pause_reason is not None:
                out["pause_reason"] = self.pause_reason
        out["created_at_ms"] = self.created_at_ms
        out["updated_at_ms"] = self.updated_at_ms
        if self.finished_at_ms is not None:
            out["finished_at_ms"] = self.finished_at_ms
        out["units"] = {unit.key: unit.to_json() for unit in self.units_by_change()}
        if self.abort is not None:
            out["abort"] = self.abort
        if self.compensation_order is not None:
            out["compensation_order"] = self.compensation_order
        if self.signals:
            out["signals"] = self.signals
        if self.compensation is not None:
            out["compensation"] = self.compensation
        if self.output is not _ABSENT:
            out["output"] = self.output
        if self.error is not None:
            out["error"] = self.error
        if self.handlers is not None:
            out["handlers"] = self.handlers
        if self.waiting is not None:
            out["waiting"] = self.waiting
        out["last_seq"] = self.last_seq
        return cast(ExecutionDoc, out)


# ---------------------------------------------------------------- apply


def _change_order(unit: Unit) -> tuple[int, str]:
    return unit.changed_at_ms, unit.key


def _created(s: ExecutionState, e: ev.WorkflowCreated) -> None:
    s.workflow = e.workflow
    s.version = e.version
    s.definition_hash = e.definition_hash
    s.input = e.input
    s.parent = e.parent
    s.schedule_id = e.schedule_id
    s.run = e.run or 1
    s.created_at_ms = e.timestamp_ms
    s.set_status(EXEC_RUNNING)


def _started(s: ExecutionState, e: ev.WorkflowStarted) -> None:
    s.started = True
    s.waiting = None


def _waiting(s: ExecutionState, e: ev.WorkflowWaiting) -> None:
    doc: FlowWaitDoc = {
        "reason": e.reason,
        "key": e.key,
        "label": e.label,
        "limit": e.limit,
        "since_ms": e.timestamp_ms,
        "message": waiting_message(e.reason, e.label, e.key, e.limit, e.period_ms),
    }
    if e.period_ms is not None:
        doc["period_ms"] = e.period_ms
    if e.due_ms is not None:
        doc["due_ms"] = e.due_ms
    s.waiting = doc
    s.flow_ticket = e.ticket


def waiting_message(
    reason: str, label: str, key: str, limit: int, period_ms: int | None = None
) -> str:
    """What `orbit status` and the UI say of a held-back execution; while it
    waits for a concurrency slot, every slot of its key is taken, so the
    count is `limit/limit`."""
    which = f"{label} `{key}` " if label else ""
    if reason == "rate":
        return f"waiting for a rate limit: {which}{limit} per {format_duration(period_ms or 0)}"
    if reason == "debounce":
        quiet = format_duration(period_ms or 0)
        return f"waiting for a debounce: {which}{quiet} without another start"
    return f"waiting for a {reason} slot: {which}{limit}/{limit}"


def _debounced(s: ExecutionState, e: ev.WorkflowDebounced) -> None:
    # A later start replaced the input of this pending execution.
    s.input = e.input
    s.main_scope = None
    s.main_settled = None
    if s.waiting is not None:
        s.waiting["due_ms"] = e.due_ms


def _admitted(s: ExecutionState, e: ev.WorkflowAdmitted) -> None:
    pass  # WorkflowStarted follows and clears `waiting`


def _start_abort(s: ExecutionState, abort: AbortDoc) -> None:
    if s.abort is None:
        s.abort = abort


def _timeout(s: ExecutionState, e: ev.WorkflowTimeoutReached) -> None:
    _start_abort(s, {"kind": "timed_out"})


def _cancel(s: ExecutionState, e: ev.CancelRequested) -> None:
    _start_abort(s, {"kind": "cancelled", "reason": e.reason})


def _limit(s: ExecutionState, e: ev.LimitExceeded) -> None:
    _start_abort(s, {"kind": "failed", "error": ev.make_error("LIMIT_EXCEEDED", e.message, False)})


def _finish(s: ExecutionState, e: ev.Event, status: ExecutionStatus) -> None:
    s.set_status(status)
    s.finished_at_ms = e.timestamp_ms


def _completed(s: ExecutionState, e: ev.WorkflowCompleted) -> None:
    s.output = e.output
    _finish(s, e, EXEC_COMPLETED)


def _failed(s: ExecutionState, e: ev.WorkflowFailed) -> None:
    s.error = e.error
    s.compensation = e.compensation
    _finish(s, e, EXEC_FAILED)


def _cancelled(s: ExecutionState, e: ev.WorkflowCancelled) -> None:
    s.compensation = e.compensation
    _finish(s, e, EXEC_CANCELLED)


def _timed_out(s: ExecutionState, e: ev.WorkflowTimedOut) -> None:
    s.compensation = e.compensation
    _finish(s, e, EXEC_TIMED_OUT)


def _continued(s: ExecutionState, e: ev.WorkflowContinuedAsNew) -> None:
    s.next_run = e.next_run
    _finish(s, e, EXEC_CONTINUED_AS_NEW)


def _scheduled(s: ExecutionState, e: ev.StepScheduled) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_SCHEDULED
    u.attempt = e.attempt
    u.input = e.input
    u.idempotency_key = e.idempotency_key
    u.redelivery = e.redelivery
    u.scheduled_at_ms = e.timestamp_ms
    u.token = None
    u.wake_at_ms = None
    u.offer_seq = e.seq


def _skipped(s: ExecutionState, e: ev.StepSkipped) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_SKIPPED
    u.output = None
    u.finished_at_ms = e.timestamp_ms


def _fan_out(s: ExecutionState, e: ev.StepFanOut) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_RUNNING
    u.attempt = 1
    u.input = e.items
    u.scheduled_at_ms = e.timestamp_ms


def _dispatched(s: ExecutionState, e: ev.StepDispatched) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_DISPATCHED
    u.token = e.token
    u.worker_id = e.worker_id
    u.worker_session = e.worker_session
    u.dispatched_at_ms = e.timestamp_ms
    u.deadline_ms = e.deadline_ms
    if u.tokens is None:
        u.tokens = []
    u.tokens.append([e.token, e.attempt])
    u.dispatch_count += 1


def _succeed(s: ExecutionState, u: Unit, output: JsonValue, e: ev.Event) -> None:
    u.status = UNIT_SUCCEEDED
    u.output = output
    u.finished_at_ms = e.timestamp_ms
    u.succeeded_seq = e.seq
    u.token = None
    if unitkeys.is_main(u.key):
        s.outputs[u.key] = output


def _succeeded(s: ExecutionState, e: ev.StepSucceeded) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.attempt = max(u.attempt, e.attempt)
    _succeed(s, u, e.output, e)


def _attempt_failed(s: ExecutionState, e: ev.StepAttemptFailed) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    token = u.token
    if token is not None and not (
        e.error["code"] == "TIMEOUT"
        and u.deadline_ms is not None
        and e.timestamp_ms >= u.deadline_ms
    ):
        if u.answered is None:
            u.answered = []
        u.answered.append(token)
    u.status = UNIT_ATTEMPT_FAILED
    u.last_error = e.error
    u.token = None


def _uncertain(s: ExecutionState, e: ev.StepAttemptUncertain) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_UNCERTAIN
    u.token = None


def _retry(s: ExecutionState, e: ev.RetryScheduled) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_RETRY_WAIT
    u.wake_at_ms = e.fire_at_ms


def _step_failed(s: ExecutionState, e: ev.StepFailed) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_FAILED
    u.error = e.error
    u.finished_at_ms = e.timestamp_ms
    u.token = None
    key = e.step
    if unitkeys.is_recovery(key):
        return
    message = e.error["message"]
    error = e.error.copy()
    error["message"] = f"step `{key}` failed: {message}"
    error["retryable"] = False
    _start_abort(s, {"kind": "failed", "error": error})


def _step_cancelled(s: ExecutionState, e: ev.StepCancelled) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_CANCELLED
    u.finished_at_ms = e.timestamp_ms
    u.token = None


def _timer_started(s: ExecutionState, e: ev.TimerStarted) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_WAITING
    u.attempt = 1
    u.scheduled_at_ms = e.timestamp_ms
    u.wake_at_ms = e.fire_at_ms


def _timer_fired(s: ExecutionState, e: ev.TimerFired) -> None:
    _succeed(s, s.changed_unit(e.step, e.timestamp_ms), {}, e)


def _stale(s: ExecutionState, e: ev.StaleResultIgnored) -> None:
    pass


def _signal_received(s: ExecutionState, e: ev.SignalReceived) -> None:
    s.signals.append(
        {"seq": e.seq, "name": e.name, "payload": e.payload, "received_at_ms": e.timestamp_ms}
    )


def _await_started(s: ExecutionState, e: ev.SignalAwaitStarted) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    u.status = UNIT_WAITING
    u.attempt = 1
    u.scheduled_at_ms = e.timestamp_ms
    u.wake_at_ms = e.deadline_ms


def _signal_delivered(s: ExecutionState, e: ev.SignalDelivered) -> None:
    payload = None
    for sig in s.signals:
        if sig["seq"] == e.signal_seq:
            sig["delivered_to"] = e.step
            payload = sig["payload"]
            break
    u = s.changed_unit(e.step, e.timestamp_ms)
    if u.status is None:  # an event-handler instance starts here
        u.attempt = 1
        u.scheduled_at_ms = e.timestamp_ms
        s.instances.append(e.step)
    _succeed(s, u, payload, e)


def _compensation_started(s: ExecutionState, e: ev.CompensationStarted) -> None:
    s.set_status(EXEC_COMPENSATING)
    s.compensation_order = list(e.steps)


def _compensation_completed(s: ExecutionState, e: ev.CompensationCompleted) -> None:
    s.compensation_outcome = "completed"


def _compensation_failed(s: ExecutionState, e: ev.CompensationFailed) -> None:
    s.compensation_outcome = "failed"


def _handlers_started(s: ExecutionState, e: ev.HandlersStarted) -> None:
    s.handlers = {"kind": e.kind, "compensation": e.compensation}
    s.compensation_outcome = e.compensation


def _migrated(s: ExecutionState, e: ev.WorkflowMigrated) -> None:
    s.version = e.to_version
    s.definition_hash = e.to_hash
    s.input = e.input
    s.main_scope = None
    if e.renamed:
        units: dict[str, Unit] = {}
        for key, unit in s.units.items():
            new_key = unitkeys.renamed(key, e.renamed)
            unit.key = new_key
            units[new_key] = unit
        s.units = units
        s.outputs = {e.renamed.get(k, k): v for k, v in s.outputs.items()}


def _restarted(s: ExecutionState, e: ev.WorkflowRestarted) -> None:
    # The run ends as a continued one does: the next run goes on.
    s.next_run = e.next_run
    _finish(s, e, EXEC_CONTINUED_AS_NEW)


def _forked(s: ExecutionState, e: ev.WorkflowForked) -> None:
    pass


def _restored(s: ExecutionState, e: ev.StepRestored) -> None:
    u = s.changed_unit(e.step, e.timestamp_ms)
    if e.status == UNIT_SKIPPED:
        u.status = UNIT_SKIPPED
        u.output = None
        u.finished_at_ms = e.timestamp_ms
        return
    u.attempt = max(u.attempt, 1)
    _succeed(s, u, e.output, e)


def _paused(s: ExecutionState, e: ev.WorkflowPaused) -> None:
    s.paused_at_ms = e.timestamp_ms
    s.pause_reason = e.reason


def _resumed(s: ExecutionState, e: ev.WorkflowResumed) -> None:
    s.paused_at_ms = None
    s.pause_reason = None
    s.resumed_seq = e.seq


# Each handler takes its own event type; the table is keyed by that type.
_APPLY: dict[type[ev.Event], Callable[[ExecutionState, Any], None]] = {
    ev.WorkflowCreated: _created,
    ev.WorkflowStarted: _started,
    ev.WorkflowTimeoutReached: _timeout,
    ev.CancelRequested: _cancel,
    ev.LimitExceeded: _limit,
    ev.WorkflowCompleted: _completed,
    ev.WorkflowFailed: _failed,
    ev.WorkflowCancelled: _cancelled,
    ev.WorkflowTimedOut: _timed_out,
    ev.WorkflowContinuedAsNew: _continued,
    ev.StepScheduled: _scheduled,
    ev.StepSkipped: _skipped,
    ev.StepFanOut: _fan_out,
    ev.StepDispatched: _dispatched,
    ev.StepSucceeded: _succeeded,
    ev.StepAttemptFailed: _attempt_failed,
    ev.StepAttemptUncertain: _uncertain,
    ev.RetryScheduled: _retry,
    ev.StepFailed: _step_failed,
    ev.StepCancelled: _step_cancelled,
    ev.TimerStarted: _timer_started,
    ev.TimerFired: _timer_fired,
    ev.StaleResultIgnored: _stale,
    ev.SignalReceived: _signal_received,
    ev.SignalAwaitStarted: _await_started,
    ev.SignalDelivered: _signal_delivered,
    ev.CompensationStarted: _compensation_started,
    ev.CompensationCompleted: _compensation_completed,
    ev.CompensationFailed: _compensation_failed,
    ev.HandlersStarted: _handlers_started,
    ev.WorkflowMigrated: _migrated,
    ev.WorkflowRestarted: _restarted,
    ev.WorkflowForked: _forked,
    ev.StepRestored: _restored,
    ev.WorkflowWaiting: _waiting,
    ev.WorkflowAdmitted: _admitted,
    ev.WorkflowDebounced: _debounced,
    ev.WorkflowPaused: _paused,
    ev.WorkflowResumed: _resumed,
}


def apply(state: ExecutionState, event: ev.Event) -> None:
    """Applies one committed event to `state` in place."""
    if event.seq != state.last_seq + 1:
        raise ValueError(f"event #{event.seq} does not follow #{state.last_seq}")
    _APPLY[type(event)](state, event)
    state.last_seq = event.seq
    state.updated_at_ms = event.timestamp_ms


def fold(events: Iterable[ev.Event], execution_id: str = "") -> ExecutionState:
    """The state after `events` (one run's history, from #1)."""
    state = ExecutionState(execution_id)
    for event in events:
        apply(state, event)
    return state
