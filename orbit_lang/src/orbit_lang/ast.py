"""The ORBIT syntax tree.

Every node is a frozen, slotted attrs class with a `span` covering its source
text. Members of blocks (workflow, step, task, test) are kept as ordered
tuples of member nodes, duplicates included, each with the span of its
keyword (`keyword`) as well as its own: chapter 31's "restrictions after
parsing" (E0106 duplicates, E0301 missing actions, E0307 placement, ...) are
the checker's job, and it needs every occurrence at its exact place.

`doc` holds the `///` doc comment written directly above a declaration,
step, signal, query or field (None when there is none).

Durations are normalised to integer milliseconds. A unary `-` directly
applied to an Int or Float literal is folded into a negative literal.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from orbit_lang.source import Span


@attrs.frozen
class Identifier:
    name: str
    span: Span


@attrs.frozen
class StringLiteral:
    value: str
    span: Span


# Types ------------------------------------------------------------------------


@attrs.frozen
class NamedType:
    """A primitive (`String`, `Int`, ...) or a schema name; also a bare `List`."""

    name: Identifier
    span: Span


@attrs.frozen
class ListType:
    element: TypeExpr
    span: Span


@attrs.frozen
class MapType:
    key: TypeExpr
    value: TypeExpr
    span: Span


@attrs.frozen
class Field:
    name: Identifier
    type: TypeExpr
    default: Expr | None
    doc: str | None
    span: Span


@attrs.frozen
class RecordType:
    """`{ field: Type = default ... }`: schemas, inline types, input, output, signals."""

    fields: tuple[Field, ...]
    span: Span


@attrs.frozen
class OptionalType:
    """`T?`; any number of `?` means the same as one."""

    inner: TypeExpr
    span: Span


TypeExpr: TypeAlias = NamedType | ListType | MapType | RecordType | OptionalType


# Expressions ------------------------------------------------------------------


@attrs.frozen
class IntLiteral:
    value: int
    span: Span


@attrs.frozen
class FloatLiteral:
    value: float
    span: Span


@attrs.frozen
class DurationLiteral:
    milliseconds: int
    span: Span


@attrs.frozen
class StringExpr:
    value: str
    span: Span


@attrs.frozen
class BoolLiteral:
    value: bool
    span: Span


@attrs.frozen
class NullLiteral:
    span: Span


@attrs.frozen
class Name:
    """A path root: `input`, `execution`, a step, a loop variable or a parameter."""

    name: str
    span: Span


@attrs.frozen
class MemberAccess:
    target: Expr
    member: Identifier
    span: Span


@attrs.frozen
class Index:
    target: Expr
    index: Expr
    span: Span


@attrs.frozen
class Call:
    function: Identifier
    arguments: tuple[Expr, ...]
    span: Span


@attrs.frozen
class Lambda:
    parameter: Identifier
    body: Expr
    span: Span


@attrs.frozen
class Unary:
    operator: str
    operand: Expr
    operator_span: Span
    span: Span


@attrs.frozen
class Binary:
    operator: str
    left: Expr
    right: Expr
    operator_span: Span
    span: Span


@attrs.frozen
class Conditional:
    condition: Expr
    then: Expr
    otherwise: Expr
    span: Span


@attrs.frozen
class ObjectEntry:
    key: str
    key_span: Span
    quoted: bool
    value: Expr
    span: Span


@attrs.frozen
class ObjectLiteral:
    entries: tuple[ObjectEntry, ...]
    span: Span


@attrs.frozen
class ListLiteral:
    items: tuple[Expr, ...]
    span: Span


Expr: TypeAlias = (
    IntLiteral
    | FloatLiteral
    | DurationLiteral
    | StringExpr
    | BoolLiteral
    | NullLiteral
    | Name
    | MemberAccess
    | Index
    | Call
    | Lambda
    | Unary
    | Binary
    | Conditional
    | ObjectLiteral
    | ListLiteral
)


# Members shared by tasks, workflows and tests -----------------------------------


@attrs.frozen
class Version:
    value: StringLiteral
    keyword: Span
    span: Span


@attrs.frozen
class Description:
    value: StringLiteral
    keyword: Span
    span: Span


# Task contracts ------------------------------------------------------------------


@attrs.frozen
class TaskInput:
    type: TypeExpr
    keyword: Span
    span: Span


@attrs.frozen
class TaskOutput:
    type: TypeExpr
    keyword: Span
    span: Span


@attrs.frozen
class CompensatedBy:
    task: StringLiteral
    keyword: Span
    span: Span


@attrs.frozen
class Effect:
    """`effect <class>` (issue 38): what running the task again does."""

    effect_class: Identifier
    keyword: Span
    span: Span


TaskMember: TypeAlias = Version | Description | TaskInput | TaskOutput | CompensatedBy | Effect


# Step members -----------------------------------------------------------------------


@attrs.frozen
class WorkerAction:
    task: StringLiteral
    keyword: Span
    span: Span


@attrs.frozen
class WorkflowAction:
    workflow: StringLiteral
    keyword: Span
    span: Span


@attrs.frozen
class SleepAction:
    duration: DurationLiteral
    keyword: Span
    span: Span


@attrs.frozen
class AwaitAction:
    signal: Identifier
    keyword: Span
    span: Span


@attrs.frozen
class ComputeAction:
    expression: Expr
    keyword: Span
    span: Span


@attrs.frozen
class Using:
    language: Identifier
    keyword: Span
    span: Span


@attrs.frozen
class After:
    steps: tuple[Identifier, ...]
    keyword: Span
    span: Span


@attrs.frozen
class With:
    expression: Expr
    keyword: Span
    span: Span


@attrs.frozen
class Timeout:
    """`timeout` of a step (per attempt) or of a workflow (whole execution)."""

    duration: DurationLiteral
    keyword: Span
    span: Span


@attrs.frozen
class Retention:
    """`retention` of a workflow (beyond the book, docs/retention.md): how
    long its finished executions stay in the database of a server with
    `--retention`."""

    duration: DurationLiteral
    keyword: Span
    span: Span


@attrs.frozen
class QueueTimeout:
    duration: DurationLiteral
    keyword: Span
    span: Span


@attrs.frozen
class Setting:
    """`name: expression` in a `retry` or `limits` block."""

    name: Identifier
    value: Expr
    span: Span


@attrs.frozen
class Retry:
    settings: tuple[Setting, ...]
    keyword: Span
    span: Span


@attrs.frozen
class IdempotencyKey:
    expression: Expr
    keyword: Span
    span: Span


@attrs.frozen
class When:
    condition: Expr
    keyword: Span
    span: Span


@attrs.frozen
class ForEach:
    variable: Identifier
    iterable: Expr
    keyword: Span
    span: Span


@attrs.frozen
class MaxParallel:
    value: Expr
    keyword: Span
    span: Span


@attrs.frozen
class FlowBlock:
    """A flow-control block (`concurrency`, `rate`, `fairness`, `debounce`)
    of a workflow or a step; `kind` spans its keyword."""

    kind: Identifier
    settings: tuple[Setting, ...]
    keyword: Span
    span: Span


@attrs.frozen
class Priority:
    """`priority: expression` of a workflow or a step."""

    expression: Expr
    keyword: Span
    span: Span


@attrs.frozen
class Compensate:
    members: tuple[StepMember, ...]
    keyword: Span
    span: Span


StepAction: TypeAlias = WorkerAction | WorkflowAction | SleepAction | AwaitAction | ComputeAction
StepMember: TypeAlias = (
    StepAction
    | Using
    | After
    | With
    | Timeout
    | QueueTimeout
    | Retry
    | IdempotencyKey
    | When
    | ForEach
    | MaxParallel
    | Compensate
    | FlowBlock
    | Priority
)
ACTION_TYPES = (WorkerAction, WorkflowAction, SleepAction, AwaitAction, ComputeAction)


@attrs.frozen
class Step:
    name: Identifier
    members: tuple[StepMember, ...]
    doc: str | None
    keyword: Span
    span: Span

    @property
    def actions(self) -> tuple[StepAction, ...]:
        return tuple(m for m in self.members if isinstance(m, ACTION_TYPES))


# Workflow members -----------------------------------------------------------------------


@attrs.frozen
class WorkflowInput:
    record: RecordType
    keyword: Span
    span: Span


@attrs.frozen
class WorkflowOutput:
    record: RecordType
    keyword: Span
    span: Span


@attrs.frozen
class Signal:
    name: Identifier
    record: RecordType
    doc: str | None
    keyword: Span
    span: Span


@attrs.frozen
class Query:
    name: Identifier
    expression: Expr
    doc: str | None
    keyword: Span
    span: Span


@attrs.frozen
class Return:
    expression: Expr
    keyword: Span
    span: Span


@attrs.frozen
class ContinueAsNew:
    """`continue_as_new [when c] with e` (either order); both clauses may be
    missing here, the checker reports a missing `with` (E0323)."""

    input: Expr | None
    condition: Expr | None
    with_keyword: Span | None
    when_keyword: Span | None
    keyword: Span
    span: Span


@attrs.frozen
class Limits:
    settings: tuple[Setting, ...]
    keyword: Span
    span: Span


# Live migration (docs/language/migration.md) ---------------------------------


@attrs.frozen
class MigrateRename:
    """`rename old to new`: the old version's step `old` is this one's `new`."""

    old: Identifier
    new: Identifier
    keyword: Span
    span: Span


@attrs.frozen
class MigrateRemove:
    """`remove old`: the old version's step `old` has no counterpart."""

    step: Identifier
    keyword: Span
    span: Span


