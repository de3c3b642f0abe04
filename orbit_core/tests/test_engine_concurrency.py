"""The engine under real threads: group commit with leadership handed from
caller to caller, and in-process handlers claiming and reporting in batches."""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from engine_kit import Int, inp, obj, rec, ref, step, task, workflow

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.api import Assignment
from orbit_core.dispatch import QueuedTask, TaskIndex
from orbit_core.engine import Engine, TaskError
from orbit_core.engine.commands import Command, Tx
from orbit_core.engine.counters import Counters
from orbit_core.engine.handlers import MAX_BATCH, _batch_size
from orbit_core.engine.pipeline import Group, GroupCommit
from orbit_core.errors import OrbitError, StorageError
from orbit_core.jsontypes import JsonValue
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch, FaultLog


def chain(steps: int = 3) -> ir.Definition:
    """`s0` adds one to the input, each next step adds one to the previous."""
    chained = [step("s0", task="math.inc", with_=obj(n=inp("n")))]
    for i in range(1, steps):
        chained.append(step(f"s{i}", task="math.inc", with_=obj(n=ref(f"s{i - 1}", "n"))))
    return workflow(
        "Chain",
        chained,
        [task("math.inc", rec(n=Int), rec(n=Int))],
        input=rec(n=Int),
        output=rec(n=Int),
        result=obj(n=ref(f"s{steps - 1}", "n")),
    )


