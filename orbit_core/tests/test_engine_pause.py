"""Pause and resume (docs/operating-executions.md): a paused execution hands
out no task, starts no child and fires no timer; what runs finishes and is
recorded, signals wait, cancel works, and the pause is rebuilt from the
history. Everything runs on simulated time."""

from __future__ import annotations

from typing import Any

import pytest
from engine_kit import (
    Int,
    Worker,
    child_contract,
    inp,
    obj,
    rec,
    step,
    task,
    timeline,
    workflow,
)

from orbit_core import events as ev
from orbit_core.decide import decide, next_due_ms
from orbit_core.engine import Engine
from orbit_core.errors import ConflictError
from orbit_core.memory_store import MemoryStore
from orbit_core.plan import Plan
from orbit_core.state import fold
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine

A = task("demo.a", rec(n=Int), rec(ok=Int))
B = task("demo.b", rec(n=Int), rec(ok=Int))


def two_steps() -> Any:
    return workflow(
        "Two",
        [
            step("a", task="demo.a", with_=obj(n=inp("n"))),
            step("b", task="demo.b", with_=obj(n=1), after=["a"]),
        ],
        [A, B],
        input=rec(n=(Int, 0)),
    )


def sleepers() -> Any:
    """Two timers in parallel, the later one declared first."""
    return workflow(
        "Sleepers",
        [step("late", "sleep", sleep_ms=3000), step("early", "sleep", sleep_ms=1000)],
        [],
    )


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine()
    yield eng
    eng.close()


