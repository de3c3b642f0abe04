"""Checks the steps of one block (a workflow's steps, or an `on` block) in
dependency order, and builds their IR.

Each position reads steps with its own types (chapters 12, 14, 22, 23):
conditional steps are optional except where narrowed, a compensation reads
its own step (non-optional, one element for a `for` step) and that step's
ancestors only, and handler steps read the workflow's steps as optional.
"""

from __future__ import annotations

from collections.abc import Hashable

import attrs

from orbit_core.evaluate import EvalError, Scope, evaluate
from orbit_core.ir import Compensation, ForEach, Retry, Step
from orbit_core.ir import expr as e
from orbit_core.ir.definition import Flow
from orbit_core.ir.types import EMPTY_RECORD, ListType, RecordType
from orbit_lang import ast
from orbit_lang.check import flow as check_flow
from orbit_lang.check import graph, narrowing, settings
from orbit_lang.check.context import Compilation
from orbit_lang.check.contracts import Contract
from orbit_lang.check.env import Env
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.placement import CompensateShape, StepShape
from orbit_lang.check.report import did_you_mean
from orbit_lang.check.typed import Typed
from orbit_lang.check.types import (
    JSON,
    STRING,
    NullType,
    Type,
    optional,
    render,
    required,
    strip,
    to_ir,
)
from orbit_lang.source import Span

LANGUAGES = (
    "python",
    "typescript",
    "javascript",
    "go",
    "rust",
    "java",
    "kotlin",
    "csharp",
    "ruby",
    "php",
    "elixir",
    "swift",
    "cpp",
    "http",
    "any",
)
RESERVED_NAMES = ("input", "execution")


@attrs.frozen
class StepInfo:
    """How other expressions see a checked step."""

    # One element's output: what its own compensation reads.
    element: Type
    # The type as usually read (a list for `for`, optional with `when`).
    view: Type
    # The type once narrowed (the `when` made no difference).
    narrowed: Type
    condition: ast.Expr | None


@attrs.define
class _Common:
    using: str | None = None
    timeout_ms: int | None = None
    queue_timeout_ms: int | None = None
    retry: Retry | None = None


@attrs.define
class Block:
    """The steps one block can read, and how."""

    # None for the workflow's own steps; else `failure`, `cancel`,
    # `timeout` or `event`.
    kind: str | None
    # The workflow's steps, as a handler reads them (None for the main block).
    outer: dict[str, StepInfo] | None
    failure: bool = False
    event: Type | None = None
    checked: dict[str, StepInfo] = attrs.field(factory=dict)


