"""History events (chapter 40): one frozen class per event type, with the
book's field names, plus the JSON codec used by the stores and the API.

Every event carries `seq` and `timestamp_ms`, given in one place:
`orbit_core.history` builds each event stamped (the decider's batches and
the engine's commands name a class and its payload), so events are never
copied to be stamped and no producer numbers one itself. `error` values are plain
dicts `{"code", "message", "retryable", "details"?}`; payload-like fields
(`input`, `output`, `payload`, `items`) are JSON values.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeAlias

import attrs
import orjson

from orbit_core.api import ErrorDoc, ParentRef
from orbit_core.jsontypes import JsonObject, JsonValue

Json: TypeAlias = JsonValue
ErrorJson: TypeAlias = ErrorDoc


def make_error(code: str, message: str, retryable: bool, details: JsonValue = None) -> ErrorJson:
    error: ErrorJson = {"code": code, "message": message, "retryable": retryable}
    if details is not None:
        error["details"] = details
    return error


@attrs.frozen
class WorkflowCreated:
    TYPE: ClassVar[str] = "WorkflowCreated"
    seq: int
    timestamp_ms: int
    workflow: str
    version: str
    definition_hash: str
    input: Json
    parent: ParentRef | None = None
    schedule_id: str | None = None
    run: int | None = None


@attrs.frozen
class WorkflowStarted:
    TYPE: ClassVar[str] = "WorkflowStarted"
    seq: int
    timestamp_ms: int


@attrs.frozen
class WorkflowTimeoutReached:
    TYPE: ClassVar[str] = "WorkflowTimeoutReached"
    seq: int
    timestamp_ms: int


@attrs.frozen
class CancelRequested:
    TYPE: ClassVar[str] = "CancelRequested"
    seq: int
    timestamp_ms: int
    reason: str


@attrs.frozen
class LimitExceeded:
    TYPE: ClassVar[str] = "LimitExceeded"
    seq: int
    timestamp_ms: int
    limit: str
    message: str


@attrs.frozen
class WorkflowCompleted:
    TYPE: ClassVar[str] = "WorkflowCompleted"
    seq: int
    timestamp_ms: int
    output: Json


@attrs.frozen
class WorkflowFailed:
    TYPE: ClassVar[str] = "WorkflowFailed"
    seq: int
    timestamp_ms: int
    error: ErrorJson
    compensation: str


@attrs.frozen
class WorkflowCancelled:
    TYPE: ClassVar[str] = "WorkflowCancelled"
    seq: int
    timestamp_ms: int
    compensation: str


@attrs.frozen
class WorkflowTimedOut:
    TYPE: ClassVar[str] = "WorkflowTimedOut"
    seq: int
    timestamp_ms: int
    compensation: str


@attrs.frozen
class WorkflowContinuedAsNew:
    TYPE: ClassVar[str] = "WorkflowContinuedAsNew"
    seq: int
    timestamp_ms: int
    next_run: int
    input: Json


@attrs.frozen
class StepScheduled:
    TYPE: ClassVar[str] = "StepScheduled"
    seq: int
    timestamp_ms: int
    step: str
    attempt: int
    input: Json
    idempotency_key: str
    redelivery: bool


@attrs.frozen
class StepSkipped:
    TYPE: ClassVar[str] = "StepSkipped"
    seq: int
    timestamp_ms: int
    step: str
    reason: str


@attrs.frozen
class StepFanOut:
    TYPE: ClassVar[str] = "StepFanOut"
    seq: int
    timestamp_ms: int
    step: str
    items: list[Json]


@attrs.frozen
class StepDispatched:
    TYPE: ClassVar[str] = "StepDispatched"
    seq: int
    timestamp_ms: int
    step: str
    attempt: int
    token: str
    worker_id: str
    worker_session: str
    deadline_ms: int | None


@attrs.frozen
class StepSucceeded:
    TYPE: ClassVar[str] = "StepSucceeded"
    seq: int
    timestamp_ms: int
    step: str
    attempt: int
    output: Json


@attrs.frozen
class StepAttemptFailed:
    TYPE: ClassVar[str] = "StepAttemptFailed"
    seq: int
    timestamp_ms: int
    step: str
    attempt: int
    error: ErrorJson


@attrs.frozen
class StepAttemptUncertain:
    TYPE: ClassVar[str] = "StepAttemptUncertain"
    seq: int
    timestamp_ms: int
    step: str
    attempt: int
    reason: str


@attrs.frozen
class RetryScheduled:
    TYPE: ClassVar[str] = "RetryScheduled"
    seq: int
    timestamp_ms: int
    step: str
    next_attempt: int
    delay_ms: int
    fire_at_ms: int


@attrs.frozen
class StepFailed:
    TYPE: ClassVar[str] = "StepFailed"
    seq: int
    timestamp_ms: int
    step: str
    error: ErrorJson


@attrs.frozen
class StepCancelled:
    TYPE: ClassVar[str] = "StepCancelled"
    seq: int
    timestamp_ms: int
    step: str


@attrs.frozen
class TimerStarted:
    TYPE: ClassVar[str] = "TimerStarted"
    seq: int
    timestamp_ms: int
    step: str
    fire_at_ms: int


@attrs.frozen
class TimerFired:
    TYPE: ClassVar[str] = "TimerFired"
    seq: int
    timestamp_ms: int
    step: str


@attrs.frozen
class StaleResultIgnored:
    TYPE: ClassVar[str] = "StaleResultIgnored"
    seq: int
    timestamp_ms: int
    step: str
    token: str
    outcome: str


@attrs.frozen
class SignalReceived:
    TYPE: ClassVar[str] = "SignalReceived"
    seq: int
    timestamp_ms: int
    name: str
    payload: Json


@attrs.frozen
class SignalAwaitStarted:
    TYPE: ClassVar[str] = "SignalAwaitStarted"
    seq: int
    timestamp_ms: int
    step: str
    signal: str
    deadline_ms: int | None = None


@attrs.frozen
class SignalDelivered:
    TYPE: ClassVar[str] = "SignalDelivered"
    seq: int
    timestamp_ms: int
    step: str
    signal_seq: int


@attrs.frozen
class CompensationStarted:
    TYPE: ClassVar[str] = "CompensationStarted"
    seq: int
    timestamp_ms: int
    reason: str
    steps: list[str]


@attrs.frozen
class CompensationCompleted:
    TYPE: ClassVar[str] = "CompensationCompleted"
    seq: int
    timestamp_ms: int


@attrs.frozen
class CompensationFailed:
    TYPE: ClassVar[str] = "CompensationFailed"
    seq: int
    timestamp_ms: int
    step: str
    error: ErrorJson


@attrs.frozen
class HandlersStarted:
    TYPE: ClassVar[str] = "HandlersStarted"
    seq: int
    timestamp_ms: int
    kind: str
    compensation: str


@attrs.frozen
class WorkflowMigrated:
    """The execution moved to another definition of its workflow (a live
    migration, docs/language/migration.md). It carries all the fold needs:
    the new input and the units renamed; decisions after it follow
    `to_hash`."""

    TYPE: ClassVar[str] = "WorkflowMigrated"
    seq: int
    timestamp_ms: int
    from_version: str
    from_hash: str
    to_version: str
    to_hash: str
    migration_hash: str
    input: Json
    renamed: dict[str, str]


# Restart and fork (issue 38, docs/restart-and-fork.md) -------------------
# A restart ends the current run with `WorkflowRestarted` and starts the next
# with `StepRestored` events: the outcomes it keeps, copied as values, so the
# new run folds and replays from its own history alone. A fork starts a new
# execution the same way, after a `WorkflowForked` naming its source.


@attrs.frozen
class WorkflowRestarted:
    TYPE: ClassVar[str] = "WorkflowRestarted"
    seq: int
    timestamp_ms: int
    next_run: int
    step: str
    reason: str


@attrs.frozen
class WorkflowForked:
    TYPE: ClassVar[str] = "WorkflowForked"
    seq: int
    timestamp_ms: int
    source: str
    source_run: int
    step: str


@attrs.frozen
class StepRestored:
    TYPE: ClassVar[str] = "StepRestored"
    seq: int
    timestamp_ms: int
    step: str
    # SUCCEEDED or SKIPPED: the only outcomes a new run keeps.
    status: str
    output: Json
    from_run: int


# Flow control (docs/language/flow-control.md): an execution that a
# `concurrency` limit, a `rate` or a `debounce` holds back records
# WorkflowWaiting instead of WorkflowStarted, and WorkflowAdmitted then
# WorkflowStarted when it may go, in the commit of what let it go.
@attrs.frozen
class WorkflowWaiting:
    TYPE: ClassVar[str] = "WorkflowWaiting"
    seq: int
    timestamp_ms: int
    reason: str  # "concurrency", "rate" or "debounce"
    key: str  # the key's value as text; "" for a limit without a key
    label: str  # what the key names, e.g. `customer_id`
    limit: int  # a rate's `max`; 0 for a debounce
    ticket: int  # its place in line among the waiting
    # A rate's `per` and a debounce's `period` (written only for those).
    period_ms: int | None = None
    # A debounce: when the execution starts unless another start replaces
    # its input first (then WorkflowDebounced carries the new time).
    due_ms: int | None = None


# A start with the key of a pending debounced execution replaces its input
# (the last input wins) and pushes its start back, up to `max_wait`.
@attrs.frozen
class WorkflowDebounced:
    TYPE: ClassVar[str] = "WorkflowDebounced"
    seq: int
    timestamp_ms: int
    input: Json
    due_ms: int


@attrs.frozen
class WorkflowAdmitted:
    TYPE: ClassVar[str] = "WorkflowAdmitted"
    seq: int
    timestamp_ms: int
    waited_ms: int


# Beyond the book (docs/operating-executions.md): an operator holds an
# execution (no new attempt, child or timer until resumed) and lets it go.
@attrs.frozen
class WorkflowPaused:
    TYPE: ClassVar[str] = "WorkflowPaused"
    seq: int
    timestamp_ms: int
    reason: str | None = None


@attrs.frozen
class WorkflowResumed:
    TYPE: ClassVar[str] = "WorkflowResumed"
    seq: int
    timestamp_ms: int


Event: TypeAlias = (
    WorkflowCreated
    | WorkflowStarted
    | WorkflowTimeoutReached
    | CancelRequested
    | LimitExceeded
    | WorkflowCompleted
    | WorkflowFailed
    | WorkflowCancelled
    | WorkflowTimedOut
    | WorkflowContinuedAsNew
    | StepScheduled
    | StepSkipped
    | StepFanOut
    | StepDispatched
    | StepSucceeded
    | StepAttemptFailed
    | StepAttemptUncertain
    | RetryScheduled
    | StepFailed
    | StepCancelled
    | TimerStarted
    | TimerFired
    | StaleResultIgnored
    | SignalReceived
    | SignalAwaitStarted
    | SignalDelivered
    | CompensationStarted
    | CompensationCompleted
    | CompensationFailed
    | HandlersStarted
    | WorkflowMigrated
    | WorkflowRestarted
    | WorkflowForked
    | StepRestored
    | WorkflowWaiting
    | WorkflowAdmitted
    | WorkflowDebounced
    | WorkflowPaused
    | WorkflowResumed
)

# The one list of the event classes is the `Event` union above.
EVENT_TYPES: dict[str, type[Event]] = {cls.TYPE: cls for cls in typing.get_args(Event)}

# Members written only when set (chapter 40 marks them `?`).
_OPTIONAL = {"parent", "schedule_id", "run"}
_OPTIONAL_BY_TYPE: dict[str, frozenset[str]] = {
    "WorkflowCreated": frozenset(_OPTIONAL),
    "SignalAwaitStarted": frozenset({"deadline_ms"}),
    "WorkflowPaused": frozenset({"reason"}),
    "WorkflowWaiting": frozenset({"period_ms", "due_ms"}),
}
_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(a.name for a in attrs.fields(cls))[2:] for cls in EVENT_TYPES.values()
}


_MISSING_AS_NONE: dict[type[Event], frozenset[str]] = {
    cls: _OPTIONAL_BY_TYPE.get(cls.TYPE, frozenset()) for cls in EVENT_TYPES.values()
}
_DEFAULTED: dict[type[Event], frozenset[str]] = {
    cls: frozenset(a.name for a in attrs.fields(cls) if a.default is not attrs.NOTHING)
    for cls in EVENT_TYPES.values()
}


# The three events of every task step, written member by member in one dict
# display (about twice as fast as the loop of `to_json`); the test of the
# codec holds them to the loop's bytes.


def _scheduled_json(e: StepScheduled) -> JsonObject:
    return {
        "seq": e.seq,
        "timestamp_ms": e.timestamp_ms,
        "type": "StepScheduled",
        "step": e.step,
        "attempt": e.attempt,
        "input": e.input,
        "idempotency_key": e.idempotency_key,
        "redelivery": e.redelivery,
    }


def _dispatched_json(e: StepDispatched) -> JsonObject:
    return {
        "seq": e.seq,
        "timestamp_ms": e.timestamp_ms,
        "type": "StepDispatched",
        "step": e.step,
        "attempt": e.attempt,
        "token": e.token,
        "worker_id": e.worker_id,
        "worker_session": e.worker_session,
        "deadline_ms": e.deadline_ms,
    }


def _succeeded_json(e: StepSucceeded) -> JsonObject:
    return {
        "seq": e.seq,
        "timestamp_ms": e.timestamp_ms,
        "type": "StepSucceeded",
        "step": e.step,
        "attempt": e.attempt,
        "output": e.output,
    }


_WRITERS: dict[type[Event], Callable[[Any], JsonObject]] = {
    StepScheduled: _scheduled_json,
    StepDispatched: _dispatched_json,
    StepSucceeded: _succeeded_json,
}


def to_json(event: Event) -> JsonObject:
    """The event as `orbit logs --json` prints it: seq, timestamp_ms, type, fields."""
    cls = type(event)
    writer = _WRITERS.get(cls)
    if writer is not None:
        return writer(event)
    out: JsonObject = {"seq": event.seq, "timestamp_ms": event.timestamp_ms, "type": cls.TYPE}
    optional = _OPTIONAL_BY_TYPE.get(cls.TYPE)
    for name in _FIELDS[cls]:
        value = getattr(event, name)
        if value is None and optional is not None and name in optional:
            continue
        out[name] = value
    return out


def from_json(data: JsonObject) -> Event:
    """Reads an event written by `to_json`; raises KeyError/TypeError on a
    malformed one. A member may be missing only where `to_json` leaves it
    out (`_OPTIONAL_BY_TYPE`: read as None) or where the class has a default
    (a member added later: an older history has none); any other missing
    member is refused, not read as None."""
    cls = EVENT_TYPES[str(data["type"])]
    kwargs = {}
    for name in _FIELDS[cls]:
        if name in data:
            kwargs[name] = data[name]
        elif name in _MISSING_AS_NONE[cls]:
            kwargs[name] = None
        elif name not in _DEFAULTED[cls]:
            raise KeyError(f"{cls.TYPE} event without `{name}`")
    make: Callable[..., Event] = cls
    return make(data["seq"], data["timestamp_ms"], **kwargs)


def dumps(event: Event) -> bytes:
    return orjson.dumps(to_json(event))


def loads(raw: bytes | str) -> Event:
    return from_json(orjson.loads(raw))