@attrs.frozen
class MigrateInput:
    """`input { field: expression }`: values of the new input's fields."""

    value: ObjectLiteral
    keyword: Span
    span: Span


MigrateItem: TypeAlias = MigrateRename | MigrateRemove | MigrateInput


@attrs.frozen
class MigrateReverse:
    """`reverse { ... }`: the way back, from this version to the old one."""

    items: tuple[MigrateItem, ...]
    keyword: Span
    span: Span


@attrs.frozen
class Migrate:
    """`migrate from "<version>" in "<file>" { ... }` in a workflow."""

    version: StringLiteral
    source: StringLiteral
    items: tuple[MigrateItem, ...]
    reverse: tuple[MigrateReverse, ...]
    keyword: Span
    span: Span


@attrs.frozen
class Search:
    """`search { name: expression ... }`: the workflow's searchable fields
    (docs/language/visibility.md)."""

    settings: tuple[Setting, ...]
    keyword: Span
    span: Span


@attrs.frozen
class OutcomeHandler:
    """`on failure|cancel|timeout { steps }`; `kind` spans the kind word."""

    kind: Identifier
    steps: tuple[Step, ...]
    keyword: Span
    span: Span


@attrs.frozen
class EventHandler:
    """`on event <signal> { steps }`; `kind` spans the word `event`."""

    kind: Identifier
    signal: Identifier
    steps: tuple[Step, ...]
    keyword: Span
    span: Span


