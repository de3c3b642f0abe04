"""The engine survives its own faults (issue 12): a group that fails while it
is prepared leaves memory as the store has it and fails only the command that
raised; the ticker, the committer and the handler threads outlive unexpected
exceptions; a failing store is retried with backoff, not hammered; every
failure is reported through the `Faults` port."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from engine_kit import Int, inp, obj, plain, rec, step, workflow

from orbit_core import decide as decide_module
from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.engine import executions as executions_module
from orbit_core.engine.backoff import Backoff
from orbit_core.errors import NotFoundError, OrbitError, StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch, FaultLog
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine


class SwitchableStore(MemoryStore):
    """A store whose commits fail while `failing` is set; counts attempts."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.attempts = 0

    def commit(self, batch: CommitBatch) -> None:
        self.attempts += 1
        if self.failing:
            raise OSError("disk I/O error (test)")
        super().commit(batch)


def poison(monkeypatch: pytest.MonkeyPatch, ids: set[str]) -> None:
    """Makes the decider raise for the executions whose id is in `ids`."""
    real = decide_module.decide

    def flaky(state: Any, plan: Any, now: int, limits: Any) -> Any:
        if state.id in ids:
            raise RuntimeError("decider bug (test)")
        return real(state, plan, now, limits)

    monkeypatch.setattr(executions_module, "decide", flaky)


def once(fn: Callable[..., Any], error: BaseException) -> Callable[..., Any]:
    """`fn`, except that its first call raises `error`."""
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            raise error
        return fn(*args, **kwargs)

    return wrapped


def eventually(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.002)


def in_one_group(engine: Engine, *calls: Callable[[], Any]) -> list[Any]:
    """Runs the calls on threads so that they form one group: a first command
    holds the lead until every call is pending. Each result is the call's
    return value or the exception it raised."""
    pipeline = engine._pipeline
    gate = threading.Event()
    blocker = threading.Thread(target=lambda: pipeline.submit(lambda tx: gate.wait(5)))
    blocker.start()
    eventually(lambda: pipeline._leading)
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for th in threads:
        th.start()
    eventually(lambda: len(pipeline._pending) == len(calls))
    gate.set()
    for th in [blocker, *threads]:
        th.join(timeout=10)
        assert not th.is_alive()
    return results


def sleeper() -> Any:
    return workflow(
        "Nap",
        [step("nap", "sleep", sleep_ms=50)],
        [],
        input=rec(n=(Int, 0)),
    )


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


def reopen(store: MemoryStore, engine: Engine) -> Engine:
    """A new engine on the same store, as after a restart."""
    return simulated_engine(store, SimulatedClock(engine.clock.now_ms()), ids=SequentialIds())


# ---- 1. a group that fails while prepared


