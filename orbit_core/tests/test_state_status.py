"""`ExecutionState.terminal` is a field kept with the status, not computed on
each read: it must agree with the status after every event."""

from __future__ import annotations

import pytest

from orbit_core import events as ev
from orbit_core.api import EXEC_COMPLETED, EXEC_RUNNING
from orbit_core.state import TERMINAL, ExecutionState, fold

_START = [
    ev.WorkflowCreated(1, 1_000, "Demo", "1.0.0", "sha256:x", {}),
    ev.WorkflowStarted(2, 1_000),
]
COMPLETED = [*_START, ev.WorkflowCompleted(3, 1_001, {})]
COMPENSATED = [
    *_START,
    ev.CompensationStarted(3, 1_001, "step failed", ["a"]),
    ev.CompensationCompleted(4, 1_002),
    ev.WorkflowFailed(5, 1_003, ev.make_error("BOOM", "boom", False), "completed"),
]
CANCELLED = [*_START, ev.CancelRequested(3, 1_001, "no"), ev.WorkflowCancelled(4, 1_002, "none")]


@pytest.mark.parametrize("history", [COMPLETED, COMPENSATED, CANCELLED], ids=lambda h: h[-1].TYPE)
def test_terminal_agrees_with_the_status_after_every_event(history: list[ev.Event]) -> None:
    seen = []
    for length in range(1, len(history) + 1):
        state = fold(history[:length], "x")
        assert state.terminal == (state.status in TERMINAL)
        seen.append(state.terminal)
    assert seen == [False] * (len(history) - 1) + [True]


def test_a_state_made_with_a_status_knows_whether_it_is_terminal() -> None:
    assert ExecutionState("x", status=EXEC_COMPLETED).terminal
    state = ExecutionState("y")
    assert not state.terminal and state.status == EXEC_RUNNING
    state.set_status(EXEC_COMPLETED)
    assert state.terminal
