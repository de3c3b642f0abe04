"""A result and the poll it carries as one command (`result-then-poll`,
engine/worker_desk.py): the result is answered exactly as alone, the poll
as alone, and both are durable in ONE commit. Simulated time; a parked poll
runs on a second thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from engine_kit import Worker, plain

from orbit_core import events as ev
from orbit_core.engine import Engine, PollAfter, Reported
from orbit_core.errors import OrbitError
from orbit_core.testing import simulated_engine

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def engine() -> Iterator[Engine]:
    eng = simulated_engine()
    eng.deploy(plain())
    yield eng
    eng.close()


def kinds(engine: Engine, execution_id: str) -> list[str]:
    return [type(e).__name__ for e in engine.events(execution_id)]


def test_a_result_and_its_poll_are_one_commit(engine: Engine) -> None:
    worker = Worker(engine, "w", ["demo.work"])
    for n in (1, 2):
        engine.start("Plain", input={"n": n}, execution_id=f"p-{n}")
    first = worker.take()
    commits = engine.counters.commits
    reported = engine.workers.complete_then_poll(
        first["token"], {"ok": True}, PollAfter(worker.session, 0)
    )
    assert engine.counters.commits == commits + 1  # two before: the result's, then the poll's
    assert reported.ack == {"accepted": True} and reported.error is None
    assert reported.task is not None and reported.task["execution_id"] == "p-2"
    assert engine.get("p-1")["status"] == "COMPLETED"
    assert kinds(engine, "p-2")[-1] == "StepDispatched"
    assert worker.ok(reported.task, {"ok": True}) == {"accepted": True}


def test_the_answers_are_those_of_the_two_calls(engine: Engine) -> None:
    """A duplicate result is answered as alone and its poll still made; no
    task within the wait is None; a poll's refusal comes back beside the
    result, which stands."""
    worker = Worker(engine, "w", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    task = worker.take()
    done = engine.workers.complete_then_poll(
        task["token"], {"ok": True}, PollAfter(worker.session, 0)
    )
    assert done == Reported({"accepted": True})
    engine.start("Plain", input={"n": 2}, execution_id="p-2")
    again = engine.workers.complete_then_poll(
        task["token"], {"ok": True}, PollAfter(worker.session, 0)
    )
    assert again.ack == {
        "accepted": False,
        "reason": "unknown token (execution finished or token invalid)",
    }
    assert again.task is not None and again.task["execution_id"] == "p-2"
    lost = engine.workers.complete_then_poll(
        again.task["token"], {"ok": True}, PollAfter("nobody", 0)
    )
    assert lost.ack == {"accepted": True} and lost.task is None
    assert isinstance(lost.error, OrbitError) and lost.error.code == "UNKNOWN_SESSION"
    assert engine.get("p-2")["status"] == "COMPLETED"


def test_a_refused_result_takes_no_task(engine: Engine) -> None:
    worker = Worker(engine, "w", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    held = worker.take()
    engine.start("Plain", input={"n": 2}, execution_id="p-2")
    with pytest.raises(OrbitError) as refused:
        engine.workers.complete_then_poll("", {"ok": True}, PollAfter(worker.session, 0))
    assert refused.value.code == "INVALID_REQUEST"
    # A token issued to another worker than the one the caller is bound to.
    with pytest.raises(OrbitError) as forbidden:
        engine.workers.fail_then_poll(
            held["token"], "E", "m", True, None, poll=PollAfter(worker.session, 0), worker="x"
        )
    assert forbidden.value.code == "FORBIDDEN"
    assert "StepDispatched" not in kinds(engine, "p-2")
    assert worker.take()["execution_id"] == "p-2"


def test_a_failure_then_poll(engine: Engine) -> None:
    worker = Worker(engine, "w", ["demo.work"])
    for n in (1, 2):
        engine.start("Plain", input={"n": n}, execution_id=f"p-{n}")
    task = worker.take()
    reported = engine.workers.fail_then_poll(
        task["token"], "BROKEN", "no", False, None, poll=PollAfter(worker.session, 0)
    )
    assert reported.ack == {"accepted": True}
    assert reported.task is not None and reported.task["execution_id"] == "p-2"
    assert engine.get("p-1")["status"] == "FAILED"


def test_a_poll_that_waits_gets_the_next_task(engine: Engine) -> None:
    """The result is durable before the poll parks; a later start's task
    reaches the parked poll."""
    worker = Worker(engine, "w", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    task = worker.take()
    found: list[Reported] = []

    def report() -> None:
        after = PollAfter(worker.session, 10_000)
        found.append(engine.workers.complete_then_poll(task["token"], {"ok": True}, after))

    thread = threading.Thread(target=report)
    thread.start()
    deadline = time.monotonic() + 5
    while engine.get("p-1")["status"] != "COMPLETED":
        assert time.monotonic() < deadline, "the result was not recorded"
        time.sleep(0.01)
    assert thread.is_alive()
    engine.start("Plain", input={"n": 2}, execution_id="p-2")
    thread.join(timeout=5)
    (reported,) = found
    assert reported.ack == {"accepted": True}
    assert reported.task is not None and reported.task["execution_id"] == "p-2"
    assert [e for e in engine.events("p-2") if isinstance(e, ev.StepDispatched)]


def test_a_shared_server_makes_the_two_calls_in_turn() -> None:
    """A shared server's desk reports the result (it may go to another
    server) and then polls (the shared queue too): the same answers."""
    from test_shared_claims import CONTRACTS, _rounds, _server

    shared, _, _ = _server()
    try:
        session = shared.workers.register("w", "python", CONTRACTS)["worker_session_id"]
        for n in (0, 1):  # (no sleep before the task below 2)
            shared.start("Leaf", None, {"n": n}, f"e{n}")
        first = shared.workers.poll(session, 0)
        assert first is not None
        _rounds(shared)  # the other task goes to the shared queue
        reported = shared.workers.complete_then_poll(
            first["token"], {"v": 1}, PollAfter(session, 0)
        )
        assert reported.ack == {"accepted": True} and reported.error is None
        assert reported.task is not None and reported.task["execution_id"] != first["execution_id"]
        lost = shared.workers.fail_then_poll(
            reported.task["token"], "E", "m", False, None, poll=PollAfter("nobody", 0)
        )
        assert lost.ack == {"accepted": True} and lost.task is None
        assert lost.error is not None and lost.error.code == "UNKNOWN_SESSION"
    finally:
        shared.close()
