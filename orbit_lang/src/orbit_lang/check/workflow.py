"""Checks one workflow (chapters 11 to 25) and assembles its definition.

Workflow members are checked in this order: singular members (E0106),
version (E0500, W0201), input and output, signals (E0317), limits, the
steps (names E0302/E0306, placement, graph, types), the `on` blocks
(E0319, E0315, E0322), queries (E0318), `return` (E0501) and
`continue_as_new` (E0323, E0324, W0607), then the workflow-wide warnings.
"""

from __future__ import annotations

import attrs

from orbit_core.ir import (
    ContinueAsNew,
    Definition,
    EventHandler,
    Query,
    SearchField,
    Signal,
    Step,
)
from orbit_core.ir import expr as e
from orbit_core.ir.types import EMPTY_RECORD, RecordType
from orbit_lang import ast
from orbit_lang.check import flow as check_flow
from orbit_lang.check import settings
from orbit_lang.check.context import CheckedWorkflow, Compilation
from orbit_lang.check.contracts import check_version
from orbit_lang.check.env import Env
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.placement import StepShape, shape_step
from orbit_lang.check.report import did_you_mean, duplicate_member, first_declared
from orbit_lang.check.search import check_search
from orbit_lang.check.steps import Block, StepChecker
from orbit_lang.check.types import (
    BOOL,
    JSON,
    NullType,
    Type,
    optional,
    render,
    required,
    strip,
    to_ir,
)
from orbit_lang.diagnostics import Label

SINGLE_MEMBERS: dict[type, str] = {
    ast.Version: "version",
    ast.Description: "description",
    ast.Timeout: "timeout",
    ast.WorkflowInput: "input",
    ast.WorkflowOutput: "output",
    ast.Return: "return",
    ast.ContinueAsNew: "continue_as_new",
    ast.Limits: "limits",
    ast.Search: "search",
    ast.Retention: "retention",
}
RESERVED_STEP_NAMES = ("input", "execution", "output", "if", "then", "else")
OUTCOME_KINDS = ("failure", "cancel", "timeout")


@attrs.define
class _Members:
    single: dict[type, ast.WorkflowMember] = attrs.field(factory=dict)
    steps: list[ast.Step] = attrs.field(factory=list)
    signals: list[ast.Signal] = attrs.field(factory=list)
    queries: list[ast.Query] = attrs.field(factory=list)
    outcomes: list[ast.OutcomeHandler] = attrs.field(factory=list)
    events: list[ast.EventHandler] = attrs.field(factory=list)
    flow: list[ast.FlowBlock | ast.Priority] = attrs.field(factory=list)


def check_workflow(c: Compilation, node: ast.Workflow) -> CheckedWorkflow:
    return _WorkflowChecker(c, node).run()