class StepChecker:
    def __init__(
        self,
        compilation: Compilation,
        workflow_input: RecordType,
        signals: dict[str, RecordType],
        workflow_timeout: bool,
    ) -> None:
        self.c = compilation
        self.report = compilation.report
        self.input = workflow_input
        self.signals = signals
        self.workflow_timeout = workflow_timeout
        # Contracts and child workflows used, in first-use order.
        self.tasks: dict[str, Contract] = {}
        self.children: dict[str, None] = {}

    # ------------------------------------------------------------ blocks

    def check_block(self, shapes: list[StepShape], block: Block) -> tuple[list[Step], graph.Graph]:
        outer_names = frozenset(block.outer or ())
        step_graph = graph.build(shapes, self.report, outer=outer_names, block=block.kind)
        by_name = {shape.name: shape for shape in shapes}
        names = frozenset(by_name) | outer_names
        steps: list[Step] = []
        for name in step_graph.order:
            shape = by_name[name]
            if name in step_graph.cyclic:
                block.checked[name] = UNKNOWN
                continue
            step = self._step(shape, block, step_graph, names)
            if step is not None:
                steps.append(step)
        return steps, step_graph

    def _step(
        self, shape: StepShape, block: Block, step_graph: graph.Graph, names: frozenset[str]
    ) -> Step | None:
        name = shape.name
        when_member = shape.get(ast.When)
        condition = when_member.condition if isinstance(when_member, ast.When) else None
        guards = narrowing.guarded(condition)
        loop = shape.get(ast.ForEach)
        loop_name = loop.variable.name if isinstance(loop, ast.ForEach) else None
        reading = self._env(block, guards, names)
        when_ir = None
        if isinstance(when_member, ast.When):
            when_ir = self._when(
                shape,
                when_member,
                attrs.evolve(reading, steps=self._plain(block), hidden_loop_var=loop_name),
            )
        for_each = None
        element_type: Type | None = None
        if isinstance(loop, ast.ForEach):
            for_each, element_type = self._for(loop, reading, names)
        inner = reading
        if isinstance(loop, ast.ForEach) and element_type is not None:
            inner = attrs.evolve(reading, loop_var=(loop.variable.name, element_type))
        elif rejected := _rejected_loop(shape):
            # `for` is not allowed here (E0307); its variable still reads as
            # JSON so that its uses are not reported again.
            inner = attrs.evolve(reading, loop_var=(rejected, JSON))
        step, element = self._action(shape, inner)
        element = element if step is not None else JSON
        view: Type = ListType(to_ir(element)) if for_each is not None else element
        narrowed = view
        if condition is not None:
            view = optional(view)
        info = StepInfo(element, view, narrowed, condition)
        block.checked[name] = info
        if step is None:
            return None
        key = shape.get(ast.IdempotencyKey)
        key_ir = None
        if isinstance(key, ast.IdempotencyKey):
            key_ir = ExprChecker(self.report, inner).check(key.expression, STRING).ir
        compensate = None
        if shape.compensate is not None:
            ancestors = {
                a: block.checked[a] for a in step_graph.ancestors[name] if a in block.checked
            }
            comp_env = self._compensate_env(shape, info, ancestors, inner, guards)
            compensate = self._compensation(shape.compensate, comp_env)
        if block.kind is None and isinstance(shape.action, ast.WorkerAction):
            self._compensation_warnings(shape, shape.action)
        flow = self._flow(shape, inner) if shape.flow else None
        return attrs.evolve(
            step,
            depends_on=step_graph.depends_on[name],
            when=when_ir,
            for_each=for_each,
            max_parallel=self._max_parallel(shape),
            idempotency_key=key_ir,
            compensate=compensate,
            flow=flow,
        )

    def _flow(self, shape: StepShape, env: Env) -> Flow | None:
        """A task step's flow control; other steps have no task to limit."""
        if not isinstance(shape.action, ast.WorkerAction):
            kind = shape.kind or "this"
            for member in shape.flow:
                word = member.kind.name if isinstance(member, ast.FlowBlock) else "priority"
                self.report.error(
                    "E1109",
                    f"`{word}` is not allowed in a `{kind}` step",
                    member.keyword,
                    notes=["flow control limits task steps and workflows"],
                )
            return None
        return check_flow.check_flow(
            shape.flow, check_flow.step_env(env, self.report), self.report, step=True
        )

    def _compensation_warnings(self, shape: StepShape, action: ast.WorkerAction) -> None:
        """W0601 and W0602: a step that calls a task declaring
        `compensated_by` compensates it with that task."""
        contract = self.c.contracts.get(action.task.value)
        if contract is None or contract.compensated_by is None:
            return
        task, undo = contract.name, contract.compensated_by
        if shape.get(ast.Compensate) is None:
            self.report.warning(
                "W0601",
                f"step `{shape.name}` calls `{task}` but has no compensation",
                action.task.span,
                notes=[
                    f'`{task}` declares `compensated_by "{undo}"`: if a later step fails, its '
                    "effect would be left in place"
                ],
                help=f'add `compensate {{ worker "{undo}" with {{ ... }} }}`',
            )
        elif shape.compensate is not None and shape.compensate.worker is not None:
            used = shape.compensate.worker.task
            if used.value != undo:
                self.report.warning(
                    "W0602",
                    f"step `{shape.name}` compensates `{task}` with `{used.value}`, but the "
                    f"contract names `{undo}`",
                    used.span,
                    help=f'use `worker "{undo}"` in the compensation, or change the contract\'s '
                    "`compensated_by`",
                )

    # ------------------------------------------------------------ environments

    def _plain(self, block: Block) -> dict[str, Type]:
        """Steps as a `when`, a query or `return` reads them: no narrowing."""
        steps: dict[str, Type] = {}
        if block.outer is not None:
            steps.update({name: optional(info.view) for name, info in block.outer.items()})
        steps.update({name: info.view for name, info in block.checked.items()})
        return steps

    def _env(self, block: Block, guards: frozenset[Hashable], names: frozenset[str]) -> Env:
        steps: dict[str, Type] = {}
        if block.outer is not None:
            for name, info in block.outer.items():
                # Only `!is_null(x)` proves a workflow step succeeded.
                if narrowing.narrows(guards, name, None):
                    steps[name] = info.narrowed
                else:
                    steps[name] = optional(info.view)
        for name, info in block.checked.items():
            narrowed = narrowing.narrows(guards, name, info.condition)
            steps[name] = info.narrowed if narrowed else info.view
        return Env(
            input=self.input,
            steps=steps,
            step_names=names,
            failure=block.failure,
            event=block.event,
        )

    def _compensate_env(
        self,
        shape: StepShape,
        info: StepInfo,
        ancestors: dict[str, StepInfo],
        inner: Env,
        guards: frozenset[Hashable],
    ) -> Env:
        name = shape.name
        steps: dict[str, Type] = {name: info.element}
        for ancestor, ancestor_info in ancestors.items():
            narrowed = narrowing.narrows(guards, ancestor, ancestor_info.condition)
            steps[ancestor] = ancestor_info.narrowed if narrowed else ancestor_info.view

        def blocked(other: str, span: Span) -> None:
            self.report.error(
                "E0308",
                f"step `{other}` cannot be referenced here",
                span,
                notes=[
                    f"a compensation for `{name}` can only read `{name}` and the steps it depends on"
                ],
            )

        return attrs.evolve(inner, steps=steps, blocked=blocked)

    # ------------------------------------------------------------ members

    def _when(self, shape: StepShape, member: ast.When, env: Env) -> e.Expr | None:
        checker = ExprChecker(self.report, env)
        typed = checker.infer(member.condition)
        if checker.read_hidden_loop_var:
            self.report.error(
                "E0401",
                f"loop variable `{env.hidden_loop_var}` is not in scope in `when`",
                member.condition.span,
                notes=["`when` decides once whether the whole `for` step runs, before it fans out"],
                help="to process only some elements, filter the list in a previous step",
            )
            return typed.ir
        if checker.errors:
            return typed.ir
        if not checker.condition(typed.type, member.condition.span, "`when` condition"):
            return typed.ir
        self._constant_condition(shape, member, typed)
        return typed.ir

    def _constant_condition(self, shape: StepShape, member: ast.When, typed: Typed) -> None:
        if any(True for _ in graph.roots(member.condition)):
            return
        try:
            value = evaluate(typed.ir, Scope())
        except EvalError:
            return  # fails at run time with EXPRESSION_ERROR
        span = member.condition.span
        if value is True:
            self.report.warning(
                "W0604",
                f"the `when` condition of step `{shape.name}` is always true",
                span,
                help="remove `when`; it also makes the step's output optional for no reason",
            )
        elif value is False or value is None:
            which = "false" if value is False else "null"
            self.report.warning(
                "W0603",
                f"step `{shape.name}` never runs: its `when` condition is always {which}",
                span,
                help="remove the step, or make the condition depend on input or step results",
            )

    def _for(self, loop: ast.ForEach, env: Env, names: frozenset[str]) -> tuple[ForEach, Type]:
        variable = loop.variable
        if variable.name in RESERVED_NAMES:
            self.report.error(
                "E0413", f"loop variable `{variable.name}` shadows a built-in name", variable.span
            )
        elif variable.name in names:
            self.report.error(
                "E0413", f"loop variable `{variable.name}` shadows a step", variable.span
            )
        typed = ExprChecker(self.report, env).infer(loop.iterable)
        t = strip(typed.type)
        element: Type
        if t == JSON or isinstance(t, NullType):
            element = JSON
        elif isinstance(t, ListType):
            element = t.items
        else:
            self.report.error(
                "E0414", f"`for` needs a list, found `{render(typed.type)}`", loop.iterable.span
            )
            element = JSON
        return ForEach(variable.name, typed.ir), element

    def _max_parallel(self, shape: StepShape) -> int | None:
        member = shape.get(ast.MaxParallel)
        if isinstance(member, ast.MaxParallel):
            return settings.max_parallel(member, self.report)
        return None

    def _common(self, shape: StepShape | CompensateShape) -> _Common:
        """`using`, timeouts and retry, shared by task steps and compensations."""
        found = _Common()
        using = shape.get(ast.Using)
        if isinstance(using, ast.Using):
            found.using = self._language(using)
        timeout = shape.get(ast.Timeout)
        if isinstance(timeout, ast.Timeout):
            found.timeout_ms = settings.timeout_ms(timeout.duration, self.report)
        queue = shape.get(ast.QueueTimeout)
        if isinstance(queue, ast.QueueTimeout):
            found.queue_timeout_ms = settings.timeout_ms(queue.duration, self.report)
        retry = shape.get(ast.Retry)
        if isinstance(retry, ast.Retry):
            found.retry = settings.retry(retry, self.report)
        return found

    def _language(self, using: ast.Using) -> str:
        language = using.language.name.lower()
        if language not in LANGUAGES:
            self.report.warning(
                "W0301",
                f"unknown worker language `{using.language.name}`",
                using.language.span,
                help=did_you_mean(language, LANGUAGES)
                or "known languages: " + ", ".join(LANGUAGES),
            )
        return language

    # ------------------------------------------------------------ actions

    def _action(self, shape: StepShape, env: Env) -> tuple[Step | None, Type]:
        action = shape.action
        name = shape.name
        if isinstance(action, ast.WorkerAction):
            return self._task_step(shape, action, env)
        if isinstance(action, ast.WorkflowAction):
            return self._child_step(shape, action, env)
        if isinstance(action, ast.SleepAction):
            return Step(name, "sleep", sleep_ms=action.duration.milliseconds), EMPTY_RECORD
        if isinstance(action, ast.AwaitAction):
            return self._await_step(shape, action)
        if isinstance(action, ast.ComputeAction):
            typed = ExprChecker(self.report, env).infer(action.expression)
            result = JSON if isinstance(typed.type, NullType) else typed.type
            return Step(name, "compute", compute=typed.ir), result
        return None, JSON

    def _task_step(
        self, shape: StepShape, action: ast.WorkerAction, env: Env
    ) -> tuple[Step | None, Type]:
        contract = self.contract(action.task)
        if contract is None:
            return None, JSON
        with_ir = self._with(
            shape, contract.ir.input, env, f"task `{contract.name}`", action.task.span
        )
        common = self._common(shape)
        step = Step(
            shape.name,
            "task",
            task=contract.name,
            with_=with_ir,
            using=common.using,
            timeout_ms=common.timeout_ms,
            queue_timeout_ms=common.queue_timeout_ms,
            retry=common.retry,
        )
        return step, contract.ir.output

    def contract(self, task: ast.StringLiteral) -> Contract | None:
        contract = self.c.contracts.get(task.value)
        if contract is None:
            self.report.error(
                "E0300",
                f"unknown worker task `{task.value}`",
                task.span,
                help=did_you_mean(task.value, self.c.contracts)
                or f'declare its contract: `task "{task.value}" {{ version "1.0.0" input {{ ... }} '
                "output { ... } }`",
            )
            return None
        self.tasks.setdefault(contract.name, contract)
        return contract

    def _child_step(
        self, shape: StepShape, action: ast.WorkflowAction, env: Env
    ) -> tuple[Step | None, Type]:
        name = action.workflow.value
        if name not in self.c.declarations.workflows:
            self.report.error(
                "E0312",
                f"unknown workflow `{name}`",
                action.workflow.span,
                help=did_you_mean(name, self.c.declarations.workflows),
            )
            return None, JSON
        child = self.c.checked.get(name)
        self.children.setdefault(name, None)
        child_input: Type = JSON if child is None else child.definition.input
        output: Type = JSON if child is None else child.definition.output
        with_ir = self._with(shape, child_input, env, f"workflow `{name}`", action.workflow.span)
        timeout = shape.get(ast.Timeout)
        timeout_ms = None
        if isinstance(timeout, ast.Timeout):
            timeout_ms = settings.timeout_ms(timeout.duration, self.report)
        step = Step(shape.name, "workflow", workflow=name, with_=with_ir, timeout_ms=timeout_ms)
        return step, output

    def _await_step(self, shape: StepShape, action: ast.AwaitAction) -> tuple[Step | None, Type]:
        signal = action.signal
        payload = self.signals.get(signal.name)
        if payload is None:
            self.report.error(
                "E0315",
                f"unknown signal `{signal.name}`",
                signal.span,
                help=did_you_mean(signal.name, self.signals)
                or f"declare it in the workflow: `signal {signal.name} {{ ... }}`",
            )
            return None, JSON
        timeout = shape.get(ast.Timeout)
        timeout_ms = None
        if isinstance(timeout, ast.Timeout):
            timeout_ms = settings.timeout_ms(timeout.duration, self.report)
        elif not self.workflow_timeout:
            self.report.warning(
                "W0606",
                f"step `{shape.name}` waits for signal `{signal.name}` with no timeout",
                signal.span,
                help="add `timeout 7d` to the step (or a workflow `timeout`) so the execution "
                "cannot wait forever",
            )
        return Step(shape.name, "await", signal=signal.name, timeout_ms=timeout_ms), payload

    def _with(
        self, shape: StepShape, expected: Type, env: Env, target: str, span: Span
    ) -> e.Expr | None:
        member = shape.get(ast.With)
        if isinstance(member, ast.With):
            return ExprChecker(self.report, env).check(member.expression, expected).ir
        if isinstance(expected, RecordType) and any(required(f) for f in expected.fields):
            self.report.error(
                "E0403",
                f"{target} requires input but the step has no `with`",
                span,
                notes=[f"required by `{render(expected)}`"],
                help="add `with { ... }` with the required fields",
            )
        return None

    def _compensation(self, shape: CompensateShape, env: Env) -> Compensation | None:
        assert shape.worker is not None
        contract = self.contract(shape.worker.task)
        if contract is None:
            return None
        with_ir = None
        member = shape.get(ast.With)
        expected = contract.ir.input
        if isinstance(member, ast.With):
            with_ir = ExprChecker(self.report, env).check(member.expression, expected).ir
        elif isinstance(expected, RecordType) and any(required(f) for f in expected.fields):
            self.report.error(
                "E0403",
                f"task `{contract.name}` requires input but the compensation has no `with`",
                shape.worker.task.span,
                notes=[f"required by `{render(expected)}`"],
                help="add `with { ... }` with the required fields",
            )
        key_ir = None
        key = shape.get(ast.IdempotencyKey)
        if isinstance(key, ast.IdempotencyKey):
            key_ir = ExprChecker(self.report, env).check(key.expression, STRING).ir
        common = self._common(shape)
        return Compensation(
            contract.name,
            with_ir,
            using=common.using,
            timeout_ms=common.timeout_ms,
            queue_timeout_ms=common.queue_timeout_ms,
            retry=common.retry,
            idempotency_key=key_ir,
        )


def _rejected_loop(shape: StepShape) -> str | None:
    for member in shape.step.members:
        if isinstance(member, ast.ForEach) and shape.get(ast.ForEach) is None:
            return member.variable.name
    return None


# A step whose type cannot be known (it is in a dependency cycle).
UNKNOWN = StepInfo(JSON, JSON, JSON, None)
