"""Priority and fairness in task dispatch (issue 39), on simulated time:
among ready tasks of one task, a step's higher `priority` goes first; with
a `fairness` key, keys take turns (`weight` tasks each), so a key with many
queued tasks cannot starve one with few. Work without either keeps its
first-in, first-out order."""

from __future__ import annotations

from typing import Any

from fixtures_orbit import demo_definition

from orbit_core.engine import Engine
from orbit_core.testing import simulated_engine


def engine_with(flow: str) -> Engine:
    definition = demo_definition(
        "Ordered", input="customer_id: String, rank: Int = 0, share: Int = 1", step=flow
    )
    engine = simulated_engine()
    engine.deploy(definition)
    return engine


def start(engine: Engine, inputs: list[dict[str, Any]]) -> None:
    for n, value in enumerate(inputs, 1):
        engine.start("Ordered", input=value, execution_id=f"e{n}")


def customers(engine: Engine) -> list[str]:
    """Which customer each dispatched task is for, in dispatch order."""
    session = engine.workers.register("w1", "python", [("demo.work", "1.0.0")])["worker_session_id"]
    order = []
    while (task := engine.workers.poll(session, 0)) is not None:
        value = task["input"]
        assert isinstance(value, dict)
        order.append(str(value["customer_id"]))
    return order


def test_higher_priority_is_dispatched_first_then_in_order() -> None:
    engine = engine_with("priority: input.rank")
    try:
        start(
            engine,
            [
                {"customer_id": "low-1", "rank": 0},
                {"customer_id": "high", "rank": 5},
                {"customer_id": "mid", "rank": 1},
                {"customer_id": "low-2", "rank": 0},
                {"customer_id": "negative", "rank": -3},
            ],
        )
        assert customers(engine) == ["high", "mid", "low-1", "low-2", "negative"]
    finally:
        engine.close()


def test_fairness_takes_turns_between_keys() -> None:
    engine = engine_with("fairness { key: input.customer_id }")
    try:
        start(engine, [{"customer_id": "big"}] * 6 + [{"customer_id": "small"}] * 2)
        assert customers(engine) == ["big", "small", "big", "small", "big", "big", "big", "big"]
    finally:
        engine.close()


def test_a_weight_gives_a_key_that_many_turns() -> None:
    engine = engine_with("fairness { key: input.customer_id, weight: input.share }")
    try:
        start(
            engine,
            [{"customer_id": "a", "share": 2}] * 4 + [{"customer_id": "b", "share": 1}] * 3,
        )
        assert customers(engine) == ["a", "a", "b", "a", "a", "b", "b"]
    finally:
        engine.close()


def test_priority_ranks_above_fairness() -> None:
    engine = engine_with("priority: input.rank\n        fairness { key: input.customer_id }")
    try:
        start(
            engine,
            [{"customer_id": "x", "rank": 0}] * 2
            + [{"customer_id": "y", "rank": 0}]
            + [{"customer_id": "vip", "rank": 9}],
        )
        assert customers(engine) == ["vip", "x", "y", "x"]
    finally:
        engine.close()


def test_without_declarations_the_order_is_first_in_first_out() -> None:
    engine = engine_with("")
    try:
        start(engine, [{"customer_id": c} for c in ["a", "b", "a", "c"]])
        assert customers(engine) == ["a", "b", "a", "c"]
    finally:
        engine.close()