def test_a_failed_group_leaves_memory_as_the_store_has_it(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = simulated_engine(store)
    engine.deploy(plain())
    bad = {"p-1"}
    poison(monkeypatch, bad)
    with pytest.raises(OrbitError) as info:
        engine.start("Plain", input={"n": 1}, execution_id="p-1")
    assert info.value.code == "INTERNAL"
    with pytest.raises(NotFoundError):
        engine.get("p-1")
    assert store.execution_row("p-1") is None
    bad.clear()
    # The retried start creates it: nothing of the failed one was kept.
    assert engine.start("Plain", input={"n": 1}, execution_id="p-1")["created"] is True
    again = reopen(store, engine)
    assert again.get("p-1") == engine.get("p-1")
    again.close()
    engine.close()


@pytest.mark.parametrize("pipeline", [False, True], ids=["inline", "committer-thread"])
def test_one_failing_command_fails_only_its_caller(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, pipeline: bool
) -> None:
    engine = Engine(store, handler_threads=0, auto_tick=False, pipeline=pipeline)
    engine.deploy(plain())
    poison(monkeypatch, {"bad"})
    bad, good = in_one_group(
        engine,
        lambda: engine.start("Plain", input={"n": 1}, execution_id="bad"),
        lambda: engine.start("Plain", input={"n": 2}, execution_id="good"),
    )
    assert isinstance(bad, OrbitError) and bad.code == "INTERNAL"
    assert isinstance(bad.__cause__, RuntimeError)
    assert good == {"execution_id": "good", "created": True}
    assert store.execution_row("bad") is None
    assert store.execution_row("good") is not None
    faults = engine.faults.counts()
    assert faults.get("command") == 1
    assert "command" not in engine.faults.failing()  # a one-off, handled
    engine.close()


@pytest.mark.parametrize("pipeline", [False, True], ids=["inline", "committer-thread"])
def test_a_poll_in_a_failed_group_runs_again_and_its_task_is_durable(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, pipeline: bool
) -> None:
    engine = Engine(store, handler_threads=0, auto_tick=False, pipeline=pipeline)
    engine.deploy(plain())
    session = engine.workers.register("w", "python", [("demo.work", "1.0.0")])
    engine.start("Plain", input={"n": 1}, execution_id="queued")
    poison(monkeypatch, {"bad"})
    polled, bad = in_one_group(
        engine,
        lambda: engine.workers.poll(session["worker_session_id"], 0),
        lambda: engine.start("Plain", input={"n": 2}, execution_id="bad"),
    )
    assert isinstance(bad, OrbitError)
    assert polled["execution_id"] == "queued"
    history = store.history("queued") or []
    dispatched = history[-1]
    assert isinstance(dispatched, ev.StepDispatched)
    assert dispatched.token == polled["token"]
    engine.close()


@pytest.mark.parametrize("pipeline", [False, True], ids=["inline", "committer-thread"])
def test_a_long_poll_claimed_by_a_failed_group_ends_and_the_task_waits(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, pipeline: bool
) -> None:
    engine = Engine(store, handler_threads=0, auto_tick=False, pipeline=pipeline)
    engine.deploy(plain())
    session = engine.workers.register("w", "python", [("demo.work", "1.0.0")])["worker_session_id"]
    answer: list[Any] = []
    poller = threading.Thread(target=lambda: answer.append(engine.workers.poll(session, 5000)))
    poller.start()
    eventually(lambda: engine._polling.waiting)
    # The group fails after its commands ran (and the poll was claimed).
    monkeypatch.setattr(
        engine._executions,
        "stamp_rows",
        once(engine._executions.stamp_rows, RuntimeError("row bug")),
    )
    with pytest.raises(OrbitError) as info:
        engine.start("Plain", input={"n": 1}, execution_id="p-1")
    assert info.value.code == "INTERNAL"
    poller.join(timeout=2)
    assert not poller.is_alive()
    assert answer == [None]
    assert store.execution_row("p-1") is None
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    task = engine.workers.poll(session, 0)
    assert task is not None and task["execution_id"] == "p-1"
    assert engine.faults.counts() == {"prepare": 1}
    engine.close()


def test_an_undone_group_keeps_the_count_of_running_executions() -> None:
    store = SwitchableStore()
    engine = simulated_engine(store, max_active_executions=2)
    engine.deploy(plain())
    engine.start("Plain", input={"n": 1}, execution_id="a")
    store.failing = True
    with pytest.raises(StorageError):
        engine.cancel("a")
    store.failing = False
    engine.cancel("a")
    engine.start("Plain", input={"n": 1}, execution_id="b")
    engine.start("Plain", input={"n": 1}, execution_id="c")
    engine.close()


def test_a_child_start_whose_commit_failed_is_started_again() -> None:
    from engine_kit import child_contract, task

    store = SwitchableStore()
    engine = simulated_engine(store)
    kid = workflow(
        "Kid",
        [step("work", task="kid.work", with_=obj(n=inp("n")))],
        [task("kid.work", rec(n=Int), rec(ok=Int))],
        input=rec(n=(Int, 0)),
    )
    engine.deploy(kid)
    engine.deploy(
        workflow(
            "Boss", [step("run", "workflow", workflow="Kid", with_=obj(n=1))], [child_contract(kid)]
        )
    )
    engine.start("Boss", execution_id="b")
    store.failing = True
    with contextlib.suppress(StorageError):
        engine.clock.advance(100)  # type: ignore[attr-defined]
    assert store.execution_row("b.run") is None
    store.failing = False
    for _ in range(3):
        engine.clock.advance(100)  # type: ignore[attr-defined]
    assert engine.get("b.run")["status"] == "RUNNING"
    assert engine.get("b")["units"]["run"]["status"] == "DISPATCHED"
    engine.close()


# ---- 2. background threads outlive unexpected exceptions


def test_the_ticker_outlives_an_exception_in_a_tick(store: MemoryStore) -> None:
    engine = Engine(store, handler_threads=0)
    try:
        engine.deploy(sleeper())
        engine._tick = once(engine._tick, RuntimeError("tick bug"))  # type: ignore[method-assign]
        engine.start("Nap", execution_id="n-1")
        assert engine.wait("n-1", 5000)["status"] == "COMPLETED"
        assert engine.faults.counts().get("tick") == 1
    finally:
        engine.close()


def test_the_ticker_outlives_an_exception_outside_the_pipeline(store: MemoryStore) -> None:
    engine = Engine(store, handler_threads=0)
    try:
        engine.deploy(sleeper())
        engine.tick = once(engine.tick, RuntimeError("ticker bug"))  # type: ignore[method-assign]
        engine.start("Nap", execution_id="n-1")
        assert engine.wait("n-1", 5000)["status"] == "COMPLETED"
        assert engine.faults.counts().get("tick") == 1
        eventually(lambda: "tick" not in engine.faults.failing())
    finally:
        engine.close()


def test_an_execution_whose_decision_raises_does_not_stop_other_timers(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = simulated_engine(store)
    engine.deploy(sleeper())
    engine.start("Nap", execution_id="bad")
    engine.start("Nap", execution_id="good")
    poison(monkeypatch, {"bad"})
    for _ in range(5):
        engine.clock.advance(100)  # type: ignore[attr-defined]
    assert engine.get("good")["status"] == "COMPLETED"
    assert engine.get("bad")["status"] == "RUNNING"
    assert engine.faults.counts()["tick"] >= 1
    monkeypatch.undo()
    for _ in range(30):
        engine.clock.advance(100)  # type: ignore[attr-defined]
    assert engine.get("bad")["status"] == "COMPLETED"
    engine.close()


def test_a_handler_thread_outlives_an_exception_and_hands_its_tasks_back(
    store: MemoryStore,
) -> None:
    engine = Engine(store, handler_threads=1, auto_tick=False, random=random.Random(1))
    try:
        engine.deploy(plain())
        handlers = engine._handlers
        handlers._run_batch = once(  # type: ignore[method-assign]
            handlers._run_batch, RuntimeError("handler loop bug")
        )
        engine.register_handler("demo.work", "1.0.0", lambda i: {"ok": True})
        engine.start("Plain", input={"n": 1}, execution_id="h-1")
        assert engine.wait("h-1", 5000)["status"] == "COMPLETED"
        assert engine.faults.counts() == {"handler": 1}
        events = [type(e).__name__ for e in engine.events("h-1")]
        assert "StepAttemptUncertain" in events  # the claimed task was redelivered
    finally:
        engine.close()


def test_the_committer_thread_outlives_an_exception_while_publishing(
    store: MemoryStore,
) -> None:
    engine = Engine(store, handler_threads=0, auto_tick=False, pipeline=True)
    quick = workflow("Quick", [step("c", "compute", compute=obj(v=1))], [])
    engine.deploy(quick)
    pipeline = engine._pipeline
    pipeline._publish = once(pipeline._publish, RuntimeError("publish bug"))
    answers: list[Any] = []
    caller = threading.Thread(
        target=lambda: answers.append(engine.start("Quick", execution_id="q-1"))
    )
    caller.start()
    caller.join(timeout=5)
    assert not caller.is_alive()
    assert answers == [{"execution_id": "q-1", "created": True}]  # it is durable
    assert engine.start("Quick", execution_id="q-2")["created"] is True
    assert engine.get("q-2")["status"] == "COMPLETED"
    assert engine.faults.counts() == {"commit": 1}
    engine.close()


# ---- 3. a failing store is retried with backoff


def test_a_failing_store_is_retried_with_backoff_not_hammered() -> None:
    store = SwitchableStore()
    engine = Engine(store, handler_threads=2, auto_tick=False, random=random.Random(7))
    try:
        engine.deploy(plain())
        gate = threading.Event()

        def handler(value: Any) -> Any:
            gate.wait(5)
            return {"ok": True}

        engine.register_handler("demo.work", "1.0.0", handler)
        engine.start("Plain", input={"n": 1}, execution_id="s-1")
        eventually(lambda: engine.get("s-1")["units"]["work"]["status"] == "DISPATCHED")
        store.failing = True
        before = store.attempts
        gate.set()
        time.sleep(0.4)  # measures a rate: how often a result is retried
        attempts = store.attempts - before
        assert 1 <= attempts < 20, attempts
        assert "store" in engine.faults.failing()
        store.failing = False
        assert engine.wait("s-1", 5000)["status"] == "COMPLETED"
        assert "store" not in engine.faults.failing()
    finally:
        engine.close()


def test_a_storage_error_keeps_the_stores_exception_as_its_cause() -> None:
    store = SwitchableStore()
    engine = simulated_engine(store)
    engine.deploy(plain())
    store.failing = True
    with pytest.raises(StorageError) as info:
        engine.start("Plain", input={"n": 1}, execution_id="c-1")
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.message == "disk I/O error (test)"
    assert engine.faults.failing() == {"store": "OSError: disk I/O error (test)"}
    assert isinstance(engine.faults, FaultLog)
    assert isinstance(engine.faults.last["store"], OSError)
    engine.close()


def test_backoff_doubles_with_jitter_up_to_its_cap() -> None:
    backoff = Backoff(random.Random(3), first_s=0.01, cap_s=0.1)
    delays = [backoff.next_s() for _ in range(8)]
    ceilings = [0.01, 0.02, 0.04, 0.08, 0.1, 0.1, 0.1, 0.1]
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling
    same = Backoff(random.Random(3), first_s=0.01, cap_s=0.1)
    assert [same.next_s() for _ in range(8)] == delays  # a seeded source repeats
    backoff.reset()
    assert backoff.next_s() <= 0.01
