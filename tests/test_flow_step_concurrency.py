"""Step concurrency (issue 39): a task step's `concurrency` caps the attempts
out at once per key across executions, on simulated time. A held-back
attempt is not dispatched until one with its key ends (completes, fails,
times out); the execution document says why it waits; a restart rebuilds
the counts from the histories."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures_orbit import Scripted, demo_definition

from orbit_core.engine import Engine
from orbit_core.ir import Definition
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SimulatedClock, simulated_engine


def definition(concurrency: str = "concurrency { max: 1, key: input.customer_id }") -> Definition:
    return demo_definition("PerStep", step=f"timeout 5s\n        {concurrency}")


def start(engine: Engine, *customers: str) -> None:
    for n, customer in enumerate(customers, 1):
        engine.start("PerStep", input={"customer_id": customer}, execution_id=f"e{n}")


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine()
    eng.deploy(definition())
    yield eng
    eng.close()


def test_one_attempt_per_key_and_the_rest_wait_in_order(engine: Engine) -> None:
    start(engine, "c-1", "c-1", "c-1", "c-2")
    worker = Scripted(engine)
    tasks = {t["execution_id"]: t for t in worker.take_all()}
    assert sorted(tasks) == ["e1", "e4"]
    doc = engine.get("e2")
    assert doc["status"] == "RUNNING"
    assert doc["waiting"]["message"] == "waiting for a concurrency slot: customer_id `c-1` 1/1"
    assert doc["waiting"]["step"] == "work"
    assert "waiting" not in engine.get("e1")
    engine.workers.complete(tasks["e1"]["token"], {})
    # e2 (first in line) is dispatched next, e3 still waits.
    assert worker.ids() == ["e2"]
    assert "waiting" in engine.get("e3") and "waiting" not in engine.get("e2")


def test_a_failed_attempt_frees_its_slot(engine: Engine) -> None:
    start(engine, "c-1", "c-1")
    worker = Scripted(engine)
    (task,) = worker.take_all()
    engine.workers.fail(task["token"], "BOOM", "no", retryable=False)
    assert engine.get("e1")["status"] == "FAILED"
    assert worker.ids() == ["e2"]


def test_a_timed_out_attempt_frees_its_slot() -> None:
    clock = SimulatedClock()
    engine = simulated_engine(MemoryStore(), clock)
    try:
        engine.deploy(definition())
        start(engine, "c-1", "c-1")
        worker = Scripted(engine)
        assert worker.ids() == ["e1"]
        clock.advance(6_000)
        engine.tick()
        assert "e2" in worker.ids()
    finally:
        engine.close()


def test_the_keyless_form_caps_the_step_in_all() -> None:
    engine = simulated_engine()
    try:
        engine.deploy(definition("concurrency { max: 2 }"))
        start(engine, "a", "b", "c", "d")
        worker = Scripted(engine)
        tasks = {t["execution_id"]: t for t in worker.take_all()}
        assert sorted(tasks) == ["e1", "e2"]
        assert engine.get("e3")["waiting"]["message"] == "waiting for a concurrency slot: 2/2"
        engine.workers.complete(tasks["e2"]["token"], {})
        assert worker.ids() == ["e3"]
    finally:
        engine.close()


def test_after_a_restart_the_dispatched_attempts_still_hold_their_slots() -> None:
    store, clock = MemoryStore(), SimulatedClock()
    first = simulated_engine(store, clock)
    first.deploy(definition())
    start(first, "c-1", "c-1", "c-1", "c-2")
    tasks = {t["execution_id"]: t for t in Scripted(first).take_all()}
    assert sorted(tasks) == ["e1", "e4"]
    first.close()

    second = simulated_engine(store, clock)
    try:
        second.tick()
        worker = Scripted(second)
        assert worker.take_all() == []
        assert "waiting" in second.get("e2")
        second.workers.complete(tasks["e1"]["token"], {})
        assert worker.ids() == ["e2"]
        assert worker.take_all() == []
    finally:
        second.close()
