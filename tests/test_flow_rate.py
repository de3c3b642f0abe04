"""Workflow start rates and debounce (issue 39) on a simulated engine: starts
over a rate wait in order and go as tokens come (burst first), `drop`
refuses with RATE_LIMITED, a debounced key keeps one pending execution
whose input the last start replaces, which starts after a quiet period or
at `max_wait`; a restart from the store keeps buckets, lines and pending
executions."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures_orbit import DEMO_TASK, compile_one, demo_definition

from orbit_core.engine import Engine
from orbit_core.errors import RateLimitedError
from orbit_core.ir import Definition
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SequentialIds, SimulatedClock, run_until_idle, simulated_engine


def workflow(clause: str, name: str = "Flow") -> Definition:
    return demo_definition(name, input="customer_id: String, n: Int", header=clause)


RATE_WAIT = "rate { max: 2, per: 1m, key: input.customer_id }"
RATE_BURST = "rate { max: 1, per: 10s, burst: 3, key: input.customer_id }"
RATE_DROP = "rate { max: 2, per: 1m, key: input.customer_id, on_exceed: drop }"
DEBOUNCE = "debounce { period: 10s, max_wait: 30s, key: input.customer_id }"


class World:
    def __init__(self, clause: str, store: MemoryStore | None = None) -> None:
        self.store = store or MemoryStore()
        self.clock = SimulatedClock()
        self.ids = SequentialIds()
        self.clause = clause
        self.engine = self.open()
        self.engine.deploy(workflow(clause))

    def open(self) -> Engine:
        return simulated_engine(self.store, self.clock, ids=self.ids)

    def restart(self) -> None:
        self.engine.close()
        self.engine = self.open()

    def start(self, eid: str | None, customer: str = "c-1", n: int = 0) -> Any:
        return self.engine.start("Flow", input={"customer_id": customer, "n": n}, execution_id=eid)

    def started(self) -> list[str]:
        """The executions that have a WorkflowStarted, in the order they started."""
        found: list[tuple[int, int, str]] = []
        for row in self.engine.list_executions(limit=1000)["executions"]:
            eid = row["execution_id"]
            events: list[Any] = self.engine.history(eid)["events"]
            for event in events:
                if event["type"] == "WorkflowStarted":
                    found.append((event["timestamp_ms"], event["seq"], eid))
        return [eid for _, _, eid in sorted(found)]

    def types(self, eid: str) -> list[str]:
        return [str(e["type"]) for e in self.engine.history(eid)["events"]]


@pytest.fixture
def worlds() -> Any:
    made: list[World] = []

    def make(clause: str) -> World:
        world = World(clause)
        made.append(world)
        return world

    yield make
    for world in made:
        world.engine.close()


def test_starts_over_the_rate_wait_in_order_and_go_as_tokens_come(worlds: Any) -> None:
    w = worlds(RATE_WAIT)
    for n in range(1, 6):
        assert w.start(f"e{n}", n=n)["created"] is True
    w.start("other", customer="c-2")
    # Two per minute for c-1: e1 and e2 go at once (the bucket holds two),
    # then one every 30 s; c-2 has its own bucket.
    assert sorted(w.started()) == ["e1", "e2", "other"]
    doc = w.engine.get("e3")
    assert doc["waiting"]["message"] == "waiting for a rate limit: customer_id `c-1` 2 per 1m"
    assert doc["waiting"]["reason"] == "rate"
    assert w.types("e3") == ["WorkflowCreated", "WorkflowWaiting"]
    w.clock.advance(29_999)
    assert "waiting" in w.engine.get("e3")
    w.clock.advance(1)
    assert w.types("e3")[2:4] == ["WorkflowAdmitted", "WorkflowStarted"]
    assert "waiting" in w.engine.get("e4")
    w.clock.advance(60_000)
    assert w.started()[-2:] == ["e4", "e5"]
    assert w.engine.health()["rate_delayed"] == 3


def test_a_burst_goes_at_once_then_one_per_interval(worlds: Any) -> None:
    w = worlds(RATE_BURST)
    for n in range(1, 6):
        w.start(f"e{n}")
    assert w.started() == ["e1", "e2", "e3"]
    w.clock.advance(10_000)
    assert w.started() == ["e1", "e2", "e3", "e4"]
    w.clock.advance(10_000)
    assert w.started() == ["e1", "e2", "e3", "e4", "e5"]
    # Idle long enough, the bucket fills up to the burst again.
    w.clock.advance(60_000)
    for n in range(6, 10):
        w.start(f"e{n}")
    assert w.started()[5:] == ["e6", "e7", "e8"]


def test_priority_orders_the_rate_line(worlds: Any) -> None:
    w = worlds(RATE_BURST.replace("}", "}\n    priority: input.n", 1))
    for n, eid in [(0, "a"), (0, "b"), (0, "c"), (1, "low"), (5, "high")]:
        w.start(eid, n=n)
    w.clock.advance(10_000)
    assert w.started()[-1] == "high"
    w.clock.advance(10_000)
    assert w.started()[-1] == "low"


def test_drop_refuses_a_start_with_rate_limited(worlds: Any) -> None:
    w = worlds(RATE_DROP)
    w.start("e1")
    w.start("e2")
    with pytest.raises(RateLimitedError) as refused:
        w.start("e3")
    assert refused.value.code == "RATE_LIMITED"
    assert refused.value.message == (
        "start of Flow refused: its rate limit for customer_id `c-1` (2 per 1m) is reached; "
        "the next start may go in 30s"
    )
    assert refused.value.details == {"retry_after_ms": 30_000}
    with pytest.raises(Exception, match="not found"):
        w.engine.get("e3")
    w.start("c2", customer="c-2")
    w.clock.advance(30_000)
    assert w.start("e3")["created"] is True
    assert w.engine.health()["rate_dropped"] == 1


def test_a_debounced_start_replaces_the_pending_input(worlds: Any) -> None:
    w = worlds(DEBOUNCE)
    first = w.start(None, n=1)
    assert first["created"] is True
    eid = first["execution_id"]
    assert w.engine.get(eid)["waiting"]["message"] == (
        "waiting for a debounce: customer_id `c-1` 10s without another start"
    )
    w.clock.advance(5_000)
    # A later start of the same key is folded into the pending execution.
    second = w.start(None, n=2)
    assert second == {"execution_id": eid, "created": False}
    w.clock.advance(1_000)
    other = w.start(None, customer="c-2")["execution_id"]
    assert other != eid
    w.clock.advance(8_999)
    assert w.started() == []
    w.clock.advance(1)
    assert w.started() == [eid]
    w.clock.advance(1_000)
    assert w.started() == [eid, other]
    doc = w.engine.get(eid)
    assert doc["input"] == {"customer_id": "c-1", "n": 2}
    assert w.types(eid)[:5] == [
        "WorkflowCreated",
        "WorkflowWaiting",
        "WorkflowDebounced",
        "WorkflowAdmitted",
        "WorkflowStarted",
    ]
    assert w.engine.health()["debounced"] == 1
    # The next start of c-1 makes a new pending execution.
    assert w.start(None, n=3)["created"] is True


def test_a_debounce_starts_at_max_wait_however_often_it_is_replaced(worlds: Any) -> None:
    w = worlds(DEBOUNCE)
    eid = w.start("d1", n=0)["execution_id"]
    for n in range(1, 5):
        w.clock.advance(6_000)
        assert w.start(None, n=n)["execution_id"] == eid
    w.clock.advance(5_999)
    assert w.started() == []
    # 30 s after the first start (max_wait), though the last came 6 s ago.
    w.clock.advance(1)
    assert w.started() == [eid]
    assert w.engine.get(eid)["input"]["n"] == 4
    # A start now begins a new pending execution.
    assert w.start(None, n=5)["created"] is True


def test_a_restart_keeps_buckets_lines_and_pending_debounces() -> None:
    w = World(RATE_WAIT)
    try:
        w.engine.deploy(workflow(DEBOUNCE, "Quiet"))
        for n in range(1, 5):
            w.start(f"e{n}")
        w.clock.advance(25_000)
        pending = w.engine.start("Quiet", input={"customer_id": "q", "n": 1})["execution_id"]
        w.clock.advance(4_000)
        w.restart()
        assert sorted(w.started()) == ["e1", "e2"]
        # Still pending after the restart: a start of its key is folded in.
        assert w.engine.start("Quiet", input={"customer_id": "q", "n": 2}) == {
            "execution_id": pending,
            "created": False,
        }
        w.clock.advance(1_000)
        assert w.started()[-1] == "e3"
        w.restart()
        # The bucket came back from the store: e4 waits its 30 s.
        w.clock.advance(8_999)
        assert pending not in w.started()
        w.clock.advance(1)
        # The pending Quiet execution starts 10 s after its second start.
        assert w.started()[-1] == pending
        assert w.engine.get(pending)["input"] == {"customer_id": "q", "n": 2}
        w.clock.advance(20_000)
        assert "waiting" in w.engine.get("e4")
        w.clock.advance(1_000)
        assert w.started()[-1] == "e4"
        assert w.types(pending).count("WorkflowStarted") == 1
    finally:
        w.engine.close()


def test_a_fresh_bucket_after_a_restart_would_let_too_many_through() -> None:
    """The bucket is stored: a restart right after a burst must not refill it."""
    w = World(RATE_DROP)
    try:
        w.start("e1")
        w.start("e2")
        w.restart()
        with pytest.raises(RateLimitedError):
            w.start("e3")
    finally:
        w.engine.close()


# ---- simulate/test honour the declarations


def test_a_pytest_suite_can_start_many_and_assert_the_limits_held() -> None:
    """The pattern docs/testing.md shows: many starts on the simulated
    engine, `run_until_idle`, then the histories say when each started and
    ended, so a suite checks a limit the way a reader would."""
    source = (
        DEMO_TASK
        + """
