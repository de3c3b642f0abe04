"""`Engine.deploy(replace=True)`, behind `orbit server --dev`: a changed
definition takes the place of its version's while no unfinished execution
uses it; memory and store agree after a restart and after a failed commit."""

from __future__ import annotations

from typing import Any

import pytest
from engine_kit import Bool, Str, Worker, inp, obj, rec, ref, step, task, workflow
from test_engine_faults import SwitchableStore

from orbit_core import ir
from orbit_core.engine import Engine
from orbit_core.errors import ConflictError, StorageError
from orbit_core.testing import simulated_engine


def review(steps: int = 1) -> ir.Definition:
    return workflow(
        "Review",
        [
            step(f"s{i}", task="review.do", with_=obj(order_id=inp("order_id")))
            for i in range(steps)
        ],
        [task("review.do", rec(order_id=Str), rec(ok=Bool))],
        input=rec(order_id=Str),
        output=rec(ok=Bool),
        result=obj(ok=ref("s0", "ok")),
    )


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine()
    yield eng
    eng.close()


def test_a_version_nobody_runs_is_replaced(engine: Engine) -> None:
    old, new = review(), review(steps=2)
    engine.deploy(old)
    assert engine.deploy(new, replace=True) == {
        "name": "Review",
        "version": "1.0.0",
        "definition_hash": new.definition_hash,
        "created": True,
        "replaced": True,
    }
    assert engine.get_workflow("Review", "1.0.0")["definition_hash"] == new.definition_hash
    assert [w["steps"] for w in engine.list_workflows()["workflows"]] == [["s0", "s1"]]
    # The same content again is up to date, not another replacement.
    assert engine.deploy(new, replace=True)["created"] is False
    # Without the option the book's rule stands.
    with pytest.raises(ConflictError):
        engine.deploy(old)


def test_an_unfinished_execution_keeps_its_definition(engine: Engine) -> None:
    old, new = review(), review(steps=2)
    engine.deploy(old)
    engine.start("Review", "1.0.0", {"order_id": "A"}, "ex-1")
    with pytest.raises(ConflictError) as refused:
        engine.deploy(new, replace=True)
    assert (refused.value.code, refused.value.message) == (
        "DEFINITION_CONFLICT",
        "Review@1.0.0 cannot be replaced: 1 unfinished execution(s) use it (ex-1); "
        "let them finish or cancel them, or bump the version",
    )
    Worker(engine, "w", ["review.do"]).run({"ok": True})
    assert engine.get("ex-1")["status"] == "COMPLETED"
    assert engine.deploy(new, replace=True)["replaced"] is True
    # The finished execution still reads as it ran.
    assert engine.get("ex-1")["output"] == {"ok": True}


def test_the_replacement_survives_a_restart() -> None:
    store = SwitchableStore()
    first = simulated_engine(store)
    first.deploy(review())
    new = review(steps=2)
    first.deploy(new, replace=True)
    first.close()
    second = simulated_engine(store)
    try:
        assert second.get_workflow("Review", "1.0.0")["definition_hash"] == new.definition_hash
    finally:
        second.close()


def test_a_replacement_that_fails_to_commit_leaves_the_old_definition() -> None:
    store = SwitchableStore()
    engine = simulated_engine(store)
    try:
        old = review()
        engine.deploy(old)
        store.failing = True
        with pytest.raises(StorageError):
            engine.deploy(review(steps=2), replace=True)
        store.failing = False
        assert engine.get_workflow("Review", "1.0.0")["definition_hash"] == old.definition_hash
        assert engine.deploy(old)["created"] is False
    finally:
        engine.close()


def test_an_execution_id_of_a_replaced_definition(engine: Engine) -> None:
    engine.deploy(review())
    engine.start("Review", "1.0.0", {"order_id": "A"}, "ex-1")
    Worker(engine, "w", ["review.do"]).run({"ok": True})
    engine.deploy(review(steps=2), replace=True)
    with pytest.raises(ConflictError) as exists:
        engine.start("Review", "1.0.0", {"order_id": "A"}, "ex-1")
    assert (exists.value.code, exists.value.message) == (
        "EXECUTION_EXISTS",
        "execution `ex-1` already exists for an earlier definition of Review@1.0.0, "
        "since replaced (orbit server --dev)",
    )
