"""The static envelope (orbit_core.envelope) against real histories: every
workflow of tests/data/envelope_shapes.orbit runs through the simulation
(`orbit simulate`'s engine, simulated time) with seeded random worker
answers, and no run records more events than the worst case, nor more task
dispatches; on the happy path the typical count is exactly what is
recorded."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from orbit_cli.simulator import (
    Answer,
    Call,
    Deployment,
    Execution,
    Fail,
    Hang,
    Outcome,
    SignalSend,
    Simulation,
    Succeed,
)
from orbit_core.envelope import REDELIVERY_EVENTS, Envelope, envelope
from orbit_core.ir import Definition
from orbit_lang.compiler import compile_paths

SHAPES = Path(__file__).parent / "data" / "envelope_shapes.orbit"
OUTPUTS: dict[str, Any] = {"t.work": {"ok": True}, "t.undo": {}, "t.note": {}}
# Tasks whose steps all have a timeout, so that an answer may never come.
MAY_HANG = {"t.work"}


@pytest.fixture(scope="module")
def compiled() -> tuple[list[Definition], Deployment]:
    definitions = compile_paths([SHAPES]).raise_on_errors()
    return definitions, Deployment(definitions)


class _Runs(Simulation):
    """Keeps every run's history (continue-as-new archives the earlier ones)."""

    runs: list[list[dict[str, Any]]]

    def _outcome(self, start: int, pending: Any) -> Outcome:
        state = self.engine.get(self.execution_id)
        last = state.get("run") or 1
        self.runs = [
            self.engine.history(self.execution_id, run=r)["events"] for r in range(1, last + 1)
        ]
        return super()._outcome(start, pending)


def _random(seed: int, steps_with_timeouts: set[str]) -> Any:
    rng = random.Random(seed)

    def respond(call: Call) -> Answer:
        roll = rng.random()
        step = (call.step or "").split("[")[0]
        if roll < 0.15:
            return Fail("BOOM", "transient", True)
        if roll < 0.22:
            return Fail("NOPE", "permanent", False)
        if roll < 0.3 and call.task in MAY_HANG and step in steps_with_timeouts:
            return Hang()
        return Succeed(OUTPUTS[call.task])

    return respond


def _env_events(history: list[dict[str, Any]]) -> int:
    """Events the environment causes, outside the envelope."""
    stale = sum(1 for e in history if e["type"] == "StaleResultIgnored")
    redelivered = sum(1 for e in history if e["type"] == "StepScheduled" and e["redelivery"])
    return stale + REDELIVERY_EVENTS * redelivered


def _check(env: Envelope, history: list[dict[str, Any]], extra_signals: int = 0) -> None:
    worst = env.cost.worst_events
    assert worst is not None
    assert len(history) - _env_events(history) <= worst + extra_signals
    dispatched = sum(
        1
        for e in history
        if e["type"] == "StepDispatched" and not e["worker_session"].startswith("child:")
    )
    assert env.cost.worst_dispatches is not None
    assert dispatched <= env.cost.worst_dispatches


def _run(
    deployment: Deployment, workflow: str, input: Any, respond: Any, signals: int = 1
) -> tuple[Outcome, list[list[dict[str, Any]]]]:
    sim = _Runs(deployment, respond)
    outcome = sim.run(workflow, None, input, [SignalSend("poke", {"n": 1})] * signals)
    return outcome, sim.runs


def _children(outcome: Outcome) -> list[Execution]:
    return list(outcome.children)


@pytest.mark.parametrize("seed", range(60))
def test_recorded_events_never_exceed_the_worst_case(
    compiled: tuple[list[Definition], Deployment], seed: int
) -> None:
    definitions, deployment = compiled
    by_name = {d.name: d for d in definitions}
    envelopes = {name: envelope(d) for name, d in by_name.items()}
    rng = random.Random(seed)
    items = [rng.randrange(100) for _ in range(rng.randrange(6))]  # max_fan_out is 5
    timed = {"first", "each"}
    outcome, runs = _run(
        deployment,
        "Shapes",
        {"items": items, "go": rng.random() < 0.5},
        _random(seed, timed),
        signals=rng.randrange(3),
    )
    assert outcome.finished, outcome.problems
    # A signal the `wait` step never took (it failed first, or a second one)
    # costs one SignalReceived each: `per_signal`.
    assert dict(envelopes["Shapes"].per_signal) == {"poke": 1}
    received = sum(1 for e in runs[-1] if e["type"] == "SignalReceived")
    taken = sum(1 for e in runs[-1] if e["type"] == "SignalDelivered")
    _check(envelopes["Shapes"], runs[-1], extra_signals=received - taken)
    for child in _children(outcome):
        _check(envelopes["Child"], child.history)
    loop, loop_runs = _run(deployment, "Loop", {}, _random(seed, set()), signals=0)
    assert loop.finished
    for history in loop_runs:
        _check(envelopes["Loop"], history)


def test_the_typical_path_is_what_the_happy_path_records(
    compiled: tuple[list[Definition], Deployment],
) -> None:
    definitions, deployment = compiled
    by_name = {d.name: d for d in definitions}

    def happy(call: Call) -> Answer:
        return Succeed(OUTPUTS[call.task])

    for n in (0, 1, 5):
        env = envelope(by_name["Shapes"], items=n)
        outcome, runs = _run(deployment, "Shapes", {"items": list(range(n)), "go": True}, happy)
        assert outcome.status == "COMPLETED"
        assert len(runs[-1]) == env.cost.events
        dispatched = sum(1 for e in runs[-1] if e["type"] == "StepDispatched")
        assert env.cost.dispatches == dispatched - 1  # the child is not a worker task
        child = envelope(by_name["Child"])
        assert [len(c.history) for c in outcome.children] == [child.cost.events]
    loop, loop_runs = _run(deployment, "Loop", {}, happy, signals=0)
    assert loop.status == "COMPLETED"
    assert [len(h) for h in loop_runs] == [envelope(by_name["Loop"]).cost.events] * 3


def test_the_worst_case_is_reached_when_every_attempt_fails(
    compiled: tuple[list[Definition], Deployment],
) -> None:
    """A single task step whose every attempt fails records exactly its
    worst case, less the events of constructs it does not have."""
    definitions, deployment = compiled
    child = next(d for d in definitions if d.name == "Child")

    def failing(call: Call) -> Answer:
        return Fail("BOOM", "transient", True)

    outcome, runs = _run(deployment, "Child", {"n": 1}, failing, signals=0)
    assert outcome.status == "FAILED"
    # The abort's cause event is the step's own StepFailed: one less.
    worst = envelope(child).cost.worst_events
    assert worst is not None
    assert len(runs[-1]) == worst - 1