class _WorkflowChecker:
    def __init__(self, c: Compilation, node: ast.Workflow) -> None:
        self.c = c
        self.node = node
        self.report = c.report

    def run(self) -> CheckedWorkflow:
        members = self._members()
        version = self._version(members)
        timeout_ms = None
        timeout = members.single.get(ast.Timeout)
        if isinstance(timeout, ast.Timeout):
            timeout_ms = settings.timeout_ms(timeout.duration, self.report)
        workflow_input = EMPTY_RECORD
        member = members.single.get(ast.WorkflowInput)
        if isinstance(member, ast.WorkflowInput):
            workflow_input = self.c.types.record(member.record)
        declared_output: RecordType | None = None
        member = members.single.get(ast.WorkflowOutput)
        if isinstance(member, ast.WorkflowOutput):
            declared_output = self.c.types.record(member.record)
        signals = self._signals(members.signals)
        limits: dict[str, int] = {}
        member = members.single.get(ast.Limits)
        if isinstance(member, ast.Limits):
            limits = settings.limits(member, self.report)
        retention_ms = None
        member = members.single.get(ast.Retention)
        if isinstance(member, ast.Retention):
            retention_ms = settings.retention_ms(member.duration, self.report)

        checker = StepChecker(self.c, workflow_input, signals, timeout is not None)
        main = Block(None, None)
        shapes = self._shapes(members.steps, None, frozenset())
        steps, _ = checker.check_block(shapes, main)
        step_types: dict[str, Type] = {name: info.narrowed for name, info in main.checked.items()}
        handled = self._handled_signals(members.events, signals)
        self._awaits_of_handled(members.steps, handled)
        handlers = self._outcome_handlers(members.outcomes, checker, main, step_types)
        events = self._event_handlers(members.events, checker, main, signals, step_types)
        queries = self._queries(members.queries, workflow_input, main)
        result, output = self._return(members, workflow_input, main, declared_output)
        continue_as_new = self._continue_as_new(members, workflow_input, main)
        self._unused_signals(members, handled)
        flow = None
        if members.flow:
            names = frozenset(step.name.name for step in members.steps)
            env = check_flow.workflow_env(workflow_input, names, self.report)
            flow = check_flow.check_flow(members.flow, env, self.report, step=False)
        search = members.single.get(ast.Search)
        searchable: tuple[SearchField, ...] = ()
        if isinstance(search, ast.Search):
            env = self._reading_env(workflow_input, main, query=False)
            searchable = check_search(search, env, self.report)

        description = members.single.get(ast.Description)
        definition = Definition(
            ir_version="",
            name=self.node.name.name,
            version=version,
            input=workflow_input,
            output=to_ir(output),
            steps=tuple(steps),
            result=result,
            contracts={name: contract.ir for name, contract in checker.tasks.items()},
            description=description.value.value
            if isinstance(description, ast.Description)
            else None,
            timeout_ms=timeout_ms,
            signals=tuple(Signal(name, payload) for name, payload in signals.items()),
            queries=tuple(queries),
            handlers=handlers,
            events=tuple(events),
            limits=limits,
            continue_as_new=continue_as_new,
            flow=flow,
            search=searchable,
            retention_ms=retention_ms,
        )
        return CheckedWorkflow(self.node, definition, tuple(checker.children), step_types)

    # ------------------------------------------------------------ members

    def _members(self) -> _Members:
        found = _Members()
        for member in self.node.members:
            kind = type(member)
            if kind in SINGLE_MEMBERS:
                first = found.single.get(kind)
                if first is not None:
                    duplicate_member(
                        self.report, SINGLE_MEMBERS[kind], member.keyword, first.keyword
                    )
                else:
                    found.single[kind] = member
            elif isinstance(member, ast.Step):
                found.steps.append(member)
            elif isinstance(member, ast.Signal):
                found.signals.append(member)
            elif isinstance(member, ast.Query):
                found.queries.append(member)
            elif isinstance(member, ast.OutcomeHandler):
                found.outcomes.append(member)
            elif isinstance(member, ast.EventHandler):
                found.events.append(member)
            elif isinstance(member, ast.FlowBlock | ast.Priority):
                found.flow.append(member)
        return found

    def _version(self, members: _Members) -> str:
        member = members.single.get(ast.Version)
        if isinstance(member, ast.Version):
            check_version(member.value, self.report)
            return member.value.value
        self.report.error(
            "E0500",
            f"workflow `{self.node.name.name}` has no version",
            self.node.name.span,
            help='add `version "1.0.0"`; running executions stay pinned to the version they '
            "started with",
        )
        return ""

    def _signals(self, declared: list[ast.Signal]) -> dict[str, RecordType]:
        signals: dict[str, RecordType] = {}
        first: dict[str, ast.Signal] = {}
        for signal in declared:
            name = signal.name.name
            if name in first:
                self.report.error(
                    "E0317",
                    f"signal `{name}` is declared more than once",
                    signal.name.span,
                    labels=[first_declared(first[name].name.span)],
                    help="merge the two payloads into one declaration, or rename one",
                )
                continue
            first[name] = signal
            signals[name] = self.c.types.record(signal.record)
        return signals

    def _shapes(
        self, steps: tuple[ast.Step, ...] | list[ast.Step], block: str | None, outer: frozenset[str]
    ) -> list[StepShape]:
        shapes: list[StepShape] = []
        seen: dict[str, ast.Step] = {}
        for step in steps:
            name = step.name.name
            if name in RESERVED_STEP_NAMES:
                self.report.error(
                    "E0306",
                    f"`{name}` is a reserved name and cannot name a step",
                    step.name.span,
                    help="rename the step; `input`, `execution`, `output`, `if`, `then` and "
                    "`else` have a meaning in expressions",
                )
                continue
            reserved = ("failure", "event") if block == "event" else ("failure",)
            if block is not None and (name in outer or name in reserved):
                self.report.error(
                    "E0302",
                    f"handler step `{name}` has the same name as a workflow step or a reserved name",
                    step.name.span,
                    help="give handler steps their own names, e.g. `alert_ops`",
                )
                continue
            if name in seen:
                self.report.error(
                    "E0302",
                    f"step `{name}` is defined more than once",
                    step.name.span,
                    labels=[first_declared(seen[name].name.span)],
                )
                continue
            seen[name] = step
            shapes.append(shape_step(step, block, self.report))
        return shapes

    # ------------------------------------------------------------ signals and handlers

    def _handled_signals(
        self, events: list[ast.EventHandler], signals: dict[str, RecordType]
    ) -> dict[str, ast.EventHandler]:
        handled: dict[str, ast.EventHandler] = {}
        for handler in events:
            name = handler.signal.name
            if name not in signals:
                continue
            if name in handled:
                continue
            handled[name] = handler
        return handled

    def _awaits_of_handled(
        self, steps: list[ast.Step], handled: dict[str, ast.EventHandler]
    ) -> None:
        for step in steps:
            for member in step.members:
                if isinstance(member, ast.AwaitAction) and member.signal.name in handled:
                    handler = handled[member.signal.name]
                    self.report.error(
                        "E0322",
                        f"signal `{member.signal.name}` is handled by `on event` and cannot also "
                        "be awaited",
                        member.signal.span,
                        labels=[Label(handler.signal.span, "handled here")],
                        notes=[
                            "every signal handled by `on event` starts the handler; an `await` "
                            "would compete for it"
                        ],
                    )

    def _outcome_handlers(
        self,
        handlers: list[ast.OutcomeHandler],
        checker: StepChecker,
        main: Block,
        step_types: dict[str, Type],
    ) -> dict[str, tuple[Step, ...]]:
        result: dict[str, tuple[Step, ...]] = {}
        first: dict[str, ast.OutcomeHandler] = {}
        for handler in handlers:
            kind = handler.kind.name
            if kind not in OUTCOME_KINDS:
                continue  # E0105, reported by the parser
            if kind in first:
                self.report.error(
                    "E0319",
                    f"`on {kind}` is declared more than once",
                    handler.kind.span,
                    labels=[first_declared(first[kind].kind.span)],
                )
                continue
            first[kind] = handler
            block = Block(kind, dict(main.checked), failure=True)
            shapes = self._shapes(handler.steps, kind, frozenset(main.checked))
            steps, _ = checker.check_block(shapes, block)
            result[kind] = tuple(steps)
            for name, info in block.checked.items():
                step_types[f"on_{kind}:{name}"] = info.narrowed
        return result

    def _event_handlers(
        self,
        handlers: list[ast.EventHandler],
        checker: StepChecker,
        main: Block,
        signals: dict[str, RecordType],
        step_types: dict[str, Type],
    ) -> list[EventHandler]:
        result: list[EventHandler] = []
        first: dict[str, ast.EventHandler] = {}
        for handler in handlers:
            name = handler.signal.name
            payload = signals.get(name)
            if payload is None:
                self.report.error(
                    "E0315",
                    f"unknown signal `{name}`",
                    handler.signal.span,
                    help=did_you_mean(name, signals)
                    or f"declare it in the workflow: `signal {name} {{ ... }}`",
                )
                continue
            if name in first:
                self.report.error(
                    "E0319",
                    f"`on event {name}` is declared more than once",
                    handler.signal.span,
                    labels=[first_declared(first[name].signal.span)],
                )
                continue
            first[name] = handler
            block = Block("event", dict(main.checked), event=payload)
            shapes = self._shapes(handler.steps, "event", frozenset(main.checked))
            steps, _ = checker.check_block(shapes, block)
            result.append(EventHandler(name, tuple(steps)))
            for step_name, info in block.checked.items():
                step_types[f"on_event:{name}:{step_name}"] = info.narrowed
        return result

    def _unused_signals(self, members: _Members, handled: dict[str, ast.EventHandler]) -> None:
        awaited = {
            member.signal.name
            for step in members.steps
            for member in step.members
            if isinstance(member, ast.AwaitAction)
        }
        declared = {signal.name.name for signal in members.signals}
        if awaited - declared:
            return  # an `await` names an unknown signal (E0315): likely a typo of one of these
        seen: set[str] = set()
        for signal in members.signals:
            name = signal.name.name
            if name in seen or name in awaited or name in handled:
                continue
            seen.add(name)
            self.report.warning(
                "W0605",
                f"signal `{name}` is declared but no step awaits it",
                signal.name.span,
                help=f"add a step with `await {name}`, or remove the declaration",
            )

    # ------------------------------------------------------------ queries, return, continue

    def _reading_env(self, workflow_input: RecordType, main: Block, *, query: bool) -> Env:
        steps: dict[str, Type] = {}
        for name, info in main.checked.items():
            steps[name] = optional(info.view) if query else info.view
        return Env(input=workflow_input, steps=steps, step_names=frozenset(main.checked))

    def _queries(
        self, queries: list[ast.Query], workflow_input: RecordType, main: Block
    ) -> list[Query]:
        env = self._reading_env(workflow_input, main, query=True)
        result: list[Query] = []
        first: dict[str, ast.Query] = {}
        for query in queries:
            name = query.name.name
            if name in first:
                self.report.error(
                    "E0318",
                    f"query `{name}` is declared more than once",
                    query.name.span,
                    labels=[first_declared(first[name].name.span)],
                )
                continue
            first[name] = query
            typed = ExprChecker(self.report, env).infer(query.expression)
            result.append(Query(name, typed.ir, to_ir(typed.type)))
        return result

    def _return(
        self,
        members: _Members,
        workflow_input: RecordType,
        main: Block,
        declared: RecordType | None,
    ) -> tuple[e.Expr, Type]:
        member = members.single.get(ast.Return)
        if not isinstance(member, ast.Return):
            if declared is not None and any(required(f) for f in declared.fields):
                output = members.single[ast.WorkflowOutput]
                self.report.error(
                    "E0501",
                    "workflow declares an `output` but has no `return`",
                    output.keyword,
                    help="add a `return` that builds the output",
                )
            return e.EMPTY_OBJECT, declared if declared is not None else EMPTY_RECORD
        env = self._reading_env(workflow_input, main, query=False)
        typed = ExprChecker(self.report, env).check(member.expression, declared)
        if declared is not None:
            return typed.ir, declared
        return typed.ir, to_ir(typed.type)

    def _continue_as_new(
        self, members: _Members, workflow_input: RecordType, main: Block
    ) -> ContinueAsNew | None:
        member = members.single.get(ast.ContinueAsNew)
        if not isinstance(member, ast.ContinueAsNew):
            return None
        env = self._reading_env(workflow_input, main, query=False)
        when_ir = None
        if member.condition is not None:
            checker = ExprChecker(self.report, env)
            typed = checker.infer(member.condition)
            if not checker.errors and not _is_condition(typed.type):
                self.report.error(
                    "E0324",
                    f"the `continue_as_new` condition must be `Bool`, found `{render(typed.type)}`",
                    member.condition.span,
                )
            when_ir = typed.ir
        else:
            returned = members.single.get(ast.Return)
            if isinstance(returned, ast.Return):
                self.report.warning(
                    "W0607",
                    "`return` is never used: `continue_as_new` has no `when`, so every run "
                    "continues",
                    returned.expression.span,
                    labels=[Label(member.span, "always continues")],
                    help="add `when <condition>` to `continue_as_new`, or remove `return`",
                )
        if member.input is None:
            self.report.error(
                "E0323",
                "`continue_as_new` needs `with <input>`",
                member.span,
                help="give the next run's input, e.g. `continue_as_new with { cursor: page.next }`",
            )
            return None
        typed_input = ExprChecker(self.report, env).check(member.input, workflow_input)
        return ContinueAsNew(typed_input.ir, when_ir)


def _is_condition(t: Type) -> bool:
    return strip(t) == BOOL or t == JSON or isinstance(t, NullType)
