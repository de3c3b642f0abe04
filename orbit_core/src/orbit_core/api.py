"""The types of the `Engine` API (docs/embedding.md): statuses and documents.

Statuses are `StrEnum`s, equal to (and serialised as) their strings. The
documents are `TypedDict`s: at run time they are the plain dicts the HTTP API
sends, key order included, so a caller may treat them as JSON; mypy knows
each key's type. `JsonValue` (from `jsontypes`) types what workflows and
workers put in them."""

from __future__ import annotations

from enum import StrEnum
from typing import Final, NotRequired, Required, TypedDict

import attrs

from orbit_core.jsontypes import JsonObject, JsonValue


class ExecutionStatus(StrEnum):
    RUNNING = "RUNNING"
    COMPENSATING = "COMPENSATING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"
    CONTINUED_AS_NEW = "CONTINUED_AS_NEW"


class UnitStatus(StrEnum):
    """A unit without a status (not yet offered) is pending."""

    # A fan-out step whose elements run.
    RUNNING = "RUNNING"
    SCHEDULED = "SCHEDULED"
    DISPATCHED = "DISPATCHED"
    ATTEMPT_FAILED = "ATTEMPT_FAILED"
    UNCERTAIN = "UNCERTAIN"
    RETRY_WAIT = "RETRY_WAIT"
    WAITING = "WAITING"
    SUCCEEDED = "SUCCEEDED"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


# Every member bound to a module constant, for the engine's hot path: on
# Python 3.11 `UnitStatus.X` goes through `EnumType.__getattr__` (about 90 ns,
# ten times a global's cost), and `decide` and `fold` test statuses on every
# event. Same objects, so they compare, hash and narrow exactly as members do.
UNIT_RUNNING: Final = UnitStatus.RUNNING
UNIT_SCHEDULED: Final = UnitStatus.SCHEDULED
UNIT_DISPATCHED: Final = UnitStatus.DISPATCHED
UNIT_ATTEMPT_FAILED: Final = UnitStatus.ATTEMPT_FAILED
UNIT_UNCERTAIN: Final = UnitStatus.UNCERTAIN
UNIT_RETRY_WAIT: Final = UnitStatus.RETRY_WAIT
UNIT_WAITING: Final = UnitStatus.WAITING
UNIT_SUCCEEDED: Final = UnitStatus.SUCCEEDED
UNIT_SKIPPED: Final = UnitStatus.SKIPPED
UNIT_CANCELLED: Final = UnitStatus.CANCELLED
UNIT_FAILED: Final = UnitStatus.FAILED
EXEC_RUNNING: Final = ExecutionStatus.RUNNING
EXEC_COMPENSATING: Final = ExecutionStatus.COMPENSATING
EXEC_COMPLETED: Final = ExecutionStatus.COMPLETED
EXEC_FAILED: Final = ExecutionStatus.FAILED
EXEC_CANCELLED: Final = ExecutionStatus.CANCELLED
EXEC_TIMED_OUT: Final = ExecutionStatus.TIMED_OUT
EXEC_CONTINUED_AS_NEW: Final = ExecutionStatus.CONTINUED_AS_NEW


# ---------------------------------------------------------------- execution documents


class ErrorDoc(TypedDict):
    """A failure as histories and documents carry it."""

    code: str
    message: str
    retryable: bool
    details: NotRequired[JsonValue]


class ParentRef(TypedDict):
    execution_id: str
    step: str


class AbortDoc(TypedDict):
    """Why an execution is winding down: `failed` (with the error),
    `cancelled` (with the reason) or `timed_out`."""

    kind: str
    error: NotRequired[ErrorDoc]
    reason: NotRequired[str]


class SignalDoc(TypedDict):
    seq: int
    name: str
    payload: JsonValue
    received_at_ms: int
    delivered_to: NotRequired[str]


class HandlersDoc(TypedDict):
    kind: str
    compensation: str


class UnitDoc(TypedDict, total=False):
    status: UnitStatus
    attempt: Required[int]
    input: JsonValue
    idempotency_key: str
    output: JsonValue
    error: ErrorDoc
    last_error: ErrorDoc
    redelivery: Required[bool]
    scheduled_at_ms: int
    dispatched_at_ms: int
    deadline_ms: int
    wake_at_ms: int
    finished_at_ms: int
    worker_id: str
    worker_session: str
    token: str
    # [token, attempt] of every attempt dispatched so far.
    tokens: list[list[str | int]]
    succeeded_seq: int
    dispatch_count: Required[int]


class WaitingWorker(TypedDict):
    worker_id: str
    runtime: str
    contract_version: str


class WaitingDoc(TypedDict):
    """One entry of `waiting_for`: queued tasks of one contract and runtime."""

    task: str
    contract_version: str
    runtime: str | None
    units: list[str]
    queued: int
    since_ms: int
    serving: int
    workers: list[WaitingWorker]


class FlowWaitDoc(TypedDict):
    """`waiting` of an execution a flow-control limit holds back."""

    reason: str
    key: str
    label: str
    limit: int
    since_ms: int
    message: str
    # The unit held back, when a step's `concurrency` holds back one of its
    # task attempts rather than the whole execution.
    step: NotRequired[str]
    # A rate's period and a debounce's quiet period, and when a debounced
    # execution starts unless replaced again.
    period_ms: NotRequired[int]
    due_ms: NotRequired[int]


