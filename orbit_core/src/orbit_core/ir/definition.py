"""A compiled workflow definition: the document `orbit compile` writes and the
engine runs. See docs/ir.md for the JSON layout and the hashing rules.
"""

from __future__ import annotations

from typing import Any

import attrs

from orbit_core.ir.expr import Expr
from orbit_core.ir.types import RecordType, Type

IR_V1 = "orbit-ir/1"
IR_V2 = "orbit-ir/2"
IR_VERSIONS = (IR_V1, IR_V2)

STEP_KINDS = ("task", "workflow", "sleep", "await", "compute")
HANDLER_KINDS = ("failure", "cancel", "timeout")
LIMIT_NAMES = ("max_fan_out", "max_history_events", "max_payload_bytes")


@attrs.frozen
class Retry:
    """A retry policy with every default filled in by the compiler."""

    attempts: int = 1
    backoff: str = "fixed"  # "fixed" | "exponential"
    initial_delay_ms: int = 1000
    max_delay_ms: int = 60000
    non_retryable: tuple[str, ...] = ()

    def delay_before(self, attempt: int) -> int:
        """Milliseconds to wait before `attempt` (2 is the first retry)."""
        if self.backoff == "exponential":
            delay: int = self.initial_delay_ms << max(attempt - 2, 0)
            return min(delay, self.max_delay_ms)
        return self.initial_delay_ms


@attrs.frozen
class ForEach:
    var: str
    over: Expr


@attrs.frozen
class Compensation:
    """A step's `compensate` block: always a task."""

    task: str
    with_: Expr | None = None
    using: str | None = None
    timeout_ms: int | None = None
    queue_timeout_ms: int | None = None
    retry: Retry | None = None
    idempotency_key: Expr | None = None


# Flow control (docs/language/flow-control.md): how many executions or task
# attempts run at once, how fast they start, in what order. Each part is
# omitted from the document when not declared, so definitions without flow
# control keep their hashes.
FLOW_ON_EXCEED = ("wait", "drop")


@attrs.frozen
class Concurrency:
    """At most `limit` running executions (workflow) or task attempts (step)
    per value of `key`, or in all when there is no key."""

    limit: int
    key: Expr | None = None


@attrs.frozen
class Rate:
    """At most `limit` starts (workflow) or dispatches (step) per `period_ms`
    per key, with up to `burst` at once; `on_exceed` is `wait` or `drop`."""

    limit: int
    period_ms: int
    burst: int | None = None
    key: Expr | None = None
    on_exceed: str = "wait"


@attrs.frozen
class Fairness:
    """Round robin among the values of `key`, each served `weight` times a turn."""

    key: Expr
    weight: Expr | None = None


@attrs.frozen
class Debounce:
    """A start within `period_ms` of a pending one with the same key replaces
    it; none waits longer than `max_wait_ms` after the first."""

    period_ms: int
    max_wait_ms: int | None = None
    key: Expr | None = None


@attrs.frozen
class Flow:
    concurrency: Concurrency | None = None
    rate: Rate | None = None
    priority: Expr | None = None
    fairness: Fairness | None = None
    debounce: Debounce | None = None


@attrs.frozen
class Step:
    """One step. Exactly one action field is set, as `kind` says:
    task -> `task`, workflow -> `workflow`, sleep -> `sleep_ms`,
    await -> `signal`, compute -> `compute`.
    """

    name: str
    kind: str  # one of STEP_KINDS
    task: str | None = None
    workflow: str | None = None
    sleep_ms: int | None = None
    signal: str | None = None
    compute: Expr | None = None
    depends_on: tuple[str, ...] = ()
    with_: Expr | None = None
    when: Expr | None = None
    for_each: ForEach | None = None
    max_parallel: int | None = None
    using: str | None = None
    timeout_ms: int | None = None
    queue_timeout_ms: int | None = None
    retry: Retry | None = None
    idempotency_key: Expr | None = None
    compensate: Compensation | None = None
    flow: Flow | None = None


@attrs.frozen
class TaskContract:
    """A task contract the workflow calls (key: the task name)."""

    name: str
    version: str
    input: Type
    output: Type
    compensated_by: str | None = None
    # Issue 38: `idempotent`, `compensable`, `once` or `pure` when declared;
    # absent (None) means unknown, and keeps older documents' hashes.
    effect: str | None = None


