"""Long polls and session liveness (chapters 32, 39, 42 and 68): a worker
waiting in a parked poll is connected, not silent; a poll whose worker hung
up gets no task; an assignment that never reached its worker is redelivered
at once. Simulated time, a real poll on a second thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from engine_kit import Worker, plain, timeline

from orbit_core import events as ev
from orbit_core.api import Assignment
from orbit_core.engine import Engine
from orbit_core.testing import SimulatedClock, simulated_engine

TIMEOUT_MS = 5000


@pytest.fixture
def engine() -> Iterator[Engine]:
    eng = simulated_engine(session_timeout_ms=TIMEOUT_MS)
    eng.deploy(plain())
    yield eng
    eng.close()


def advance(engine: Engine, ms: int, step_ms: int = 100) -> None:
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
    for _ in range(ms // step_ms):
        clock.advance(step_ms)


class ParkedPoll:
    """A long poll on its own thread (it parks within microseconds; the test
    gives it a generous moment), with the transport's liveness probe the
    test controls."""

    def __init__(self, engine: Engine, worker: Worker, wait_ms: int = 10_000) -> None:
        self.engine = engine
        self.alive = True
        self.result: Assignment | None = None
        self.thread = threading.Thread(target=self._poll, args=(worker.session, wait_ms))
        self.thread.start()
        time.sleep(0.2)
        assert self.thread.is_alive(), "the poll did not park"

    def connected(self) -> bool:
        return self.alive

    def _poll(self, session: str, wait_ms: int) -> None:
        self.result = self.engine.workers.poll(session, wait_ms, self.connected)

    def answer(self) -> Assignment | None:
        self.thread.join(timeout=5)
        assert not self.thread.is_alive(), "the poll was not answered"
        return self.result


def test_a_worker_waiting_in_a_long_poll_is_not_silent(engine: Engine) -> None:
    """Four session timeouts pass while the worker holds a task and waits in
    a poll without heartbeating: its session and its attempt live on."""
    worker = Worker(engine, "patient", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    first = worker.take()
    poll = ParkedPoll(engine, worker)
    advance(engine, 4 * TIMEOUT_MS + 1000, step_ms=1000)
    engine.start("Plain", input={"n": 2}, execution_id="p-2")
    second = poll.answer()
    assert second is not None and second["execution_id"] == "p-2"
    assert worker.ok(first, {"ok": True}) == {"accepted": True}
    assert worker.ok(second, {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == engine.get("p-2")["status"] == "COMPLETED"
    assert not [e for e in engine.events("p-1") if isinstance(e, ev.StepAttemptUncertain)]
    (row,) = engine.workers.list()["workers"]
    assert (row["online"], row["sessions"]) == (True, 1)


def test_silence_counts_from_the_end_of_a_poll(engine: Engine) -> None:
    worker = Worker(engine, "flaky-1", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="u-1")
    worker.take()
    poll = ParkedPoll(engine, worker, wait_ms=1000)
    advance(engine, 3 * TIMEOUT_MS, step_ms=1000)
    assert poll.answer() is None
    advance(engine, TIMEOUT_MS - 500)
    assert len(engine.events("u-1")) == 4
    advance(engine, 1000)
    assert timeline(engine, "u-1")[4] == (
        "StepAttemptUncertain step=work attempt=1 reason=worker `flaky-1` stopped responding"
    )


def test_a_worker_that_hung_up_during_its_poll_is_still_found_silent(engine: Engine) -> None:
    worker = Worker(engine, "flaky-1", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="u-1")
    worker.take()
    poll = ParkedPoll(engine, worker)
    poll.alive = False
    started = time.monotonic()
    advance(engine, 5100)
    # The tick ended the poll at once rather than after its 10 s wait.
    assert poll.answer() is None
    assert time.monotonic() - started < 5
    assert timeline(engine, "u-1")[4:6] == [
        "StepAttemptUncertain step=work attempt=1 reason=worker `flaky-1` stopped responding",
        "StepScheduled step=work attempt=1 redelivery=true",
    ]


def test_a_task_is_not_handed_to_a_poll_whose_worker_hung_up(engine: Engine) -> None:
    gone = Worker(engine, "gone", ["demo.work"])
    alive = Worker(engine, "alive", ["demo.work"])
    gone_poll = ParkedPoll(engine, gone)
    alive_poll = ParkedPoll(engine, alive)
    # No tick comes between the hang-up and the task: the hand-over checks.
    gone_poll.alive = False
    engine.start("Plain", input={"n": 2}, execution_id="u-2")
    assert gone_poll.answer() is None
    handed = alive_poll.answer()
    assert handed is not None and handed["execution_id"] == "u-2"
    dispatched = [e for e in engine.events("u-2") if isinstance(e, ev.StepDispatched)]
    assert [e.worker_id for e in dispatched] == ["alive"]


def test_an_assignment_that_never_reached_its_worker_is_redelivered_at_once(
    engine: Engine,
) -> None:
    lost = Worker(engine, "lost", ["demo.work"])
    engine.start("Plain", input={"n": 3}, execution_id="u-3")
    first = lost.take()
    engine.workers.undelivered(first["token"])
    assert timeline(engine, "u-3")[4:6] == [
        "StepAttemptUncertain step=work attempt=1 reason=worker `lost` never received the task",
        "StepScheduled step=work attempt=1 redelivery=true",
    ]
    # The session holds it no longer: no cancellation is sent for it.
    assert lost.heartbeat() == []
    again = lost.take()
    assert (again["attempt"], again["redelivery"]) == (1, True)
    assert lost.ok(again, {"ok": True}) == {"accepted": True}
    assert engine.get("u-3")["status"] == "COMPLETED"
    # Only the attempt in flight is affected: a second call changes nothing.
    engine.workers.undelivered(first["token"])
    engine.workers.undelivered(again["token"])
    assert len(engine.events("u-3")) == 9


def test_drain_ends_parked_polls_and_waits_at_once() -> None:
    """A server shutting down drains the engine: nothing parked holds it."""
    import threading
    import time

    from engine_kit import step, task, workflow

    from orbit_core.engine import Engine

    engine = Engine()
    try:
        engine.deploy(workflow("Drain", [step("s", task="d.t")], [task("d.t")]))
        engine.start("Drain", execution_id="d-1")
        session = engine.workers.register("w", "python", [("other.t", "1.0.0")])[
            "worker_session_id"
        ]
        answers: dict[str, object] = {}
        threads = [
            threading.Thread(
                target=lambda: answers.__setitem__("poll", engine.workers.poll(session, 60_000))
            ),
            threading.Thread(
                target=lambda: answers.__setitem__("wait", engine.wait("d-1", 300_000))
            ),
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 5
        while not (engine._polling._pollers and engine._reads._waiters.get("d-1")):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        started = time.monotonic()
        engine.drain()
        for thread in threads:
            thread.join(5)
        assert time.monotonic() - started < 1
        assert answers["poll"] is None
        assert answers["wait"]["status"] == "RUNNING"  # type: ignore[index]
        # Later ones do not park either.
        started = time.monotonic()
        assert engine.workers.poll(session, 60_000) is None
        assert engine.wait("d-1", 300_000)["status"] == "RUNNING"
        assert time.monotonic() - started < 1
    finally:
        engine.close()


def test_a_poll_ends_with_its_session_and_does_not_outlast_a_drain(engine: Engine) -> None:
    """Issue 36: a worker that unregistered while its poll was parked (an SDK
    stopping) left the poll waiting out its wait: the tick dropped it from
    the queue without answering it, so the drain of a stopping server no
    longer saw it either. It ends at the next tick, with no task."""
    worker = Worker(engine, "leaving", ["demo.work"])
    poll = ParkedPoll(engine, worker, wait_ms=60_000)
    engine.workers.unregister(worker.session)
    started = time.monotonic()
    advance(engine, 200)
    engine.drain()
    assert poll.answer() is None
    assert time.monotonic() - started < 5


def test_parked_polls_of_one_kind_look_for_a_task_once_when_none_is_left(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight workers of one kind park a poll each; a start queues one task.
    The group that queues it hands it to one poll and, the queue being dry
    again, asks the index once more for all seven others (it asked once
    per poll before: a cost per group that grew with the parked polls)."""
    workers = [Worker(engine, f"same-{i}", ["demo.work"]) for i in range(8)]
    polls = [ParkedPoll(engine, worker) for worker in workers]
    index = engine._executions.index
    asked: list[object] = []
    has = index.has

    def counted(*args: object, **kwargs: object) -> bool:
        asked.append(args)
        return has(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(index, "has", counted)
    engine.start("Plain", input={"n": 1}, execution_id="once-1")
    answered = [poll for poll in polls if not poll.thread.is_alive() or poll.result is not None]
    deadline = time.monotonic() + 5
    while not answered and time.monotonic() < deadline:
        time.sleep(0.01)
        answered = [poll for poll in polls if poll.result is not None]
    assert len(answered) == 1
    assert len(asked) == 2
