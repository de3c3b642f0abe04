"""A parent that stops waiting for a child cancels it (chapter 19): on the
child step's timeout, the parent's own timeout, a fan-out sibling's failure, a
cancel, a failure handler's child that times out, and children left running by
an older runtime, found at recovery. Everything runs on simulated time."""

from __future__ import annotations

from typing import Any

import pytest
from engine_kit import (
    Int,
    Worker,
    child_contract,
    inp,
    lst,
    obj,
    rec,
    step,
    task,
    var,
    workflow,
)

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.engine.children import Children
from orbit_core.ir import ForEach
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine

KID_WORK = task("kid.work", rec(n=Int), rec(ok=Int))


def kid() -> Any:
    """A child whose only task no worker takes unless the test says so."""
    return workflow(
        "Kid",
        [step("work", task="kid.work", with_=obj(n=inp("n")))],
        [KID_WORK],
        input=rec(n=(Int, 0)),
    )


def boss(child: Any, **kw: Any) -> Any:
    step_kw = kw.pop("step", {})
    return workflow(
        "Boss",
        [step("run", "workflow", workflow="Kid", with_=obj(n=1), **step_kw)],
        [child_contract(child)],
        **kw,
    )


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine()
    yield eng
    eng.close()


def advance(engine: Engine, ms: int) -> None:
    for _ in range(ms // 100):
        engine.clock.advance(100)  # type: ignore[attr-defined]


def assert_cancelled(engine: Engine, child_id: str, reason: str) -> None:
    child = engine.get(child_id)
    assert child["status"] == "CANCELLED", child
    assert child["abort"] == {"kind": "cancelled", "reason": reason}
    cancels = [e for e in engine.events(child_id) if isinstance(e, ev.CancelRequested)]
    assert len(cancels) == 1
    assert engine.next_due_ms() is None  # no timer of the child keeps running


def test_a_child_step_that_times_out_cancels_its_child(engine: Engine) -> None:
    child = kid()
    engine.deploy(child)
    engine.deploy(boss(child, step={"timeout_ms": 1000}))
    engine.start("Boss", execution_id="b-1")
    advance(engine, 100)
    assert engine.get("b-1.run")["status"] == "RUNNING"
    advance(engine, 1100)
    parent = engine.get("b-1")
    assert parent["status"] == "FAILED"
    assert parent["error"]["code"] == "TIMEOUT"
    assert parent["error"]["message"].endswith("child workflow did not finish within 1000ms")
    assert_cancelled(engine, "b-1.run", "parent step timed out")


def test_the_parents_own_timeout_cancels_its_child(engine: Engine) -> None:
    child = kid()
    engine.deploy(child)
    engine.deploy(boss(child, timeout_ms=1000))
    engine.start("Boss", execution_id="b-2")
    advance(engine, 1200)
    assert engine.get("b-2")["status"] == "TIMED_OUT"
    assert_cancelled(engine, "b-2.run", "parent workflow aborted")


def test_a_failed_fan_out_element_cancels_the_other_children(engine: Engine) -> None:
    child = kid()
    engine.deploy(child)
    parent = workflow(
        "Boss",
        [
            step(
                "run",
                "workflow",
                workflow="Kid",
                for_each=ForEach("it", inp("items")),
                with_=obj(n=var("it")),
            )
        ],
        [child_contract(child)],
        input=rec(items=lst(Int)),
    )
    engine.deploy(parent)
    worker = Worker(engine, "w", ["kid.work"])
    engine.start("Boss", input={"items": [0, 1]}, execution_id="b-3")
    advance(engine, 100)
    first = worker.take()
    assert first["execution_id"] == "b-3.run.0"
    worker.err(first, "BROKEN", "no", retryable=False)
    assert engine.get("b-3")["status"] == "FAILED"
    assert_cancelled(engine, "b-3.run.1", "parent workflow aborted")


def test_a_cancelled_parent_cancels_its_child(engine: Engine) -> None:
    child = kid()
    engine.deploy(child)
    engine.deploy(boss(child))
    engine.start("Boss", execution_id="b-4")
    advance(engine, 100)
    engine.cancel("b-4")
    assert engine.get("b-4")["status"] == "CANCELLED"
    assert_cancelled(engine, "b-4.run", "parent workflow aborted")


def test_a_failure_handlers_child_that_times_out_is_cancelled(engine: Engine) -> None:
    child = kid()
    engine.deploy(child)
    parent = workflow(
        "Boss",
        [step("main", task="boss.main")],
        [task("boss.main"), child_contract(child)],
        handlers={
            "failure": (step("notify", "workflow", workflow="Kid", with_=obj(n=2), timeout_ms=500),)
        },
    )
    engine.deploy(parent)
    worker = Worker(engine, "w", ["boss.main"])
    engine.start("Boss", execution_id="b-5")
    worker.err(worker.take(), "BROKEN", "no", retryable=False)
    advance(engine, 100)
    handler_child = "b-5.on_failure:notify"
    assert engine.get(handler_child)["status"] == "RUNNING"
    advance(engine, 700)
    assert engine.get("b-5")["status"] == "FAILED"
    assert_cancelled(engine, handler_child, "parent step timed out")


def test_recovery_cancels_children_whose_parent_no_longer_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child left running by an older runtime (its parent already ended) is
    cancelled when the engine recovers."""
    store, clock, ids = MemoryStore(), SimulatedClock(), SequentialIds()
    eng = simulated_engine(store, clock, ids=ids)
    child = kid()
    eng.deploy(child)
    eng.deploy(boss(child, step={"timeout_ms": 1000}))
    with monkeypatch.context() as patch:
        patch.setattr(Children, "check", lambda self, tx, parent: None)
        eng.start("Boss", execution_id="b-6")
        advance(eng, 1200)
        assert eng.get("b-6")["status"] == "FAILED"
        assert eng.get("b-6.run")["status"] == "RUNNING"
    eng.close()
    again = simulated_engine(store, SimulatedClock(clock.now_ms()), ids=ids)
    assert_cancelled(again, "b-6.run", "parent workflow finished")
    again.close()
