"""The execution state lists units in the order the history last changed them."""

from __future__ import annotations

from orbit_core import events as ev
from orbit_core.state import fold


def _history() -> list[ev.Event]:
    return [
        ev.WorkflowCreated(1, 1_000, "Demo", "1.0.0", "sha256:x", {}),
        ev.WorkflowStarted(2, 1_000),
        ev.StepScheduled(3, 1_001, "b", 1, {}, "k-b", False),
        ev.StepScheduled(4, 1_001, "c", 1, {}, "k-c", False),
        ev.StepScheduled(5, 1_002, "a", 1, {}, "k-a", False),
        ev.StepDispatched(6, 1_003, "b", 1, "tok-b", "w", "s", None),
        ev.StepAttemptFailed(7, 1_004, "b", 1, ev.make_error("BUSY", "busy", True)),
        ev.RetryScheduled(8, 1_004, "b", 2, 500, 1_504),
        # One commit: `a` succeeds and `c` is skipped in the same millisecond,
        # and the book lists units changed together by key.
        ev.StepSucceeded(9, 1_005, "c", 1, {}),
        ev.StepSkipped(10, 1_005, "a", "condition false"),
        ev.StaleResultIgnored(11, 1_006, "c", "tok-old", "succeeded"),
    ]


def _order(length: int) -> list[str]:
    return list(fold(_history()[:length], "x").to_json()["units"])


def test_units_are_listed_by_their_last_change_then_by_key() -> None:
    state = fold(_history(), "x")
    assert list(state.units) == ["b", "c", "a"]  # first-touched order is kept internally
    # `b`'s retry wait (#8) changed it after its dispatch; a stale result
    # ignored for `c` (#11) does not change `c`.
    assert _order(11) == ["b", "a", "c"]


def test_each_prefix_of_the_history_orders_its_units() -> None:
    assert _order(4) == ["b", "c"]
    assert _order(5) == ["b", "c", "a"]
    assert _order(6) == ["c", "a", "b"]  # b dispatched
    assert _order(8) == ["c", "a", "b"]  # b failed and waits for its retry
    assert _order(9) == ["a", "b", "c"]  # c succeeded
    assert _order(10) == ["b", "a", "c"]  # a skipped at c's millisecond: key order
