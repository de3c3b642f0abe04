"""What one token may report, and what an expired session may still do
(issue 36, chapters 42 and 68): a token whose attempt already has its answer
(a failure it reported, an output the contract refused) cannot later report
a success; a success after a timeout still counts. A session silent past the
session timeout is unknown: it is handed no task."""

from __future__ import annotations

from typing import Any

import pytest
from engine_kit import Bool, Int, inp, obj, plain, rec, step, task, workflow

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.errors import NotFoundError
from orbit_core.ir import Retry
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine

STALE = {"accepted": False, "reason": "stale attempt"}


def _retrying(store: MemoryStore | None = None, **policy: Any) -> Engine:
    """Plain, whose step is tried up to three times (100 ms apart)."""
    defn = workflow(
        "Plain",
        [
            step(
                "work",
                task="demo.work",
                with_=obj(n=inp("n")),
                retry=Retry(attempts=3, initial_delay_ms=100),
                **policy,
            )
        ],
        [task("demo.work", rec(n=Int), rec(ok=Bool))],
        input=rec(n=Int),
    )
    engine = simulated_engine(store)
    engine.deploy(defn)
    return engine


def _taken(engine: Engine, eid: str = "p-1") -> tuple[str, Any]:
    engine.start("Plain", input={"n": 1}, execution_id=eid)
    session = engine.workers.register("w", "python", [("demo.work", "1.0.0")])
    task = engine.workers.poll(session["worker_session_id"], 0)
    assert task is not None
    return session["worker_session_id"], task


def _stale_events(engine: Engine, eid: str = "p-1") -> list[tuple[str, str]]:
    return [
        (e.token, e.outcome) for e in engine.events(eid) if isinstance(e, ev.StaleResultIgnored)
    ]


def _next_attempt(engine: Engine, session: str) -> Any:
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
    clock.advance(100)
    task = engine.workers.poll(session, 0)
    assert task is not None and task["attempt"] == 2
    return task


def test_a_token_that_reported_a_failure_cannot_report_a_success() -> None:
    engine = _retrying()
    session, task = _taken(engine)
    assert engine.workers.fail(task["token"], "BUSY", "try later", True) == {"accepted": True}
    assert engine.workers.complete(task["token"], {"ok": True}) == STALE
    assert _stale_events(engine) == [(task["token"], "failure")]
    assert engine.get("p-1")["units"]["work"]["status"] == "RETRY_WAIT"
    second = _next_attempt(engine, session)
    assert engine.workers.complete(second["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == "COMPLETED"
    engine.close()


def test_the_rule_holds_after_a_restart() -> None:
    store, ids, clock = MemoryStore(), SequentialIds(), SimulatedClock()
    engine = simulated_engine(store, clock, ids=ids)
    engine.close()
    engine = _retrying(store)
    _session, task = _taken(engine)
    engine.workers.fail(task["token"], "BUSY", "try later", True)
    engine.close()
    again = simulated_engine(store, ids=ids)
    assert again.workers.complete(task["token"], {"ok": True}) == STALE
    again.close()


def test_a_success_after_a_timeout_still_counts() -> None:
    engine = _retrying(timeout_ms=200)
    _session, task = _taken(engine)
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
    clock.advance(250)
    failed = [e for e in engine.events("p-1") if isinstance(e, ev.StepAttemptFailed)]
    assert [e.error["code"] for e in failed] == ["TIMEOUT"]
    assert engine.workers.complete(task["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == "COMPLETED"
    engine.close()


def test_an_expired_session_is_handed_no_task() -> None:
    engine = simulated_engine(session_timeout_ms=3000)
    engine.deploy(plain())
    session = engine.workers.register("w", "python", [("demo.work", "1.0.0")])
    sid = session["worker_session_id"]
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
    clock.advance(3500)  # silent past the session timeout
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    for call in (lambda: engine.workers.poll(sid, 0), lambda: engine.workers.heartbeat(sid)):
        with pytest.raises(NotFoundError) as caught:
            call()
        assert caught.value.code == "UNKNOWN_SESSION"
        assert caught.value.message == "unknown or expired worker session; register again"
    # Registering again is the way back.
    fresh = engine.workers.register("w", "python", [("demo.work", "1.0.0")])
    task = engine.workers.poll(fresh["worker_session_id"], 0)
    assert task is not None and task["execution_id"] == "p-1"
    engine.close()


def test_a_session_past_its_timeout_is_expired_before_a_tick_finds_it() -> None:
    clock = SimulatedClock()
    engine = simulated_engine(clock=clock, session_timeout_ms=3000)
    engine.deploy(plain())
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    sid = engine.workers.register("w", "python", [("demo.work", "1.0.0")])["worker_session_id"]
    # Time moves without a tick (the ticker is behind): the session is
    # silent past its timeout all the same.
    with clock._lock:
        clock._now += 3500
    with pytest.raises(NotFoundError):
        engine.workers.poll(sid, 0)
    engine.close()