WorkflowMember: TypeAlias = (
    Version
    | Description
    | Timeout
    | WorkflowInput
    | WorkflowOutput
    | Step
    | Signal
    | Query
    | Return
    | ContinueAsNew
    | Limits
    | Search
    | Retention
    | OutcomeHandler
    | EventHandler
    | Migrate
    | FlowBlock
    | Priority
)


# Test language (chapter 51) ---------------------------------------------------------------


@attrs.frozen
class TestWorkflow:
    workflow: Identifier
    keyword: Span
    span: Span


@attrs.frozen
class TestInput:
    expression: Expr
    keyword: Span
    span: Span


@attrs.frozen
class MockReturns:
    expression: Expr
    span: Span


@attrs.frozen
class MockFails:
    code: StringLiteral
    message: StringLiteral | None
    retryable: bool
    span: Span


@attrs.frozen
class MockHangs:
    span: Span


MockBehaviour: TypeAlias = MockReturns | MockFails | MockHangs


@attrs.frozen
class MockStage:
    """One behaviour of a mock chain; `times` is None for the last one."""

    behaviour: MockBehaviour
    times: IntLiteral | None
    span: Span


@attrs.frozen
class Mock:
    task: StringLiteral
    stages: tuple[MockStage, ...]
    keyword: Span
    span: Span