class ExecutionDoc(TypedDict):
    """`GET /v1/executions/{id}`, and what `get`, `wait` and `cancel` return."""

    id: str
    run: NotRequired[int]
    parent: NotRequired[ParentRef]
    schedule_id: NotRequired[str]
    workflow: str
    version: str
    definition_hash: str
    input: JsonValue
    status: ExecutionStatus
    # Only while paused (docs/operating-executions.md): absent otherwise.
    paused: NotRequired[bool]
    paused_at_ms: NotRequired[int]
    pause_reason: NotRequired[str]
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: NotRequired[int]
    units: dict[str, UnitDoc]
    abort: NotRequired[AbortDoc]
    compensation_order: NotRequired[list[str]]
    signals: NotRequired[list[SignalDoc]]
    compensation: NotRequired[str]
    output: NotRequired[JsonValue]
    error: NotRequired[ErrorDoc]
    handlers: NotRequired[HandlersDoc]
    waiting_for: NotRequired[list[WaitingDoc]]
    waiting: NotRequired[FlowWaitDoc]
    last_seq: int


class ExecutionSummary(TypedDict):
    execution_id: str
    workflow: str
    version: str
    status: str
    created_at_ms: int
    updated_at_ms: int
    # Only for a paused execution (docs/operating-executions.md).
    paused: NotRequired[bool]
    paused_at_ms: NotRequired[int]
    pause_reason: NotRequired[str]


class ExecutionList(TypedDict):
    executions: list[ExecutionSummary]


class ExecutionPage(TypedDict):
    """`GET /v1/executions?where=...` (docs/language/visibility.md): a page
    and the cursor of the next one (None on the last)."""

    executions: list[ExecutionSummary]
    next_cursor: str | None


class HistoryPage(TypedDict):
    """`GET /v1/executions/{id}/history`: the events of one run as JSON;
    `run` is there when asked for, or when the current run is not the first."""

    execution_id: str
    events: list[JsonObject]
    run: NotRequired[int | None]


class Started(TypedDict):
    execution_id: str
    created: bool


@attrs.frozen
class StartRequest:
    """One start of `Engine.start_many`: the arguments of `Engine.start`."""

    workflow: str
    version: str | None = None
    input: JsonValue = None
    execution_id: str | None = None
    schedule_id: str | None = None
    # A start's idempotency key (docs/language/flow-control.md).
    idempotency_key: str | None = None


class SignalAccepted(TypedDict):
    execution_id: str
    signal: str
    accepted: bool
    seq: int


class RepeatDoc(TypedDict):
    """One entry of a restart's or fork's effect preview (issue 38)."""

    step: str
    task: str
    effect: str
    idempotency_key: str
    ran_before: bool
    needs_force: bool


class ActionAnswer(TypedDict):
    """The answer of a restart or fork, and of its dry run (issue 38):
    `execution_id` is the execution that runs (for a fork, the new one),
    `run` its run that starts (or would)."""

    action: str
    execution_id: str
    source: str
    run: int
    workflow: str
    version: str
    step: str
    dry_run: bool
    started: bool
    kept: list[str]
    rerun: list[str]
    effects: list[RepeatDoc]


class QueryAnswer(TypedDict):
    execution_id: str
    query: str
    value: JsonValue


# ---------------------------------------------------------------- workers


class ContractRef(TypedDict):
    task_name: str
    contract_version: str


class Registered(TypedDict):
    accepted: bool
    worker_session_id: str
    heartbeat_interval_ms: int
    session_timeout_ms: int
    warnings: list[str]


class HeartbeatReply(TypedDict):
    accepted: bool
    # Tokens of attempts the worker should stop.
    cancel: list[str]


class Accepted(TypedDict):
    """The answer to a result, a failure or an unregistration."""

    accepted: bool
    reason: NotRequired[str]


class Assignment(TypedDict):
    """A task handed to a worker by `poll`."""

    token: str
    execution_id: str
    workflow: str
    workflow_version: str
    step_id: str
    task_name: str | None
    contract_version: str | None
    input: JsonValue
    idempotency_key: str | None
    attempt: int
    redelivery: bool
    deadline_ms: NotRequired[int]
    timeout_ms: NotRequired[int]


class WorkerDoc(TypedDict):
    worker_id: str
    runtime: str
    sdk: str | None
    contracts: list[ContractRef]
    last_seen_ms: int
    registered_at_ms: int
    online: bool
    sessions: int
    inflight: int


class WorkerList(TypedDict):
    workers: list[WorkerDoc]


# ---------------------------------------------------------------- definitions


class Deployed(TypedDict):
    name: str
    version: str
    definition_hash: str
    created: bool
    # Present (true) only when a development server replaced the definition
    # registered for this version.
    replaced: NotRequired[bool]


class WorkflowSummary(TypedDict):
    name: str
    version: str
    description: str | None
    definition_hash: str
    steps: list[str]
    tasks: list[str]


class WorkflowList(TypedDict):
    workflows: list[WorkflowSummary]
