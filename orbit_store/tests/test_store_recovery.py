"""The engine on SQLite: durable group commits, crash recovery, storage errors."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "orbit_core" / "tests"))

from engine_kit import (
    Bool,
    Int,
    Worker,
    inp,
    obj,
    rec,
    step,
    task,
    timeline,
    workflow,
)

from orbit_core.engine import Engine
from orbit_core.errors import StorageError
from orbit_core.jsontypes import JsonObject
from orbit_core.ports import CommitBatch
from orbit_core.state import fold
from orbit_core.testing import SimulatedClock, simulated_engine
from orbit_store.sql import Disconnected
from orbit_store.sqlite import SqliteStore


def plain() -> Any:
    return workflow(
        "Plain",
        [
            step("work", task="demo.work", with_=obj(n=inp("n"))),
            step("pause", "sleep", sleep_ms=60_000, after=["work"]),
        ],
        [task("demo.work", rec(n=Int), rec(ok=Bool))],
        input=rec(n=Int),
    )


def one_task() -> Any:
    """`Plain` with its task step only: an execution waits for `demo.work`."""
    return workflow(
        "Plain",
        [step("work", task="demo.work", with_=obj(n=inp("n")))],
        [task("demo.work", rec(n=Int), rec(ok=Bool))],
        input=rec(n=Int),
    )


def start_from_threads(engine: Engine, each: int, threads: int = 4) -> None:
    """Starts `each` executions of `Plain` from every one of `threads`
    threads at once (ids `t-<thread>-<i>`), so their commits are grouped."""

    def starter(k: int) -> None:
        for i in range(each):
            engine.start("Plain", input={"n": i}, execution_id=f"t-{k}-{i}")

    started = [threading.Thread(target=starter, args=(k,)) for k in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()


def reopen(path: Path, clock: SimulatedClock) -> Engine:
    return simulated_engine(SqliteStore(path), clock, session_timeout_ms=5000)


def crash(engine: Engine) -> None:
    """The process dies: its memory is lost and the OS closes its files (and
    so releases the database's lock). Closing the store writes nothing: every
    commit was durable when it returned."""
    engine.store.close()


def test_recovery_accepts_old_tokens_and_fires_overdue_timers(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    clock = SimulatedClock()
    first = reopen(db, clock)
    first.deploy(plain())
    w = Worker(first, "w-1", ["demo.work"])
    first.start("Plain", input={"n": 1}, execution_id="r-1")
    first.start("Plain", input={"n": 2}, execution_id="r-2")
    held = w.take()
    w.run({"ok": True})  # r-2's work: its sleep starts now
    # The process dies here. The next process starts two minutes later, on
    # its own clock.
    crash(first)
    clock = SimulatedClock(clock.now_ms() + 120_000)
    second = reopen(db, clock)
    assert (second.recovered_executions, second.recovered_in_flight) == (2, 1)
    assert second.get("r-2")["units"]["pause"]["status"] == "SUCCEEDED"  # overdue timer fired
    assert second.get("r-2")["status"] == "COMPLETED"
    assert second.workers.complete(held["token"], {"ok": True}) == {"accepted": True}
    clock.advance(60_000)
    assert second.get("r-1")["status"] == "COMPLETED"
    assert fold(second.events("r-1"), "r-1").to_json() == second.get("r-1")
    second.close()


def test_unreported_attempts_are_redelivered_one_session_timeout_after_restart(
    tmp_path: Path,
) -> None:
    db = tmp_path / "orbit.db"
    clock = SimulatedClock()
    first = reopen(db, clock)
    first.deploy(plain())
    w = Worker(first, "w-1", ["demo.work"])
    first.start("Plain", input={"n": 1}, execution_id="r-1")
    w.take()
    crash(first)
    clock = SimulatedClock(clock.now_ms())
    second = reopen(db, clock)
    clock.advance(4900)
    assert second.get("r-1")["units"]["work"]["status"] == "DISPATCHED"
    clock.advance(100)
    lines = timeline(second, "r-1")
    assert lines[-2:] == [
        "StepAttemptUncertain step=work attempt=1 "
        "reason=runtime restarted and no worker reported the result",
        "StepScheduled step=work attempt=1 redelivery=true",
    ]
    again = Worker(second, "w-2", ["demo.work"]).take()
    assert (again["attempt"], again["redelivery"]) == (1, True)
    second.close()


class FlakyStore(SqliteStore):
    fail_next = False

    def commit(self, batch: CommitBatch) -> None:
        if self.fail_next:
            self.fail_next = False
            raise StorageError("disk I/O error")
        super().commit(batch)


def test_a_failed_commit_changes_nothing(tmp_path: Path) -> None:
    store = FlakyStore(tmp_path / "orbit.db")
    engine = simulated_engine(store)
    engine.deploy(plain())
    w = Worker(engine, "w-1", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="f-1")
    before = engine.get("f-1")
    store.fail_next = True
    with pytest.raises(StorageError) as info:
        engine.workers.poll(w.session, 0)
    assert info.value.code == "STORAGE_ERROR"
    assert engine.get("f-1") == before
    store.fail_next = True
    with pytest.raises(StorageError):
        engine.start("Plain", input={"n": 2}, execution_id="f-2")
    with pytest.raises(Exception, match="not found"):
        engine.get("f-2")
    task_ = w.take()
    assert task_["execution_id"] == "f-1"
    assert engine.workers.complete(task_["token"], {"ok": True}) == {"accepted": True}
    engine.close()


def test_group_commit_under_threads(tmp_path: Path) -> None:
    """Many threads at once: every start is durable and none is lost."""
    from orbit_core.engine import Engine as RealEngine

    store = SqliteStore(tmp_path / "orbit.db")
    engine = RealEngine(store, handler_threads=4)
    engine.deploy(one_task())
    engine.register_handler("demo.work", "1.0.0", lambda i: {"ok": True})
    start_from_threads(engine, 20)
    state = engine.wait("t-0-0", 5000)
    assert state["units"]["work"]["status"] == "SUCCEEDED"
    engine.close()
    reopened = SqliteStore(tmp_path / "orbit.db")
    assert len(reopened.list_executions(None, None, 1000)) == 80
    reopened.close()


def test_schedules_and_their_state_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    clock = SimulatedClock(1_794_768_660_347)  # 2026-11-15T18:51:00.347Z
    first = reopen(db, clock)
    first.deploy(plain())
    body: JsonObject = {
        "schedule_id": "s",
        "workflow": "Plain",
        "input": {"n": 1},
        "interval": "10s",
    }
    first.schedules.create({**body, "description": "kept"})
    clock.advance(9_653)  # 18:51:10: the first occurrence fires
    crash(first)
    again = reopen(db, clock)
    doc = again.schedules.get("s")
    assert (doc["description"], doc["fired"], doc["last_execution_id"]) == (
        "kept",
        1,
        "s:2026-11-15T18:51:10Z",
    )
    assert doc["next_fire_at"] == "2026-11-15T18:51:20Z"
    assert again.get("s:2026-11-15T18:51:10Z")["schedule_id"] == "s"
    again.close()


def test_an_error_on_a_connection_that_cannot_be_reopened_is_a_storage_error(
    tmp_path: Path,
) -> None:
    """A statement failed and SQLAlchemy invalidated its connection (the
    database went away); reporting that must not try to reopen it: the
    reopen fails too, and its raw SQLAlchemy error used to escape instead
    of a StorageError, so the engine could not undo the failed group and
    stopped (found by the shared-mode fault campaign)."""
    store = SqliteStore(tmp_path / "o.db")
    try:
        link = store._reader
        link.connection()

        class Invalidated:
            closed = False
            invalidated = True

            @property
            def connection(self) -> Any:
                raise OperationalError("connect", {}, Exception("connection refused"))

            def invalidate(self) -> None:
                pass

            def close(self) -> None:
                pass

        link._conn = Invalidated()  # type: ignore[assignment]
        with pytest.raises(Disconnected), link.errors():
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
    finally:
        store.close()