@attrs.frozen
class TestSignal:
    name: Identifier
    payload: Expr | None
    keyword: Span
    span: Span


@attrs.frozen
class StepPath:
    """A step named in an expectation: `charge` or `on_failure:summary`."""

    parts: tuple[Identifier, ...]
    span: Span

    @property
    def text(self) -> str:
        return ":".join(part.name for part in self.parts)


@attrs.frozen
class ExpectStatus:
    status: Identifier
    span: Span


@attrs.frozen
class ExpectOutput:
    expression: Expr
    span: Span


@attrs.frozen
class ExpectError:
    code: StringLiteral
    span: Span


@attrs.frozen
class ExpectStepStatus:
    step: StepPath
    status: Identifier
    span: Span


@attrs.frozen
class ExpectStepOutput:
    step: StepPath
    expression: Expr
    span: Span


@attrs.frozen
class ExpectStepAttempts:
    step: StepPath
    count: IntLiteral
    span: Span


@attrs.frozen
class ExpectCompensated:
    step: Identifier
    span: Span


@attrs.frozen
class ExpectRuns:
    count: IntLiteral
    span: Span


Expectation: TypeAlias = (
    ExpectStatus
    | ExpectOutput
    | ExpectError
    | ExpectStepStatus
    | ExpectStepOutput
    | ExpectStepAttempts
    | ExpectCompensated
    | ExpectRuns
)


@attrs.frozen
class Expect:
    expectation: Expectation
    keyword: Span
    span: Span


TestMember: TypeAlias = TestWorkflow | Version | TestInput | Mock | TestSignal | Expect


@attrs.frozen
class Invariant:
    """`invariant <expectation> [when <expectation> (and <expectation>)*]` of a
    `verify` block: `expectation` must hold at the end of every explored
    execution in which every condition holds."""

    expectation: Expectation
    conditions: tuple[Expectation, ...]
    keyword: Span
    span: Span


VerifyMember: TypeAlias = TestWorkflow | Version | TestInput | Invariant


# Declarations -------------------------------------------------------------------------------


@attrs.frozen
class Import:
    path: StringLiteral
    keyword: Span
    span: Span


@attrs.frozen
class Schema:
    name: Identifier
    record: RecordType
    doc: str | None
    keyword: Span
    span: Span


@attrs.frozen
class Task:
    name: StringLiteral
    members: tuple[TaskMember, ...]
    doc: str | None
    keyword: Span
    span: Span


@attrs.frozen
class Workflow:
    name: Identifier
    members: tuple[WorkflowMember, ...]
    doc: str | None
    keyword: Span
    span: Span

    @property
    def steps(self) -> tuple[Step, ...]:
        """The main steps (not those of `on` blocks), in source order."""
        return tuple(m for m in self.members if isinstance(m, Step))

    @property
    def version(self) -> str | None:
        """The first `version` member's value (duplicates are the checker's)."""
        for member in self.members:
            if isinstance(member, Version):
                return member.value.value
        return None


@attrs.frozen
class Test:
    # Not a pytest test class, despite the name.
    __test__ = False

    name: StringLiteral
    members: tuple[TestMember, ...]
    doc: str | None
    keyword: Span
    span: Span


@attrs.frozen
class Verify:
    """A `verify` block (beyond the book): invariants `orbit verify` checks
    on every explored execution of a workflow. Never lowered, like a test."""

    name: StringLiteral
    members: tuple[VerifyMember, ...]
    doc: str | None
    keyword: Span
    span: Span


Declaration: TypeAlias = Import | Schema | Task | Workflow | Test | Verify


@attrs.frozen
class Module:
    """One parsed file. `span` covers the whole file."""

    path: str
    declarations: tuple[Declaration, ...]
    span: Span