def run_threads(count: int, target: Any) -> None:
    threads = [threading.Thread(target=target, args=(k,)) for k in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
        assert not th.is_alive()


@pytest.fixture(params=[False, True], ids=["inline", "committer-thread"])
def engine(request: Any) -> Iterator[Engine]:
    eng = Engine(MemoryStore(), handler_threads=3, auto_tick=False, pipeline=request.param)
    yield eng
    eng.close()


def test_handler_threads_serve_concurrent_starts(engine: Engine) -> None:
    engine.deploy(chain())
    engine.register_handler("math.inc", "1.0.0", lambda i: {"n": i["n"] + 1})

    def starter(k: int) -> None:
        for i in range(50):
            engine.start("Chain", input={"n": i}, execution_id=f"c-{k}-{i}")

    run_threads(8, starter)
    for k in range(8):
        for i in range(50):
            state = engine.wait(f"c-{k}-{i}", 10_000)
            assert (state["status"], state["output"]) == ("COMPLETED", {"n": i + 3})
    # 400 starts and 1200 steps: commands were grouped and tasks claimed in batches.
    assert engine.counters.commits < 1600


def test_handler_failures_are_reported_per_task_within_a_batch(engine: Engine) -> None:
    engine.deploy(chain(1))

    def handler(value: dict[str, Any]) -> dict[str, Any]:
        if value["n"] % 3 == 1:
            raise TaskError("ODD", "not this one", retryable=False)
        if value["n"] % 3 == 2:
            raise ValueError("broken")
        return {"n": value["n"]}

    engine.register_handler("math.inc", "1.0.0", handler)
    for i in range(30):
        engine.start("Chain", input={"n": i}, execution_id=f"f-{i}")
    for i in range(30):
        state = engine.wait(f"f-{i}", 10_000)
        if i % 3 == 0:
            assert (state["status"], state["output"]) == ("COMPLETED", {"n": i})
            continue
        assert state["status"] == "FAILED"
        events: list[Any] = engine.history(f"f-{i}")["events"]  # JSON
        failed = [e for e in events if e["type"] == "StepAttemptFailed"]
        assert len(failed) == 1  # no retry policy
        if i % 3 == 1:
            assert failed[0]["error"]["code"] == "ODD"
        else:
            assert failed[0]["error"]["code"] == "UNHANDLED_EXCEPTION"
            assert "ValueError: broken" in failed[0]["error"]["message"]


def test_every_caller_is_answered_when_many_threads_share_the_lead(engine: Engine) -> None:
    engine.deploy(chain(1))
    worker = engine.workers.register("w", "python", [("math.inc", "1.0.0")])
    session = worker["worker_session_id"]
    answered = []
    lock = threading.Lock()

    def client(k: int) -> None:
        for i in range(40):
            eid = f"l-{k}-{i}"
            engine.start("Chain", input={"n": i}, execution_id=eid)
            engine.get(eid)
            task_ = engine.workers.poll(session, 0)
            if task_ is not None:
                given: Any = task_["input"]  # JSON
                engine.workers.complete(task_["token"], {"n": given["n"] + 1})
            with lock:
                answered.append(eid)

    run_threads(16, client)
    assert len(answered) == 16 * 40
    assert engine.health()["started"] == 16 * 40


def test_batch_size_follows_the_time_handlers_take() -> None:
    assert _batch_size(0.0) == MAX_BATCH
    assert _batch_size(1e-6) == MAX_BATCH
    assert _batch_size(0.0005) == 4
    assert _batch_size(0.5) == 1


def _same(n: int, tx: object) -> int:
    return n


def _inline_pipeline() -> GroupCommit:
    """A group commit whose batches run their commands on one Tx and commit nothing."""

    def prepare(batch: list[Command]) -> Group:
        tx = Tx(0)
        for cmd in batch:
            cmd.run(tx)
        return Group(tx, CommitBatch(), batch)

    return GroupCommit(
        MemoryStore(),
        Counters(),
        prepare=prepare,
        publish=lambda tx: None,
        rollback=lambda tx: None,
        threaded=False,
        faults=FaultLog(),
    )


def test_a_failing_prepare_fails_its_callers_and_frees_the_lead() -> None:
    pipeline = _inline_pipeline()

    def broken(tx: Tx) -> Any:
        raise ZeroDivisionError

    with pytest.raises(OrbitError) as info:
        pipeline.submit(broken)
    assert info.value.code == "INTERNAL"
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert pipeline.submit(lambda tx: "next") == "next"


def test_the_task_index_tells_whether_a_valid_task_is_queued() -> None:
    index = TaskIndex()
    index.push(("t", "1"), None, "e-1", "a", 1)
    index.push(("t", "1"), "go", "e-2", "a", 1)

    def only_e2(task: QueuedTask) -> bool:
        return task.execution_id == "e-2"

    assert not index.has([("t", "1")], "python", only_e2)
    assert index.has([("t", "1")], "go", only_e2)
    popped = index.pop([("t", "1")], "go", only_e2)
    assert popped is not None and popped.execution_id == "e-2"
    assert not index.has([("t", "1")], "go", only_e2)


@pytest.mark.timeout(60)
def test_the_lead_passes_safely_under_frequent_thread_switches() -> None:
    """A caller handed the lead while it is about to wait must still lead
    (a hand-off racing the caller's wait once left every caller waiting)."""
    import sys

    pipeline = _inline_pipeline()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        results: list[int] = []

        def caller(k: int) -> None:
            for i in range(200):
                results.append(pipeline.submit(functools.partial(_same, k * 1000 + i)))

        run_threads(32, caller)
    finally:
        sys.setswitchinterval(interval)
    assert sorted(results) == sorted(k * 1000 + i for k in range(32) for i in range(200))


class ResultsFailToCommit(MemoryStore):
    """Fails the first commits that carry task results."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def commit(self, batch: CommitBatch) -> None:
        carries_results = any(
            type(e) is ev.StepSucceeded for change in batch.executions for e in change.events
        )
        if carries_results and self.failures:
            self.failures -= 1
            raise OSError("disk I/O error")
        super().commit(batch)


def test_handler_results_whose_commit_failed_are_reported_again() -> None:
    store = ResultsFailToCommit(failures=3)
    engine = Engine(store, handler_threads=2, auto_tick=False)
    try:
        engine.deploy(chain())
        engine.register_handler("math.inc", "1.0.0", lambda i: {"n": i["n"] + 1})

        def retried(call: Any) -> Any:
            # Any caller whose group shares the failed commit gets STORAGE_ERROR.
            for _ in range(10):
                try:
                    return call()
                except StorageError:
                    continue
            raise AssertionError("still failing")

        for i in range(40):
            retried(lambda i=i: engine.start("Chain", input={"n": i}, execution_id=f"r-{i}"))
        for i in range(40):
            state = retried(lambda i=i: engine.wait(f"r-{i}", 10_000))
            assert (state["status"], state["output"]) == ("COMPLETED", {"n": i + 3})
        assert store.failures == 0
    finally:
        engine.close()


def test_a_slow_batch_reports_what_is_done_as_it_goes() -> None:
    import time

    from orbit_core.engine.handlers import Handlers

    class Registrar:
        def register_local(self, *args: Any) -> str:
            return "s-1"

    exchanged: list[list[Any]] = []

    def exchange(sid: str, reports: list[Any], limit: int, wait_ms: int) -> list[Any]:
        exchanged.append(list(reports))
        return []

    handlers = Handlers(
        host=Registrar(),  # type: ignore[arg-type]
        exchange=exchange,
        threads=0,
        spawn=lambda target, name: None,
        stop=threading.Event(),
        faults=FaultLog(),
        random=random.Random(0),
    )

    def slow(given: JsonValue) -> JsonValue:
        time.sleep(0.003)
        return {}

    handlers.register("slow.task", "1.0.0", slow, "python")
    tasks = [
        Assignment(
            token=f"t-{i}",
            execution_id=f"e-{i}",
            workflow="W",
            workflow_version="1.0.0",
            step_id="s",
            task_name="slow.task",
            contract_version="1.0.0",
            input={},
            idempotency_key=None,
            attempt=1,
            redelivery=False,
        )
        for i in range(5)
    ]
    reports: list[Any] = []
    per_task = handlers._run_batch("s-1", tasks, reports)
    # Every task outlasts the budget: each result but the last went out at once.
    assert [[r[0] for r in batch] for batch in exchanged] == [["t-0"], ["t-1"], ["t-2"], ["t-3"]]
    assert [r[0] for r in reports] == ["t-4"]
    assert per_task >= 0.003
