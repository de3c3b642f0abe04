"""Test declarations (chapter 51): type-checked with the program, never lowered.

A test names a workflow (E0701, E0700) and maybe its version (E0702); its
input, signal payloads and expected outputs are constants checked like the
values they stand for (expectations partially: every field optional) and
evaluated (E0710); mocks name tasks the workflow can call (E0703) once each
(E0704) with results of the contract's output type; expectations name real
steps (E0706) and statuses (E0707). A test without `expect` is W0701.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from orbit_core.evaluate import EvalError, Scope, evaluate
from orbit_core.ir.types import Field, ListType, MapType, OptionalType, RecordType
from orbit_core.ir.types import Type as IRType
from orbit_lang import ast
from orbit_lang.check.context import CheckedWorkflow, Compilation
from orbit_lang.check.env import Env
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.report import Reporter, did_you_mean, duplicate_member, first_declared
from orbit_lang.check.types import Type, required, strip, to_ir
from orbit_lang.source import Span

WORKFLOW_STATUSES = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")
UNIT_STATUSES = (
    "PENDING",
    "RUNNING",
    "SCHEDULED",
    "DISPATCHED",
    "ATTEMPT_FAILED",
    "UNCERTAIN",
    "RETRY_WAIT",
    "WAITING",
    "SUCCEEDED",
    "SKIPPED",
    "FAILED",
    "CANCELLED",
)
# Recorded only between commits, so a finished execution never shows them
# (RULINGS §8).
NEVER_OBSERVED = ("ATTEMPT_FAILED", "UNCERTAIN")
TEST_VALUE = Env(constant="a test value")
SINGLE: dict[type, str] = {
    ast.TestWorkflow: "workflow",
    ast.Version: "version",
    ast.TestInput: "input",
}


def check_test(c: Compilation, test: ast.Test) -> None:
    """Checks one test, reporting into `c.report` (not whether its name is taken)."""
    _TestChecker(c, test).run()


def check_tests(
    c: Compilation, check: Callable[[Compilation, ast.Test], None] = check_test
) -> None:
    """Checks every test; `check` stands in for `check_test` (see `check_program`)."""
    seen: dict[str, ast.Test] = {}
    for test in c.declarations.tests:
        name = test.name.value
        if name in seen:
            c.report.error(
                "E0709",
                f"test `{name}` is declared more than once",
                test.name.span,
                labels=[first_declared(seen[name].name.span)],
                help="give each test its own name",
            )
        else:
            seen[name] = test
        check(c, test)


def partial(t: IRType) -> IRType:
    """`t` with every record field optional, at any depth: what an expected
    output may leave out."""
    if isinstance(t, RecordType):
        return RecordType(
            tuple(Field(f.name, _optional(partial(f.type))) for f in t.fields), t.name
        )
    if isinstance(t, ListType):
        return ListType(partial(t.items))
    if isinstance(t, MapType):
        return MapType(partial(t.values))
    if isinstance(t, OptionalType):
        return OptionalType(partial(t.type))
    return t


def _optional(t: IRType) -> IRType:
    return t if isinstance(t, OptionalType) else OptionalType(t)


class _TestChecker:
    def __init__(self, c: Compilation, test: ast.Test) -> None:
        self.c = c
        self.test = test
        self.report: Reporter = c.report

    def run(self) -> None:
        members: dict[type, ast.TestMember] = {}
        for member in self.test.members:
            kind = type(member)
            if kind in SINGLE:
                first = members.get(kind)
                if first is not None:
                    duplicate_member(self.report, SINGLE[kind], member.keyword, first.keyword)
                    continue
                members[kind] = member
        workflow = self._workflow(members)
        expectations = [m for m in self.test.members if isinstance(m, ast.Expect)]
        if not expectations:
            self.report.warning(
                "W0701",
                f"test `{self.test.name.value}` checks nothing",
                self.test.name.span,
                help="add an expectation such as `expect status COMPLETED`",
            )
        if workflow is None:
            return
        self._input(members.get(ast.TestInput), workflow)
        mocked: dict[str, ast.Mock] = {}
        for member in self.test.members:
            if isinstance(member, ast.Mock):
                self._mock(member, workflow, mocked)
            elif isinstance(member, ast.TestSignal):
                self._signal(member, workflow)
            elif isinstance(member, ast.Expect):
                self._expect(member.expectation, workflow)

    # ------------------------------------------------------------ the workflow

    def _workflow(self, members: dict[type, ast.TestMember]) -> CheckedWorkflow | None:
        member = members.get(ast.TestWorkflow)
        if not isinstance(member, ast.TestWorkflow):
            self.report.error(
                "E0701",
                f"test `{self.test.name.value}` does not name a workflow",
                self.test.name.span,
                help="add `workflow <Name>` to the test",
            )
            return None
        name = member.workflow.name
        workflow = self.c.checked.get(name)
        if workflow is None:
            self.report.error(
                "E0700",
                f"unknown workflow `{name}`",
                member.workflow.span,
                help=did_you_mean(name, self.c.checked)
                or 'import the file that defines it, e.g. `import "orders.orbit"`',
            )
            return None
        version = members.get(ast.Version)
        defined = workflow.definition.version
        if isinstance(version, ast.Version) and version.value.value != defined:
            self.report.error(
                "E0702",
                f"test expects `{name}` version {version.value.value}, but the sources define "
                f"version {defined}",
                version.value.span,
                help="update the version, or remove it to test whatever version is compiled",
            )
        return workflow

    def _constant(self, node: ast.Expr, expected: Type, what: str) -> None:
        checker = ExprChecker(self.report, TEST_VALUE)
        typed = checker.check(node, expected)
        if checker.errors:
            return
        try:
            evaluate(typed.ir, Scope())
        except EvalError as error:
            self.report.error("E0710", f"cannot evaluate {what}: {error}", node.span)

    def _input(self, member: ast.TestMember | None, workflow: CheckedWorkflow) -> None:
        expected = workflow.definition.input
        if isinstance(member, ast.TestInput):
            self._constant(member.expression, expected, "a test input")
            return
        missing = [f for f in expected.fields if required(f)]
        if missing:
            listed = ", ".join(f"`{f.name}`" for f in missing)
            self.report.error(
                "E0403",
                f"workflow `{workflow.definition.name}` requires input but the test has no `input`",
                self.test.name.span,
                notes=[f"required fields: {listed}"],
                help="add `input { ... }` to the test",
            )

    # ------------------------------------------------------------ mocks and signals

    def _mock(self, mock: ast.Mock, workflow: CheckedWorkflow, mocked: dict[str, ast.Mock]) -> None:
        task = mock.task.value
        callable_tasks = sorted(set(self._tasks(workflow, set())))
        if task not in callable_tasks:
            suggestion = did_you_mean(task, callable_tasks)
            listed = ", ".join(f"`{t}`" for t in callable_tasks) or "none"
            self.report.error(
                "E0703",
                f"`{workflow.definition.name}` does not call task `{task}`",
                mock.task.span,
                help=suggestion,
                notes=[] if suggestion else [f"the tasks it can call: {listed}"],
            )
        elif task in mocked:
            self.report.error(
                "E0704",
                f"task `{task}` is mocked more than once",
                mock.task.span,
                labels=[first_declared(mocked[task].task.span)],
                help='chain behaviours instead: `fails "X" times 1 then returns { ... }`',
            )
        else:
            mocked[task] = mock
        contract = self.c.contracts.get(task)
        for stage in mock.stages:
            if stage.times is not None and stage.times.value < 1:
                self.report.error(
                    "E0711", f"`times {stage.times.value}` must be at least 1", stage.times.span
                )
            behaviour = stage.behaviour
            if isinstance(behaviour, ast.MockReturns) and contract is not None:
                env = Env(input=contract.ir.input, constant="a mock result")
                ExprChecker(self.report, env).check(behaviour.expression, contract.ir.output)

    def _tasks(self, workflow: CheckedWorkflow, seen: set[str]) -> Iterator[str]:
        """Every task `workflow` can call, in its steps, compensations,
        handlers and child workflows."""
        seen.add(workflow.definition.name)
        yield from (
            name for name in workflow.definition.contracts if not name.startswith("workflow:")
        )
        for child in workflow.children:
            checked = self.c.checked.get(child)
            if checked is not None and child not in seen:
                yield from self._tasks(checked, seen)

    def _signal(self, member: ast.TestSignal, workflow: CheckedWorkflow) -> None:
        name = member.name.name
        signal = workflow.definition.signal(name)
        if signal is None:
            self.report.error(
                "E0705",
                f"`{workflow.definition.name}` declares no signal `{name}`",
                member.name.span,
                help=did_you_mean(name, [s.name for s in workflow.definition.signals]),
            )
            return
        if member.payload is not None:
            self._constant(member.payload, signal.payload, "a test signal")

    # ------------------------------------------------------------ expectations

    def _expect(self, expectation: ast.Expectation, workflow: CheckedWorkflow) -> None:
        name = workflow.definition.name
        if isinstance(expectation, ast.ExpectStatus):
            self._status(expectation.status, WORKFLOW_STATUSES, "a workflow status")
        elif isinstance(expectation, ast.ExpectOutput):
            self._constant(
                expectation.expression, partial(workflow.definition.output), "a test expectation"
            )
        elif isinstance(expectation, ast.ExpectStepStatus):
            if self._step(expectation.step.text, expectation.step.span, workflow) is not None:
                self._status(expectation.status, UNIT_STATUSES, "a unit status")
        elif isinstance(expectation, ast.ExpectStepOutput):
            t = self._step(expectation.step.text, expectation.step.span, workflow)
            if t is not None:
                expected = partial(to_ir(strip(t)))
                self._constant(expectation.expression, expected, "a test expectation")
        elif isinstance(expectation, ast.ExpectStepAttempts):
            self._step(expectation.step.text, expectation.step.span, workflow)
            count = expectation.count
            if count.value < 0:
                self.report.error(
                    "E0711", f"`attempts {count.value}` must be at least 0", count.span
                )
        elif isinstance(expectation, ast.ExpectCompensated):
            step = expectation.step
            if self._step(step.name, step.span, workflow) is not None and not _has_compensation(
                workflow.node, step.name
            ):
                self.report.error(
                    "E0708",
                    f"step `{step.name}` has no `compensate` block",
                    step.span,
                    help="expect the step's status instead, e.g. `expect step "
                    f"{step.name} SUCCEEDED`",
                )
        elif isinstance(expectation, ast.ExpectRuns):
            self._runs(expectation.count, workflow, name)

    def _status(self, status: ast.Identifier, allowed: tuple[str, ...], what: str) -> None:
        text = status.name
        if text in allowed:
            if text in NEVER_OBSERVED:
                self.report.warning(
                    "W0701",
                    f"`{text}` is never the final status of a step, so this expectation never holds",
                    status.span,
                    help="expect `SUCCEEDED`, `FAILED` or the step's `attempts` instead",
                )
            return
        if text.upper() in allowed:
            help_text = f"statuses are upper case: `{text.upper()}`"
        else:
            help_text = did_you_mean(text, allowed) or "expected one of " + ", ".join(
                f"`{s}`" for s in allowed
            )
        self.report.error("E0707", f"`{text}` is not {what}", status.span, help=help_text)

    def _step(self, name: str, span: Span, workflow: CheckedWorkflow) -> Type | None:
        known = workflow.step_types
        found = known.get(name)
        if found is not None:
            return found
        suggestion = did_you_mean(name, known)
        self.report.error(
            "E0706",
            f"`{workflow.definition.name}` has no step `{name}`",
            span,
            help=suggestion,
            notes=[]
            if suggestion
            else ["its steps: " + (", ".join(f"`{s}`" for s in known) or "none")],
        )
        return None

    def _runs(self, count: ast.IntLiteral, workflow: CheckedWorkflow, name: str) -> None:
        if count.value < 1:
            self.report.error(
                "E0712",
                f"`runs {count.value}` is not a valid number of runs",
                count.span,
                notes=["an execution has at least one run"],
            )
        elif count.value > 1 and workflow.definition.continue_as_new is None:
            if any(isinstance(m, ast.ContinueAsNew) for m in workflow.node.members):
                return  # an invalid `continue_as_new`, reported with the workflow
            self.report.error(
                "E0713",
                f"workflow `{name}` has no `continue_as_new`, so it always ends in run 1",
                count.span,
                help="expect `runs 1`, or add `continue_as_new` to the workflow",
            )


def _has_compensation(workflow: ast.Workflow, step_name: str) -> bool:
    for step in workflow.steps:
        if step.name.name == step_name:
            return any(isinstance(m, ast.Compensate) for m in step.members)
    return False