def advance(engine: Engine, ms: int) -> None:
    for _ in range(ms // 100):
        engine.clock.advance(100)  # type: ignore[attr-defined]
        engine.tick()


def test_a_paused_execution_hands_out_no_task_until_resumed(engine: Engine) -> None:
    engine.deploy(two_steps())
    engine.start("Two", execution_id="x-1")
    worker = Worker(engine, "w1", ["demo.a", "demo.b"])
    doc = engine.operations.pause("x-1", "checking the ledger")
    assert doc["status"] == "RUNNING"
    assert doc["paused"] is True
    assert doc["pause_reason"] == "checking the ledger"
    assert engine.get("x-1")["paused_at_ms"] == doc["paused_at_ms"]
    assert engine.workers.poll(worker.session, 0) is None
    resumed = engine.operations.resume("x-1")
    assert "paused" not in resumed and "paused_at_ms" not in resumed
    worker.run({"ok": 1})
    worker.run({"ok": 2})
    assert engine.get("x-1")["status"] == "COMPLETED"
    lines = timeline(engine, "x-1")
    assert "WorkflowPaused" in lines[3] and lines[4] == "WorkflowResumed"


def test_untouched_documents_carry_no_pause_fields(engine: Engine) -> None:
    engine.deploy(two_steps())
    engine.start("Two", execution_id="x-1")
    doc = engine.get("x-1")
    assert not {"paused", "paused_at_ms", "pause_reason"} & set(doc)


def test_coded_errors(engine: Engine) -> None:
    engine.deploy(two_steps())
    engine.start("Two", execution_id="x-1")
    with pytest.raises(ConflictError) as not_paused:
        engine.operations.resume("x-1")
    assert not_paused.value.code == "NOT_PAUSED"
    engine.operations.pause("x-1")
    with pytest.raises(ConflictError) as twice:
        engine.operations.pause("x-1")
    assert twice.value.code == "ALREADY_PAUSED"
    engine.cancel("x-1")
    with pytest.raises(ConflictError) as finished:
        engine.operations.pause("x-1")
    assert finished.value.code == "EXECUTION_FINISHED"


def test_a_result_arriving_while_paused_is_recorded_and_nothing_follows(engine: Engine) -> None:
    engine.deploy(two_steps())
    engine.start("Two", execution_id="x-1")
    worker = Worker(engine, "w1", ["demo.a", "demo.b"])
    first = worker.take()
    engine.operations.pause("x-1")
    worker.ok(first, {"ok": 1})
    doc = engine.get("x-1")
    assert doc["units"]["a"]["status"] == "SUCCEEDED"
    assert "b" not in doc["units"]  # not scheduled while paused
    assert engine.workers.poll(worker.session, 0) is None
    engine.operations.resume("x-1")
    worker.run({"ok": 2})
    assert engine.get("x-1")["status"] == "COMPLETED"


def test_timers_due_while_paused_fire_on_resume_in_the_order_they_fell_due(
    engine: Engine,
) -> None:
    engine.deploy(sleepers())
    engine.start("Sleepers", execution_id="s-1")
    engine.operations.pause("s-1")
    advance(engine, 5000)
    assert engine.next_due_ms() is None or engine.get("s-1")["status"] == "RUNNING"
    assert not [e for e in engine.events("s-1") if isinstance(e, ev.TimerFired)]
    engine.operations.resume("s-1")
    fired = [e.step for e in engine.events("s-1") if isinstance(e, ev.TimerFired)]
    assert fired == ["early", "late"]
    assert engine.get("s-1")["status"] == "COMPLETED"


def test_untouched_simultaneous_timers_keep_step_order(engine: Engine) -> None:
    """The reordering applies only after a resume."""
    engine.deploy(sleepers())
    engine.start("Sleepers", execution_id="s-1")
    advance(engine, 5000)
    fired = [e.step for e in engine.events("s-1") if isinstance(e, ev.TimerFired)]
    assert fired == ["early", "late"]  # each fired when due


def test_signals_are_buffered_while_paused(engine: Engine) -> None:
    engine.deploy(_awaiting())
    engine.start("Waits", execution_id="w-1")
    engine.operations.pause("w-1")
    engine.signal("w-1", "go", {"n": 1})
    doc = engine.get("w-1")
    assert doc["units"]["wait"]["status"] == "WAITING"
    assert doc["signals"][0]["name"] == "go"
    engine.operations.resume("w-1")
    assert engine.get("w-1")["status"] == "COMPLETED"


def _awaiting() -> Any:
    from orbit_core.ir import Signal

    return workflow(
        "Waits",
        [step("wait", "await", signal="go")],
        [],
        signals=(Signal("go", rec(n=Int)),),
    )


def test_cancel_works_while_paused_and_ends_the_pause(engine: Engine) -> None:
    engine.deploy(two_steps())
    engine.start("Two", execution_id="x-1")
    engine.operations.pause("x-1")
    doc = engine.cancel("x-1", "no longer wanted")
    assert doc["status"] == "CANCELLED"
    assert "paused" not in doc
    kinds = [type(e).__name__ for e in engine.events("x-1")]
    assert kinds.index("CancelRequested") < kinds.index("WorkflowResumed")


def test_no_child_starts_while_paused(engine: Engine) -> None:
    kid = workflow("Kid", [step("work", task="demo.a", with_=obj(n=1))], [A])
    engine.deploy(kid)
    boss = workflow(
        "Boss",
        [
            step("first", task="demo.b", with_=obj(n=1)),
            step("run", "workflow", workflow="Kid", with_=obj(), after=["first"]),
        ],
        [B, child_contract(kid)],
    )
    engine.deploy(boss)
    engine.start("Boss", execution_id="b-1")
    worker = Worker(engine, "w1", ["demo.b"])
    first = worker.take()
    engine.operations.pause("b-1")
    worker.ok(first, {"ok": 1})
    advance(engine, 1000)
    assert engine.list_executions(workflow="Kid")["executions"] == []
    engine.operations.resume("b-1")
    advance(engine, 200)
    assert len(engine.list_executions(workflow="Kid")["executions"]) == 1


def test_a_pause_survives_recovery() -> None:
    store, clock, ids = MemoryStore(), SimulatedClock(), SequentialIds()
    first = simulated_engine(store, clock, ids=ids)
    first.deploy(two_steps())
    first.start("Two", execution_id="x-1")
    first.operations.pause("x-1", "held")
    first.close()
    second = simulated_engine(store, clock, ids=ids)
    try:
        worker = Worker(second, "w1", ["demo.a", "demo.b"])
        doc = second.get("x-1")
        assert doc["paused"] is True and doc["pause_reason"] == "held"
        assert second.workers.poll(worker.session, 0) is None
        second.operations.resume("x-1")
        worker.run({"ok": 1})
        worker.run({"ok": 2})
        assert second.get("x-1")["status"] == "COMPLETED"
    finally:
        second.close()


def test_the_fold_and_the_decider_agree_on_a_paused_history(engine: Engine) -> None:
    engine.deploy(sleepers())
    engine.start("Sleepers", execution_id="s-1")
    engine.operations.pause("s-1", "why")
    events = engine.events("s-1")
    state = fold(events, "s-1")
    plan = Plan(sleepers())
    assert state.paused and state.pause_reason == "why"
    assert decide(state, plan, 10**9, engine_limits()) == []
    assert next_due_ms(state, plan) is None
    assert state.to_json() == engine.get("s-1")


def engine_limits() -> Any:
    from orbit_core.decide import Limits

    return Limits()


def test_event_codec_round_trips_the_new_events() -> None:
    paused = ev.WorkflowPaused(3, 10, "why")
    assert ev.loads(ev.dumps(paused)) == paused
    bare = ev.WorkflowPaused(3, 10)
    assert "reason" not in ev.to_json(bare)
    assert ev.loads(ev.dumps(bare)) == bare
    assert ev.loads(ev.dumps(ev.WorkflowResumed(4, 11))) == ev.WorkflowResumed(4, 11)


def test_the_listing_marks_paused_executions_only(engine: Engine) -> None:
    engine.deploy(two_steps())
    engine.start("Two", execution_id="x-1")
    engine.start("Two", execution_id="x-2")
    engine.operations.pause("x-2", "hold")
    rows = {r["execution_id"]: r for r in engine.list_executions()["executions"]}
    assert not {"paused", "paused_at_ms", "pause_reason"} & set(rows["x-1"])
    assert rows["x-2"]["paused"] is True and rows["x-2"]["pause_reason"] == "hold"
    engine.operations.resume("x-2")
    rows = {r["execution_id"]: r for r in engine.list_executions()["executions"]}
    assert "paused" not in rows["x-2"]


def test_the_filtered_listing_marks_paused_executions_like_the_plain_one(engine: Engine) -> None:
    engine.deploy(two_steps())
    engine.start("Two", execution_id="x-1")
    engine.start("Two", execution_id="x-2")
    engine.operations.pause("x-2", "hold")
    page = engine.search_executions('status == "RUNNING"', None, "Two", 50, None)
    rows = {r["execution_id"]: r for r in page["executions"]}
    assert set(rows) == {"x-1", "x-2"}
    assert not {"paused", "paused_at_ms", "pause_reason"} & set(rows["x-1"])
    assert rows["x-2"]["paused"] is True and rows["x-2"]["pause_reason"] == "hold"
    engine.operations.resume("x-2")
    page = engine.search_executions(None, None, "Two", 50, None)
    assert all("paused" not in r for r in page["executions"])
