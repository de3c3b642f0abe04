"""Replays every history the book-timeline tests record through the decider,
as `orbit replay` does (and checks that `decide` is a pure function on the way): events the runtime learns from outside are applied as
recorded, and every other event must be one the decider returns at that
point (at the event's own timestamp). A divergence means a decision cannot
be reproduced from history."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import test_engine_timelines_flow as flow
import test_engine_timelines_tasks as tasks

from orbit_core import events as ev
from orbit_core.api import UnitStatus
from orbit_core.decide import Limits, decide
from orbit_core.engine import Engine
from orbit_core.plan import Plan
from orbit_core.state import ExecutionState, apply
from orbit_core.testing import simulated_engine

EXTERNAL = (
    ev.WorkflowCreated,
    ev.WorkflowStarted,
    ev.StepDispatched,
    ev.StepAttemptUncertain,
    ev.SignalReceived,
    ev.CancelRequested,
    ev.StaleResultIgnored,
)
# A worker's (or child's, or built-in task's) result: external while the unit waits for one.
RESULTS = (ev.StepSucceeded, ev.StepAttemptFailed)
AWAITING_RESULT = (
    UnitStatus.DISPATCHED,
    UnitStatus.SCHEDULED,
    UnitStatus.RETRY_WAIT,
    UnitStatus.UNCERTAIN,
)


def comparable(event: ev.Event) -> dict[str, Any]:
    data = ev.to_json(event)
    del data["seq"]
    return data


def replay(
    execution_id: str, events: list[ev.Event], plan: Plan, limits: Limits
) -> tuple[int, int, list[str]]:
    """(decided, external, divergences) for one run's history."""
    state = ExecutionState(execution_id)
    decided = external = 0
    problems: list[str] = []
    for event in events:
        unit = state.units.get(getattr(event, "step", ""))
        if isinstance(event, EXTERNAL) or (
            isinstance(event, RESULTS) and unit is not None and unit.status in AWAITING_RESULT
        ):
            external += 1
        else:
            decided += 1
            before = state.to_json()
            expected = [comparable(x) for x in decide(state, plan, event.timestamp_ms, limits)]
            again = [comparable(x) for x in decide(state, plan, event.timestamp_ms, limits)]
            assert again == expected, "decide gave two answers to one question"
            assert state.to_json() == before, "decide changed the state"
            if comparable(event) not in expected:
                problems.append(f"#{event.seq} {ev.to_json(event)} not in {expected}")
        apply(state, event)
    return decided, external, problems


def scenarios() -> list[Callable[..., None]]:
    found = []
    for module in (tasks, flow):
        for name, fn in sorted(vars(module).items()):
            if name.startswith("test_") and list(inspect.signature(fn).parameters) == ["engine"]:
                found.append(fn)
    return found


@pytest.mark.parametrize("scenario", [*scenarios(), flow.run_inbox], ids=lambda fn: fn.__name__)
def test_every_recorded_decision_is_reproduced(scenario: Callable[[Engine], None]) -> None:
    limits = Limits(max_history_events=12) if scenario is flow.run_inbox else None
    engine = simulated_engine(session_timeout_ms=5000, limits=limits)
    scenario(engine)
    rows = engine.list_executions(limit=1000)["executions"]
    assert rows
    for row in rows:
        eid = row["execution_id"]
        plan = Plan(engine.definition(row["workflow"], row["version"]))
        limits = engine.limits.effective(plan)
        runs = engine.history(eid).get("run") or 1
        for run in range(1, runs + 1):
            decided, external, problems = replay(eid, engine.events(eid, run), plan, limits)
            assert not problems, f"{eid} run {run}:\n" + "\n".join(problems)
            assert decided > 0 and external >= 2
    engine.close()
