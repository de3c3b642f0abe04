"""Step rate (issue 39): a task step's `rate` caps the attempts handed to
workers per period per key, on simulated time. Attempts over it are not
queued: they wait in line (priority, then arrival) and go as the bucket
earns tokens (a burst first); the execution document says why one waits;
the bucket is written with the dispatch that spends a token and read back
after a restart, which therefore refills nothing."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures_orbit import DEMO_TASK, Scripted, compile_one, demo_definition

from orbit_core.engine import Engine
from orbit_core.ir import Definition
from orbit_core.jsontypes import JsonValue
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SimulatedClock, run_until_idle, simulated_engine

RATE = "rate { max: 2, per: 1m, key: input.customer_id }"


def definition(flow: str = RATE) -> Definition:
    return demo_definition("PerStep", input="customer_id: String, n: Int", step=flow)


class World:
    def __init__(self, flow: str = RATE, store: MemoryStore | None = None) -> None:
        self.store = store or MemoryStore()
        self.clock = SimulatedClock()
        self.engine = self.open()
        self.engine.deploy(definition(flow))
        self.worker = Scripted(self.engine)

    def start(self, *customers: str, first: int = 1, n: int = 0) -> None:
        for i, customer in enumerate(customers, first):
            self.engine.start(
                "PerStep", input={"customer_id": customer, "n": n}, execution_id=f"e{i}"
            )

    def open(self) -> Engine:
        # The scripted worker polls only now and then: its session stays.
        return simulated_engine(self.store, self.clock, session_timeout_ms=10**9)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.engine.tick()

    def restart(self) -> None:
        self.engine.close()
        self.engine = self.open()
        self.engine.tick()
        self.worker = Scripted(self.engine)

    def close(self) -> None:
        self.engine.close()


@pytest.fixture
def world() -> Any:
    w = World()
    yield w
    w.close()


def test_dispatches_over_the_rate_wait_in_order_and_go_as_tokens_come(world: World) -> None:
    world.start("c-1", "c-1", "c-1", "c-1", "c-2")
    tasks = world.worker.take_all()
    assert sorted(t["execution_id"] for t in tasks) == ["e1", "e2", "e5"]
    world.worker.finish(tasks)  # a completed attempt gives no token back
    assert world.worker.ids() == []
    doc = world.engine.get("e3")
    assert doc["waiting"] == {
        "reason": "rate",
        "key": "c-1",
        "label": "customer_id",
        "limit": 2,
        "period_ms": 60_000,
        "since_ms": world.clock.now_ms(),
        "message": "waiting for a rate limit: customer_id `c-1` 2 per 1m",
        "step": "work",
    }
    assert world.engine.get("e4")["waiting"]["since_ms"] == world.clock.now_ms()
    # One token every 30 s: e3 first, then e4.
    world.advance(29_999)
    assert world.worker.ids() == []
    world.advance(1)
    assert world.worker.ids() == ["e3"]
    assert "waiting" not in world.engine.get("e3")
    world.advance(29_999)
    assert world.worker.ids() == []
    world.advance(1)
    assert world.worker.ids() == ["e4"]


def test_no_worker_polling_means_no_token_spent() -> None:
    """Tokens are spent by dispatches, not by queueing: tasks that sat in
    the queue for an hour go out in a burst of at most the bucket's size."""
    w = World("rate { max: 1, per: 10s, burst: 3, key: input.customer_id }")
    try:
        w.start(*["c-1"] * 6)
        w.advance(3_600_000)
        assert w.worker.ids() == ["e1", "e2", "e3"]
        w.advance(9_999)
        assert w.worker.ids() == []
        w.advance(1)
        assert w.worker.ids() == ["e4"]
    finally:
        w.close()


def test_in_any_window_at_most_burst_plus_earned_dispatches() -> None:
    w = World("rate { max: 3, per: 1m, burst: 5 }")
    try:
        w.start(*[f"c-{i}" for i in range(40)])
        times: list[int] = []
        for _ in range(600):
            for _task in w.worker.take_all():
                times.append(w.clock.now_ms())
            w.advance(1_000)
        assert len(times) == 5 + 29  # the burst at 0 s, then one every 20 s to 580 s
        for i, start in enumerate(times):
            window = [t for t in times[i:] if t < start + 60_000]
            assert len(window) <= 5 + 3
    finally:
        w.close()