# The effect classes a task contract may declare (issue 38).
EFFECT_CLASSES = ("idempotent", "compensable", "once", "pure")


@attrs.frozen
class ChildContract:
    """A child workflow the workflow starts (key: `workflow:<Name>`), pinned by hash."""

    name: str
    version: str
    definition_hash: str
    input: RecordType
    output: Type


@attrs.frozen
class Signal:
    name: str
    payload: RecordType


@attrs.frozen
class Query:
    name: str
    expr: Expr
    type: Type


@attrs.frozen
class EventHandler:
    signal: str
    steps: tuple[Step, ...]


@attrs.frozen
class ContinueAsNew:
    with_: Expr
    when: Expr | None = None


# ---- live migration (docs/language/migration.md): carried only when declared


@attrs.frozen
class MigrationMap:
    """How the state of an execution of one version becomes that of another:
    old step names to new ones (a step not named keeps its name), old steps
    dropped (allowed only while they have not started), and the values of
    the target's input fields, as expressions over the source execution
    (`input` and its steps' outputs)."""

    renamed: dict[str, str] = attrs.field(factory=dict)
    removed: tuple[str, ...] = ()
    input: dict[str, Expr] = attrs.field(factory=dict)


@attrs.frozen
class Migration:
    """A `migrate from` block: executions of `from_version` (exactly the
    definition `from_hash`) may move to this definition by `forward`, and
    back by `reverse` when declared."""

    from_version: str
    from_hash: str
    forward: MigrationMap = attrs.field(factory=MigrationMap)
    reverse: MigrationMap | None = None


@attrs.frozen
class SearchField:
    """A searchable field (`search { name: expr }`, docs/language/visibility.md):
    written to the store's search index in the commit of the event that makes
    `expr` known. `type` is a scalar (or optional scalar) the index can hold."""

    name: str
    expr: Expr
    type: Type


@attrs.frozen
class Definition:
    """A workflow definition. `definition_hash` covers everything except
    `source_map` and itself (see orbit_core.ir.canonical)."""

    ir_version: str
    name: str
    version: str
    input: RecordType
    output: Type
    steps: tuple[Step, ...]
    result: Expr
    contracts: dict[str, TaskContract | ChildContract]
    description: str | None = None
    timeout_ms: int | None = None
    # orbit-ir/2 only
    signals: tuple[Signal, ...] = ()
    queries: tuple[Query, ...] = ()
    handlers: dict[str, tuple[Step, ...]] = attrs.field(factory=dict)
    events: tuple[EventHandler, ...] = ()
    limits: dict[str, int] = attrs.field(factory=dict)
    continue_as_new: ContinueAsNew | None = None
    # Omitted when none is declared, so other definitions keep their hash.
    migrations: tuple[Migration, ...] = ()
    flow: Flow | None = None
    # Beyond the book, omitted when empty so book sources hash as before.
    search: tuple[SearchField, ...] = ()
    # Beyond the book (docs/retention.md): how long a finished execution
    # stays in the database of a server with --retention. Omitted from the
    # document when the workflow does not declare it, so hashes are unchanged.
    retention_ms: int | None = None
    # Not hashed.
    definition_hash: str = ""
    # Left loose for cattrs, which has no structure hook for `object`.
    source_map: dict[str, Any] = attrs.field(factory=dict)

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def step(self, name: str) -> Step | None:
        for s in self.steps:
            if s.name == name:
                return s
        return None

    def signal(self, name: str) -> Signal | None:
        for s in self.signals:
            if s.name == name:
                return s
        return None

    def migration_from(self, version: str) -> Migration | None:
        for m in self.migrations:
            if m.from_version == version:
                return m
        return None

    def query(self, name: str) -> Query | None:
        for q in self.queries:
            if q.name == name:
                return q
        return None


# The attrs classes a definition document is made of, parts before the
# definition; the codec gives each of them its JSON encoding.
DOCUMENT_CLASSES = (
    Retry,
    Concurrency,
    Rate,
    Fairness,
    Debounce,
    Flow,
    ForEach,
    Compensation,
    Step,
    TaskContract,
    ChildContract,
    Signal,
    Query,
    EventHandler,
    ContinueAsNew,
    MigrationMap,
    Migration,
    SearchField,
    Definition,
)
