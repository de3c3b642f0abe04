"""Running one `test` declaration and judging it (chapter 51).

`run_test(case, definitions)` plays the test's execution on the simulator
(orbit_cli.simulator) with its mocks as the workers and its signals sent as
the execution waits for them, then checks every expectation against the
finished execution. A run that cannot finish (an unmocked task, nothing
left to do) fails with that reason alone: expectations about an execution
that never ended would only repeat it.

Expected values match partially (RULINGS §8): an object matches when each
field it lists matches (a `null` field also matches a missing one), a list
when it has as many elements and each matches, and other values when equal
(numbers by value, never a boolean for a number).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from orbit_cli import simulator
from orbit_cli.simulator import Call, Fail, Hang, Outcome, Succeed, Unanswered
from orbit_core.evaluate import EvalError, Scope, evaluate
from orbit_lang.testplan import Expectation, Fails, Hangs, Returns, TestCase


@attrs.frozen
class TestResult:
    __test__ = False

    case: TestCase
    failures: tuple[str, ...]
    outcome: Outcome

    @property
    def passed(self) -> bool:
        return not self.failures


def run_test(case: TestCase, deployment: simulator.Deployment) -> TestResult:
    run = simulator.Simulation(deployment, _Mocks(case).answer)
    signals = [simulator.SignalSend(s.name, s.payload) for s in case.signals]
    outcome = run.run(case.workflow, case.version, case.input, signals)
    if outcome.problems:
        return TestResult(case, outcome.problems, outcome)
    failures = [_check(e, outcome) for e in case.expectations]
    failures += [
        f"signal `{name}` was never sent: the execution finished without waiting for it"
        for name in outcome.unsent_signals
    ]
    return TestResult(case, tuple(f for f in failures if f is not None), outcome)


class _Mocks:
    def __init__(self, case: TestCase) -> None:
        self.mocks = case.mocks

    def answer(self, call: Call) -> simulator.Answer:
        mock = self.mocks.get(call.task)
        if mock is None:
            where = f" (step `{call.step}`)" if call.step else ""
            return Unanswered(
                f"task `{call.task}`{where} is not mocked; "
                f'add `mock "{call.task}" returns {{ ... }}` to the test'
            )
        behaviour = mock.behaviour(call.call)
        if isinstance(behaviour, Returns):
            scope = Scope(
                input=call.input,
                execution={
                    "id": call.execution_id,
                    "workflow": call.workflow,
                    "version": call.version,
                },
            )
            try:
                return Succeed(evaluate(behaviour.expr, scope))
            except EvalError as error:
                return Unanswered(f"the mock of `{call.task}` cannot be evaluated: {error}")
        if isinstance(behaviour, Fails):
            message = behaviour.message
            if message is None:
                message = f"mocked failure of `{call.task}`"
            return Fail(behaviour.code, message, behaviour.retryable)
        assert isinstance(behaviour, Hangs)
        return Hang()


# ---- expectations


def ended(state: Mapping[str, Any]) -> str:
    """How the execution ended: `COMPLETED`, or `FAILED (CODE: message)`."""
    status = str(state.get("status"))
    error = state.get("error")
    if isinstance(error, dict):
        return f"{status} ({error.get('code')}: {error.get('message')})"
    return status


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        return all(
            (actual.get(k) is None) if v is None else (k in actual and matches(v, actual[k]))
            for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return bool(expected == actual)


def _check(e: Expectation, outcome: Outcome) -> str | None:
    return check_expectation(e, outcome.main.state)


def check_expectation(e: Expectation, state: Mapping[str, Any]) -> str | None:
    """None when `e` holds of the finished execution `state` (its state
    document), else what went wrong."""
    status = state.get("status")
    if e.kind == "status":
        return None if status == e.value else f"expected status {e.value}, got {ended(state)}"
    if e.kind == "output":
        if "output" not in state or status != "COMPLETED":
            return (
                f"expected output {compact(e.value)}, but the workflow produced none "
                f"(it ended {ended(state)})"
            )
        if matches(e.value, state["output"]):
            return None
        return f"expected output {compact(e.value)}, got {compact(state['output'])}"
    if e.kind == "error":
        error = state.get("error")
        if isinstance(error, dict) and error.get("code") == e.value:
            return None
        return f"expected error {e.value}, got {ended(state)}"
    if e.kind == "runs":
        run = state.get("run", 1)
        return None if run == e.value else f"expected runs {e.value}, got {run}"
    if e.kind == "compensated":
        return _compensated(str(e.step), state)
    return _step(e, state)


def _step(e: Expectation, state: Mapping[str, Any]) -> str | None:
    step = str(e.step)
    unit = state.get("units", {}).get(step, {})
    status = unit.get("status", "PENDING")
    if e.kind == "step_status":
        if status == e.value:
            return None
        error = unit.get("error")
        detail = f" ({error.get('code')}: {error.get('message')})" if error else ""
        return f"expected step `{step}` {e.value}, got {status}{detail}"
    if e.kind == "step_output":
        if "output" not in unit:
            return (
                f"expected step `{step}` output {compact(e.value)}, but the step produced "
                f"none (it ended {status})"
            )
        if matches(e.value, unit["output"]):
            return None
        return f"expected step `{step}` output {compact(e.value)}, got {compact(unit['output'])}"
    attempt = unit.get("attempt", 0)
    if attempt == e.value:
        return None
    return f"expected step `{step}` attempts {e.value}, got {attempt}"


def _compensated(step: str, state: Mapping[str, Any]) -> str | None:
    units: dict[str, Any] = state.get("units", {})
    elements = [k for k in units if k.startswith(step + "[")]
    if elements:
        needed = [f"compensate:{k}" for k in elements if units[k].get("status") == "SUCCEEDED"]
    else:
        needed = [f"compensate:{step}"]
    for key in needed:
        status = units.get(key, {}).get("status")
        if status is None:
            return f"expected step `{step}` to be compensated, but its compensation never ran"
        if status != "SUCCEEDED":
            return f"expected step `{step}` to be compensated, but its compensation ended {status}"
    if not needed:
        return f"expected step `{step}` to be compensated, but no element of it succeeded"
    return None


# ---- reports


def simulated(ms: int) -> str:
    """Simulated time as the test report shows it: `0ms`, `3.0s`, `2m 37s`,
    `5h 12m`, `2d 0h`."""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    seconds = ms // 1000
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60}s"
    if seconds < 86_400:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    return f"{seconds // 86_400}d {seconds % 86_400 // 3600}h"


def execution_json(outcome: Outcome) -> dict[str, Any]:
    state = outcome.main.state
    error = state.get("error")
    return {
        "status": state.get("status"),
        "output": state.get("output"),
        "error": None
        if not isinstance(error, dict)
        else {k: error[k] for k in ("code", "message", "retryable") if k in error},
        "simulated_ms": outcome.simulated_ms,
    }