def test_priority_orders_the_line() -> None:
    w = World("rate { max: 1, per: 1m }\n        priority: input.n")
    try:
        w.engine.start("PerStep", input={"customer_id": "a", "n": 0}, execution_id="e1")
        w.engine.start("PerStep", input={"customer_id": "b", "n": 1}, execution_id="e2")
        w.engine.start("PerStep", input={"customer_id": "c", "n": 9}, execution_id="e3")
        assert w.worker.ids() == ["e1"]
        w.advance(60_000)
        assert w.worker.ids() == ["e3"]
        w.advance(60_000)
        assert w.worker.ids() == ["e2"]
    finally:
        w.close()


def test_a_retry_is_a_new_dispatch_and_waits_for_a_token() -> None:
    w = World(RATE + "\n        retry { attempts: 2, backoff: fixed, initial_delay: 1s }")
    try:
        w.start("c-1", "c-1")
        first = w.worker.take_all()
        assert [t["execution_id"] for t in first] == ["e1", "e2"]
        w.engine.workers.fail(first[0]["token"], "BOOM", "try again", retryable=True)
        w.advance(1_000)
        assert w.worker.ids() == []
        assert w.engine.get("e1")["waiting"]["reason"] == "rate"
        w.advance(29_000)
        assert w.worker.ids() == ["e1"]
    finally:
        w.close()


def test_with_concurrency_the_slot_is_asked_first_and_held_while_waiting() -> None:
    w = World(RATE + "\n        concurrency { max: 1, key: input.customer_id }")
    try:
        w.start("c-1", "c-1", "c-1")
        first = w.worker.take_all()
        assert [t["execution_id"] for t in first] == ["e1"]
        assert w.engine.get("e2")["waiting"]["reason"] == "concurrency"
        w.worker.finish(first)
        second = w.worker.take_all()
        assert [t["execution_id"] for t in second] == ["e2"]  # the burst's second token
        w.worker.finish(second)
        assert w.worker.ids() == []
        assert w.engine.get("e3")["waiting"]["reason"] == "rate"
        w.advance(30_000)
        assert w.worker.ids() == ["e3"]
    finally:
        w.close()


def test_a_token_promised_to_a_cancelled_attempt_goes_to_the_next_in_line(world: World) -> None:
    """e1 and e2 are queued with the bucket's two tokens promised to them;
    both are cancelled before any worker polls, so the tokens were never
    spent: the next in line get them within one interval."""
    world.start("c-1", "c-1", "c-1", "c-1")
    world.engine.cancel("e1")
    world.engine.cancel("e2")
    world.advance(30_000)
    assert world.worker.ids() == ["e3", "e4"]


def test_a_restart_keeps_the_bucket_and_the_line() -> None:
    store = MemoryStore()
    w = World(store=store)
    try:
        w.start("c-1", "c-1", "c-1")
        assert w.worker.ids() == ["e1", "e2"]
        w.restart()
        assert w.worker.ids() == []
        assert w.engine.get("e3")["waiting"]["reason"] == "rate"
        w.advance(30_000)
        assert w.worker.ids() == ["e3"]
    finally:
        w.close()


def test_the_bucket_is_written_with_the_dispatch() -> None:
    store = MemoryStore()
    w = World(store=store)
    try:
        w.start("c-1")
        assert store.load_rates() == []  # queued, not dispatched: no token spent
        assert w.worker.ids() == ["e1"]
        (row,) = store.load_rates()
        assert (row.workflow, row.key, row.tat_us) == (
            "PerStep/work",
            "c-1",
            (w.clock.now_ms() + 30_000) * 1000,
        )
    finally:
        w.close()


FAN_OUT = (
    DEMO_TASK
    + """
workflow Spread {
    version "1.0.0"
    input { customers: List<String> }

    step work {
        for customer in input.customers
        worker "demo.work"
        with { customer_id: customer }
        rate { max: 1, per: 1m, key: customer }
    }
}
"""
)


def test_a_fan_out_keyed_by_its_element_runs_to_the_end_on_skipped_time() -> None:
    """The rate's timers are among the engine's due times, so a simulated
    run (orbit test, orbit simulate, run_until_idle) skips to each token."""
    defn = compile_one(FAN_OUT, "s.orbit")
    engine = simulated_engine()
    try:
        engine.deploy(defn)
        engine.register_handler("demo.work", "1.0.0", lambda _value, _task: {})
        customers: list[JsonValue] = ["a", "b", "a", "a", "b"]
        engine.start("Spread", input={"customers": customers}, execution_id="s1")
        elapsed = run_until_idle(engine)
        assert engine.get("s1")["status"] == "COMPLETED"
        assert elapsed == 120_000  # `a` three times: at 0, 1 min and 2 min
        dispatched = [e for e in engine.events("s1") if type(e).__name__ == "StepDispatched"]
        assert len(dispatched) == 5
    finally:
        engine.close()