workflow Held {
    version "1.0.0"
    input { customer_id: String }
    concurrency { max: 2, key: input.customer_id }
    rate { max: 3, per: 1m, key: input.customer_id }

    step work {
        worker "demo.work"
        with { customer_id: input.customer_id }
    }
    step rest { sleep 50s }
}
"""
    )
    definition = compile_one(source)
    engine = simulated_engine()
    try:
        engine.deploy(definition)
        engine.register_handler("demo.work", "1.0.0", lambda _input, _ctx: {})
        for n in range(12):
            engine.start("Held", input={"customer_id": f"c-{n % 2}"}, execution_id=f"h{n}")
        run_until_idle(engine)
        spans: dict[str, list[tuple[int, int]]] = {}
        for n in range(12):
            events: list[Any] = engine.history(f"h{n}")["events"]
            start = next(e["timestamp_ms"] for e in events if e["type"] == "WorkflowStarted")
            assert events[-1]["type"] == "WorkflowCompleted"
            spans.setdefault(f"c-{n % 2}", []).append((start, events[-1]["timestamp_ms"]))
        for key_spans in spans.values():
            starts = sorted(s for s, _ in key_spans)
            # The bucket: 3 at once at most, then one per 20 s (3 per minute),
            # so any stretch of starts fits 3 + its length / 20 s.
            for i, a in enumerate(starts):
                for j in range(i, len(starts)):
                    assert j - i + 1 <= 3 + (starts[j] - a) // 20_000
            # Never more than 2 running at once.
            for at in starts:
                assert sum(1 for s, e in key_spans if s <= at < e) <= 2
    finally:
        engine.close()


def test_a_start_waiting_for_a_token_keeps_its_concurrency_slot_across_a_restart() -> None:
    """Concurrency is asked before the rate, so the starts keep to the rate;
    one let in by the concurrency limit holds its slot while it waits for a
    token, also after a restart (its history says `rate`)."""
    w = World("concurrency { max: 2 }\n    rate { max: 1, per: 1m }")
    try:
        for eid in ("b1", "b2", "b3"):
            w.start(eid)
        reasons = {eid: w.engine.get(eid).get("waiting", {}).get("reason") for eid in ("b2", "b3")}
        assert w.started() == ["b1"] and reasons == {"b2": "rate", "b3": "concurrency"}
        session = w.engine.workers.register("w", "python", [("demo.work", "1.0.0")])
        task = w.engine.workers.poll(session["worker_session_id"], 0)
        assert task is not None and task["execution_id"] == "b1"
        w.restart()
        w.clock.advance(1)  # a tick: the recovered lines are looked at again
        assert w.engine.get("b3")["waiting"]["reason"] == "concurrency"
        w.engine.workers.complete(task["token"], {})
        # b1's slot goes to b3, which now waits for a token behind b2.
        assert w.engine.get("b3")["waiting"]["reason"] == "rate"
        w.clock.advance(59_999)
        assert w.started() == ["b1", "b2"]
        w.clock.advance(60_000)
        assert w.started() == ["b1", "b2", "b3"]
    finally:
        w.engine.close()
