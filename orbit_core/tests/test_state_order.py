"""The execution state lists units in the order the history last changed them."""

from __future__ import annotations

from orbit_core import events as ev
from orbit_core.state import fold


def _history() -> list[ev.Event]:
    # Everything after #2 commits at the same millisecond, as the steps of one
    # decision do, so timestamps cannot order the units; only seqs can.
    t = 1_000
    return [
        ev.WorkflowCreated(1, t, "Demo", "1.0.0", "sha256:x", {}),
        ev.WorkflowStarted(2, t),
        ev.StepScheduled(3, t, "b", 1, {}, "k-b", False),
        ev.StepScheduled(4, t, "a", 1, {}, "k-a", False),
        ev.StepScheduled(5, t, "c", 1, {}, "k-c", False),
        ev.StepDispatched(6, t, "a", 1, "tok-a", "w", "s", None),
        ev.StepSucceeded(7, t, "a", 1, {}),
        ev.StepSkipped(8, t, "c", "condition false"),
        ev.StepDispatched(9, t, "b", 1, "tok-b", "w", "s", None),
        ev.StaleResultIgnored(10, t, "a", "tok-old", "succeeded"),
    ]


def test_units_are_listed_by_the_event_that_last_changed_them() -> None:
    state = fold(_history(), "x")
    assert list(state.units) == ["b", "a", "c"]  # first-touched order is kept internally
    # A stale result ignored for `a` does not change it.
    assert list(state.to_json()["units"]) == ["a", "c", "b"]


def test_each_prefix_of_the_history_orders_its_units_by_last_change() -> None:
    history = _history()
    expected = {
        4: ["b", "a"],
        5: ["b", "a", "c"],
        6: ["b", "c", "a"],
        8: ["b", "a", "c"],
        9: ["a", "c", "b"],
    }
    for length, order in expected.items():
        assert list(fold(history[:length], "x").to_json()["units"]) == order, length
