"""Workflow concurrency per key (issue 39.2) on the engine itself: the
example's limit holds, waiting executions say why, a freed slot admits the
next in line in the same commit, and a restart from the store keeps it all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures_orbit import Scripted

from orbit_core.engine import Engine
from orbit_core.ir import Definition
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SimulatedClock, simulated_engine
from orbit_lang.compiler import compile_paths

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flow_control.orbit"


def example() -> Definition:
    result = compile_paths([EXAMPLE])
    assert result.errors == 0, result.diagnostics
    (definition,) = result.definitions
    return definition


def start_five(engine: Engine) -> None:
    for n, customer in enumerate(["c-1", "c-1", "c-1", "c-1", "c-2"], 1):
        engine.start("PerCustomer", input={"customer_id": customer}, execution_id=f"e{n}")


def types(engine: Engine, execution_id: str) -> list[str]:
    return [str(event["type"]) for event in engine.history(execution_id)["events"]]


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine()
    eng.deploy(example())
    yield eng
    eng.close()


def test_two_per_customer_run_and_the_rest_wait_in_order(engine: Engine) -> None:
    start_five(engine)
    worker = Scripted(engine)
    tasks = worker.take_all()
    assert sorted(t["execution_id"] for t in tasks) == ["e1", "e2", "e5"]
    waiting = engine.get("e3")
    assert waiting["status"] == "RUNNING"
    assert waiting["waiting"]["message"] == (
        "waiting for a concurrency slot: customer_id `c-1` 2/2"
    )
    assert types(engine, "e3") == ["WorkflowCreated", "WorkflowWaiting"]
    assert "waiting" not in engine.get("e1")
    # One c-1 task completes: e3 (first in line) starts in that commit.
    first = next(t for t in tasks if t["execution_id"] == "e1")
    engine.workers.complete(first["token"], {})
    assert engine.get("e1")["status"] == "COMPLETED"
    assert types(engine, "e3")[:4] == [
        "WorkflowCreated",
        "WorkflowWaiting",
        "WorkflowAdmitted",
        "WorkflowStarted",
    ]
    assert "waiting" in engine.get("e4")
    assert [t["execution_id"] for t in worker.take_all()] == ["e3"]


def test_an_execution_without_flow_control_records_what_it_always_did(engine: Engine) -> None:
    engine.start("PerCustomer", input={"customer_id": "c-9"}, execution_id="solo")
    assert types(engine, "solo")[:2] == ["WorkflowCreated", "WorkflowStarted"]


def test_cancelling_a_waiting_execution_frees_its_place_in_line(engine: Engine) -> None:
    start_five(engine)
    doc = engine.cancel("e3")
    assert doc["status"] == "CANCELLED"
    worker = Scripted(engine)
    tasks = {t["execution_id"]: t for t in worker.take_all()}
    engine.workers.complete(tasks["e1"]["token"], {})
    assert [t["execution_id"] for t in worker.take_all()] == ["e4"]


def test_after_a_restart_the_limit_holds_and_no_waiting_start_is_lost() -> None:
    store, clock = MemoryStore(), SimulatedClock()
    first = simulated_engine(store, clock)
    first.deploy(example())
    start_five(first)
    tasks = {t["execution_id"]: t for t in Scripted(first).take_all()}
    assert sorted(tasks) == ["e1", "e2", "e5"]
    first.close()

    second = simulated_engine(store, clock)
    try:
        assert "waiting" in second.get("e3") and "waiting" in second.get("e4")
        worker = Scripted(second)
        # The tasks handed out before are still out; nothing new may start.
        assert worker.take_all() == []
        second.workers.complete(tasks["e2"]["token"], {})
        assert [t["execution_id"] for t in worker.take_all()] == ["e3"]
        assert "waiting" in second.get("e4")
        assert types(second, "e3").count("WorkflowAdmitted") == 1
    finally:
        second.close()


def test_a_restart_neither_jumps_the_line_nor_loses_a_slot(engine: Engine) -> None:
    # Found by the engine simulation's limit invariant: a restarted run
    # recorded WorkflowStarted whatever the limit said.
    start_five(engine)
    worker = Scripted(engine)
    assert sorted(t["execution_id"] for t in worker.take_all()) == ["e1", "e2", "e5"]
    engine.operations.restart("e3", "work", force=True, reason="test")
    assert "waiting" in engine.get("e3")
    assert worker.take_all() == []
    # A running execution restarted keeps its slot: its new run starts at once.
    engine.operations.restart("e1", "work", force=True, reason="test")
    assert "waiting" not in engine.get("e1")
    assert [t["execution_id"] for t in worker.take_all()] == ["e1"]
    assert "waiting" in engine.get("e3") and "waiting" in engine.get("e4")
