"""What `orbit test` runs: the `test` declarations of a compilation as data.

`plan_tests(paths)` compiles the files (and what they import) exactly as
`orbit check` does; when that succeeds, every `test` declaration of the
compilation becomes a `TestCase`: its workflow, its input, signal payloads
and expected values evaluated to JSON, and its mocks as a chain of stages
whose `returns` expressions are IR expressions (they read the task's input
and the calling execution, so they are evaluated when a task is answered).
The checker has already type-checked all of it (chapter 51, E07xx), so
turning the tree into values here cannot fail on a program that compiled.

Running the cases is the CLI's job (`orbit_cli.simulator` drives the
engine); this module knows nothing of the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from orbit_core.evaluate import Scope, evaluate
from orbit_core.ir import Definition, TaskContract
from orbit_core.ir.expr import Expr
from orbit_core.ir.types import Type as IRType
from orbit_lang import ast
from orbit_lang.check.env import Env
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.report import Reporter
from orbit_lang.check.tests import partial
from orbit_lang.check.types import strip, to_ir
from orbit_lang.compiler import CompileResult, compile_program
from orbit_lang.loader import Program, load_program
from orbit_lang.source import Span

_CONSTANT = Env(constant="a test value")


@attrs.frozen
class Returns:
    """The attempt succeeds with the value of `expr` (which may read `input`
    and `execution`)."""

    expr: Expr


@attrs.frozen
class Fails:
    code: str
    message: str | None
    retryable: bool


@attrs.frozen
class Hangs:
    pass


Behaviour = Returns | Fails | Hangs


@attrs.frozen
class Stage:
    behaviour: Behaviour
    # How many calls this stage answers; None for the last stage (all the rest).
    times: int | None


@attrs.frozen
class Mock:
    task: str
    stages: tuple[Stage, ...]

    def behaviour(self, call: int) -> Behaviour:
        """The behaviour for the `call`-th call (1-based) of one unit."""
        seen = 0
        for stage in self.stages:
            if stage.times is None:
                return stage.behaviour
            seen += stage.times
            if call <= seen:
                return stage.behaviour
        return self.stages[-1].behaviour


@attrs.frozen
class SignalSend:
    name: str
    payload: Any


@attrs.frozen
class Expectation:
    """One `expect`: `kind` is status, output, error, step_status,
    step_output, step_attempts, compensated or runs; `step` names the step
    (`charge`, `on_failure:summary`) for the step kinds; `value` is the
    status, expected value, error code or count."""

    kind: str
    value: Any
    span: Span
    step: str | None = None


@attrs.frozen
class TestCase:
    # Not a pytest test class, despite the name.
    __test__ = False

    name: str
    file: str
    line: int
    workflow: str
    version: str
    input: Any
    mocks: dict[str, Mock]
    signals: tuple[SignalSend, ...]
    expectations: tuple[Expectation, ...]


@attrs.frozen
class Invariant:
    """One `invariant` of a verify block: `expectation` must hold at the end
    of an execution in which every one of `conditions` holds."""

    expectation: Expectation
    conditions: tuple[Expectation, ...]
    span: Span
    # The invariant as written, for reports.
    text: str


@attrs.frozen
class VerifyCase:
    """One `verify` block; `input` is None when `orbit verify` generates it."""

    name: str
    file: str
    line: int
    workflow: str
    version: str
    input: Any
    invariants: tuple[Invariant, ...]


@attrs.frozen
class TestPlan:
    __test__ = False

    compiled: CompileResult
    # Every test of the compilation, in load order (empty when it failed).
    tests: tuple[TestCase, ...]
    # Every verify block of the compilation, in load order.
    verifies: tuple[VerifyCase, ...] = ()

    @property
    def definitions(self) -> list[Definition]:
        """Every workflow of the compilation, children first."""
        return self.compiled.definitions


def plan_tests(paths: Sequence[str | Path]) -> TestPlan:
    program, parsed = load_program(paths)
    compiled = compile_program(program, parsed)
    if not compiled.ok:
        return TestPlan(compiled, ())
    definitions = {d.name: d for d in compiled.definitions}
    step_types = {w.definition.name: w.step_types for w in compiled.workflows}
    tests = []
    verifies = []
    for declaration in program.declarations():
        if isinstance(declaration, ast.Test):
            tests.append(_Planner(declaration, definitions, step_types).plan())
        elif isinstance(declaration, ast.Verify):
            verifies.append(_Planner(declaration, definitions, step_types).plan_verify(program))
    return TestPlan(compiled, tuple(tests), tuple(verifies))


class _Planner:
    def __init__(
        self,
        test: ast.Test | ast.Verify,
        definitions: dict[str, Definition],
        step_types: dict[str, Any],
    ) -> None:
        self.test = test
        self.definitions = definitions
        self.step_types = step_types
        self.report = Reporter()

    def plan_verify(self, program: Program) -> VerifyCase:
        block = self.test
        workflow = next(m for m in block.members if isinstance(m, ast.TestWorkflow))
        definition = self.definitions[workflow.workflow.name]
        value: Any = None
        invariants: list[Invariant] = []
        source = program.sources.get(block.span.file)
        text = source.text if source is not None else ""
        for member in block.members:
            if isinstance(member, ast.TestInput):
                value = self._constant(member.expression, definition.input)
            elif isinstance(member, ast.Invariant):
                invariants.append(
                    Invariant(
                        self._expectation(member.expectation, member.span, definition),
                        tuple(self._expectation(c, c.span, definition) for c in member.conditions),
                        member.span,
                        " ".join(text[member.span.start : member.span.end].split()),
                    )
                )
        return VerifyCase(
            block.name.value,
            block.span.file,
            block.span.line,
            definition.name,
            definition.version,
            value,
            tuple(invariants),
        )

    def plan(self) -> TestCase:
        test = self.test
        workflow = next(m for m in test.members if isinstance(m, ast.TestWorkflow))
        definition = self.definitions[workflow.workflow.name]
        contracts = _contracts(definition, self.definitions)
        value: Any = {}
        mocks: dict[str, Mock] = {}
        signals: list[SignalSend] = []
        expectations: list[Expectation] = []
        for member in test.members:
            if isinstance(member, ast.TestInput):
                value = self._constant(member.expression, definition.input)
            elif isinstance(member, ast.Mock):
                mocks[member.task.value] = self._mock(member, contracts[member.task.value])
            elif isinstance(member, ast.TestSignal):
                signals.append(self._signal(member, definition))
            elif isinstance(member, ast.Expect):
                expectations.append(self._expect(member, definition))
        return TestCase(
            test.name.value,
            test.span.file,
            test.span.line,
            definition.name,
            definition.version,
            value,
            mocks,
            tuple(signals),
            tuple(expectations),
        )

    def _constant(self, node: ast.Expr, expected: IRType) -> Any:
        typed = ExprChecker(self.report, _CONSTANT).check(node, expected)
        return evaluate(typed.ir, Scope())

    def _mock(self, mock: ast.Mock, contract: TaskContract) -> Mock:
        stages = []
        for stage in mock.stages:
            behaviour: Behaviour
            b = stage.behaviour
            if isinstance(b, ast.MockReturns):
                env = Env(input=contract.input, constant="a mock result")
                typed = ExprChecker(self.report, env).check(b.expression, contract.output)
                behaviour = Returns(typed.ir)
            elif isinstance(b, ast.MockFails):
                message = b.message.value if b.message is not None else None
                behaviour = Fails(b.code.value, message, b.retryable)
            else:
                behaviour = Hangs()
            stages.append(Stage(behaviour, None if stage.times is None else stage.times.value))
        return Mock(mock.task.value, tuple(stages))

    def _signal(self, member: ast.TestSignal, definition: Definition) -> SignalSend:
        name = member.name.name
        signal = next(s for s in definition.signals if s.name == name)
        payload = {} if member.payload is None else self._constant(member.payload, signal.payload)
        return SignalSend(name, payload)

    def _expect(self, member: ast.Expect, definition: Definition) -> Expectation:
        return self._expectation(member.expectation, member.span, definition)

    def _expectation(self, e: ast.Expectation, span: Span, definition: Definition) -> Expectation:
        if isinstance(e, ast.ExpectStatus):
            return Expectation("status", e.status.name, span)
        if isinstance(e, ast.ExpectOutput):
            value = self._constant(e.expression, partial(definition.output))
            return Expectation("output", value, span)
        if isinstance(e, ast.ExpectError):
            return Expectation("error", e.code.value, span)
        if isinstance(e, ast.ExpectStepStatus):
            return Expectation("step_status", e.status.name, span, e.step.text)
        if isinstance(e, ast.ExpectStepOutput):
            step_type = self.step_types[definition.name][e.step.text]
            value = self._constant(e.expression, partial(to_ir(strip(step_type))))
            return Expectation("step_output", value, span, e.step.text)
        if isinstance(e, ast.ExpectStepAttempts):
            return Expectation("step_attempts", e.count.value, span, e.step.text)
        if isinstance(e, ast.ExpectCompensated):
            return Expectation("compensated", None, span, e.step.name)
        return Expectation("runs", e.count.value, span)


def _contracts(
    definition: Definition, definitions: dict[str, Definition]
) -> dict[str, TaskContract]:
    """Every task contract `definition` and its children can call."""
    found: dict[str, TaskContract] = {}
    seen: set[str] = set()
    pending = [definition]
    while pending:
        current = pending.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        for name, contract in current.contracts.items():
            if isinstance(contract, TaskContract):
                found.setdefault(name, contract)
            elif contract.name in definitions:
                pending.append(definitions[contract.name])
    return found
