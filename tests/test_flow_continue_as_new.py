"""A workflow `concurrency` limit across `continue_as_new` (issue 39): a new
run is the same execution, so it keeps its slot while its key stays the
same; a new run under another key gives the old key's slot to the next in
line and asks the new key's limit like a new execution, waiting if that key
is full. On simulated time, and again after a restart."""

from __future__ import annotations

from fixtures_orbit import DEMO_TASK, Scripted, compile_one

from orbit_core.engine import Engine
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine

SOURCE = (
    DEMO_TASK
    + """
workflow Hop {
    version "1.0.0"
    input { customer_id: String, next: String }
    concurrency { max: 1, key: input.customer_id }

    step work {
        worker "demo.work"
        with { customer_id: input.customer_id }
    }

    continue_as_new when input.next != "" with { customer_id: input.next, next: "" }
}
"""
)


def _start(engine: Engine, eid: str, customer: str, next_customer: str = "") -> None:
    engine.start("Hop", input={"customer_id": customer, "next": next_customer}, execution_id=eid)


def _out(worker: Scripted) -> dict[str, dict[str, object]]:
    # A new run is decided on the engine's next tick.
    clock = worker.engine.clock
    assert isinstance(clock, SimulatedClock)
    clock.advance(10)
    return {str(t["execution_id"]): t for t in worker.take_all()}


def _scenario(engine: Engine) -> tuple[Scripted, dict[str, dict[str, object]]]:
    engine.deploy(compile_one(SOURCE))
    _start(engine, "e1", "c-1", next_customer="c-2")
    _start(engine, "e2", "c-1")
    _start(engine, "e3", "c-2")
    worker = Scripted(engine)
    tasks = _out(worker)
    assert sorted(tasks) == ["e1", "e3"]
    assert engine.get("e2")["waiting"]["reason"] == "concurrency"
    # e1 finishes its run and goes on as c-2, whose one slot e3 holds.
    engine.workers.complete(str(tasks["e1"]["token"]), {})
    return worker, tasks


def test_a_run_under_another_key_frees_the_old_slot_and_waits_for_the_new() -> None:
    engine = simulated_engine()
    try:
        worker, tasks = _scenario(engine)
        assert sorted(_out(worker)) == ["e2"]  # c-1's slot went to e2
        doc = engine.get("e1")
        assert doc["status"] == "RUNNING"
        assert doc["waiting"]["message"] == "waiting for a concurrency slot: customer_id `c-2` 1/1"
        engine.workers.complete(str(tasks["e3"]["token"]), {})
        assert sorted(_out(worker)) == ["e1"]  # now e1's second run runs
        assert "waiting" not in engine.get("e1")
    finally:
        engine.close()


def test_the_waiting_run_is_let_in_after_a_restart() -> None:
    store, clock, ids = MemoryStore(), SimulatedClock(), SequentialIds()
    engine = simulated_engine(store, clock, ids=ids)
    _, tasks = _scenario(engine)
    engine.close()
    again = simulated_engine(store, SimulatedClock(clock.now_ms()), ids=ids)
    try:
        assert again.get("e1")["waiting"]["reason"] == "concurrency"
        again.workers.complete(str(tasks["e3"]["token"]), {})
        later = Scripted(again)
        assert "e1" in {t["execution_id"] for t in later.take_all()}
    finally:
        again.close()


def test_a_run_under_the_same_key_keeps_its_slot() -> None:
    engine = simulated_engine()
    try:
        engine.deploy(compile_one(SOURCE))
        _start(engine, "e1", "c-1", next_customer="c-1")
        _start(engine, "e2", "c-1")
        worker = Scripted(engine)
        (task,) = worker.take_all()
        engine.workers.complete(str(task["token"]), {})
        assert sorted(_out(worker)) == ["e1"]  # the new run, not e2
        assert engine.get("e2")["waiting"]["reason"] == "concurrency"
    finally:
        engine.close()
