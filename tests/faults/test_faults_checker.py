"""The campaign's history checker on hand-made histories: a clean one
passes, and every check fails on a history that breaks it."""

from __future__ import annotations

from typing import Any

import checker
from checker import Execution


def _call(op: str, eid: str, result: str, n: int = 0) -> dict[str, Any]:
    return {"kind": "call", "op": op, "execution_id": eid, "n": n, "outcome": result}


def _history(*types: str | tuple[str, dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    events = []
    for seq, item in enumerate(types, 1):
        kind, fields = (item, {}) if isinstance(item, str) else item
        events.append({"seq": seq, "type": kind, **fields})
    return tuple(events)


def _clean(eid: str = "e-1", signal_op: int = 7) -> Execution:
    return Execution(
        eid,
        "COMPLETED",
        _history(
            "WorkflowStarted",
            ("StepDispatched", {"step": "s0", "attempt": 1}),
            ("StepSucceeded", {"step": "s0", "attempt": 1}),
            ("SignalAwaitStarted", {"step": "go", "signal": "go"}),
            ("SignalReceived", {"name": "go", "payload": {"op": signal_op}}),
            ("SignalDelivered", {"step": "go", "signal_seq": 5}),
            ("StepDispatched", {"step": "s1", "attempt": 1}),
            ("StepSucceeded", {"step": "s1", "attempt": 1}),
            "WorkflowCompleted",
        ),
    )


CLEAN_CALLS = [_call("start", "e-1", "ack", 1), _call("signal", "e-1", "ack", 7)]


def _checks(records: list[dict[str, Any]], *executions: Execution) -> list[str]:
    return [v.check for v in checker.check(records, {e.execution_id: e for e in executions})]


def test_a_clean_history_passes() -> None:
    assert _checks(CLEAN_CALLS, _clean()) == []


def test_outcomes_from_answers() -> None:
    assert checker.outcome(201) == "ack"
    assert checker.outcome(409) == "refused"
    assert checker.outcome(503, "NOT_LEADER") == "refused"
    assert checker.outcome(503, "STORAGE_ERROR") == "unknown"
    assert checker.outcome(None) == "unknown"


def test_an_acknowledged_start_that_is_lost() -> None:
    assert _checks([_call("start", "e-2", "ack")]) == ["start-durable"]


def test_a_start_refused_every_time_but_present() -> None:
    calls = [_call("start", "e-1", "refused"), _call("start", "e-1", "refused")]
    assert "start-refused" in _checks(calls, _clean())


def test_an_execution_no_client_started() -> None:
    assert _checks(CLEAN_CALLS, _clean(), _clean("e-9")) == ["start-phantom"]


def test_an_unknown_start_may_be_present_or_not() -> None:
    assert _checks([_call("start", "e-2", "unknown")]) == []
    calls = [_call("start", "e-1", "unknown"), _call("signal", "e-1", "ack", 7)]
    assert _checks(calls, _clean()) == []


def test_two_ends_and_no_end() -> None:
    twice = attrs_evolve(_clean(), events=(*_clean().events, {"seq": 10, "type": "WorkflowFailed"}))
    violations = checker.check(CLEAN_CALLS, {"e-1": twice})
    assert [v.check for v in violations] == ["one-end"]
    # The window is the shortest slice holding both ends.
    assert [e["type"] for e in violations[0].window] == ["WorkflowCompleted", "WorkflowFailed"]
    never = Execution("e-1", "RUNNING", _clean().events[:4])
    assert "one-end" in _checks(CLEAN_CALLS[:1], never)


def test_a_step_result_accepted_twice() -> None:
    events = list(_clean().events)
    events.insert(3, {"seq": 0, "type": "StepSucceeded", "step": "s0", "attempt": 1})
    twice = Execution("e-1", "COMPLETED", tuple({**e, "seq": i} for i, e in enumerate(events, 1)))
    violations = checker.check(CLEAN_CALLS, {"e-1": twice})
    assert [v.check for v in violations] == ["step-once"]
    assert [e["seq"] for e in violations[0].window] == [3, 4]
    assert "s0 attempt 1" in violations[0].render()


def test_a_redelivered_attempt_with_one_result_is_fine() -> None:
    events = list(_clean().events)
    events.insert(2, {"seq": 0, "type": "StepDispatched", "step": "s0", "attempt": 1})
    again = Execution("e-1", "COMPLETED", tuple({**e, "seq": i} for i, e in enumerate(events, 1)))
    assert _checks(CLEAN_CALLS, again) == []


def test_signals_lost_doubled_or_refused_but_received() -> None:
    lost = [_call("start", "e-1", "ack"), _call("signal", "e-1", "ack", 8)]
    # op 8 acknowledged but absent; op 7 is in the history with no call: fine.
    assert _checks(lost, _clean()) == ["signal-once"]
    events = list(_clean().events)
    events.insert(5, {"seq": 0, "type": "SignalReceived", "name": "go", "payload": {"op": 7}})
    doubled = Execution("e-1", "COMPLETED", tuple({**e, "seq": i} for i, e in enumerate(events, 1)))
    assert _checks(CLEAN_CALLS, doubled) == ["signal-once"]
    unknown = [_call("start", "e-1", "ack"), _call("signal", "e-1", "unknown", 7)]
    assert _checks(unknown, doubled) == ["signal-once"]
    assert _checks(unknown, _clean()) == []
    refused = [_call("start", "e-1", "ack"), _call("signal", "e-1", "refused", 7)]
    assert _checks(refused, _clean()) == ["signal-refused"]


def test_an_acknowledged_cancel_that_is_not_recorded() -> None:
    calls = [*CLEAN_CALLS, _call("cancel", "e-1", "ack")]
    assert _checks(calls, _clean()) == ["cancel-durable"]
    assert _checks([*CLEAN_CALLS, _call("cancel", "e-1", "unknown")], _clean()) == []


def test_a_live_execution_waiting_on_nothing_is_stuck() -> None:
    waiting = Execution("e-1", "RUNNING", _clean().events[:4])  # awaits `go`
    assert checker.pending(waiting.events) == ["signal go"]
    assert checker.check_stuck({"e-1": waiting}) == []
    nothing = Execution("e-1", "RUNNING", _clean().events[:3])
    assert checker.pending(nothing.events) == []
    assert [v.check for v in checker.check_stuck({"e-1": nothing})] == ["stuck"]


def test_a_history_with_a_gap() -> None:
    events = [e for e in _clean().events if e["seq"] != 4]
    gap = Execution("e-1", "COMPLETED", tuple(events))
    assert "history-order" in _checks(CLEAN_CALLS, gap)


def attrs_evolve(execution: Execution, **changes: Any) -> Execution:
    import attrs

    return attrs.evolve(execution, **changes)
