"""A result the store could not take (issue 36, chapters 32, 42 and 68): the
attempt stays in flight under its token, the worker may send the same report
again and gets the usual answer once the store is back; a worker that does
not (it gave up) yet keeps heartbeating does not own the attempt forever: one
session timeout after the failure, the attempt is uncertain and redelivered."""

from __future__ import annotations

from typing import Any

import pytest
from engine_kit import plain

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.engine.workers import UNRECORDED_REASON
from orbit_core.errors import StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch, ExecutionRow
from orbit_core.testing import SimulatedClock, simulated_engine

TIMEOUT_MS = 3000


class FailingStore(MemoryStore):
    """Refuses the next `commits_fail` commits; with `down`, refuses every
    call, as a database that went away does."""

    def __init__(self) -> None:
        super().__init__()
        self.commits_fail = 0
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise StorageError("cannot connect to the database (test)")

    def commit(self, batch: CommitBatch) -> None:
        self._check()
        if self.commits_fail:
            self.commits_fail -= 1
            raise StorageError("disk I/O error (test)")
        super().commit(batch)

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        self._check()
        return super().history(execution_id, run)

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        self._check()
        return super().execution_row(execution_id)


def _dispatched() -> tuple[FailingStore, Engine, str, Any]:
    store = FailingStore()
    engine = simulated_engine(store, session_timeout_ms=TIMEOUT_MS)
    engine.deploy(plain())
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    session = engine.workers.register("w1", "python", [("demo.work", "1.0.0")])
    task = engine.workers.poll(session["worker_session_id"], 0)
    assert task is not None
    return store, engine, session["worker_session_id"], task


def _heartbeat_for(engine: Engine, session: str, ms: int) -> None:
    """Time passes while the worker keeps its session alive."""
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
    for _ in range(ms // 500):
        engine.workers.heartbeat(session)
        clock.advance(500)


def test_the_same_report_is_taken_once_the_store_is_back() -> None:
    store, engine, _session, task = _dispatched()
    store.commits_fail = 3
    for _ in range(3):
        with pytest.raises(StorageError):
            engine.workers.complete(task["token"], {"ok": True})
        assert engine.get("p-1")["units"]["work"]["status"] == "DISPATCHED"
    assert engine.workers.complete(task["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == "COMPLETED"
    engine.close()


def _redelivered(engine: Engine, session: str) -> None:
    """The attempt whose result was lost goes to the next poll, and its
    success then completes the execution."""
    again = engine.workers.poll(session, 0)
    assert again is not None
    assert (again["step_id"], again["attempt"], again["redelivery"]) == ("work", 1, True)
    uncertain = [e for e in engine.events("p-1") if isinstance(e, ev.StepAttemptUncertain)]
    assert [e.reason for e in uncertain] == [UNRECORDED_REASON]
    assert engine.workers.complete(again["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == "COMPLETED"


def test_an_attempt_whose_result_was_lost_is_redelivered_though_its_worker_heartbeats() -> None:
    store, engine, session, task = _dispatched()
    store.commits_fail = 1
    with pytest.raises(StorageError):
        engine.workers.fail(task["token"], "BUSY", "try later", True)
    # The worker gives up on that report but stays connected.
    _heartbeat_for(engine, session, TIMEOUT_MS - 500)
    assert engine.get("p-1")["units"]["work"]["status"] == "DISPATCHED"
    _heartbeat_for(engine, session, 1000)
    _redelivered(engine, session)
    engine.close()


def test_a_result_lost_while_the_database_was_away_is_redelivered() -> None:
    store, engine, session, task = _dispatched()
    store.down = True
    with pytest.raises(StorageError):
        engine.workers.complete(task["token"], {"ok": True})
    store.down = False
    _heartbeat_for(engine, session, TIMEOUT_MS + 500)
    _redelivered(engine, session)
    engine.close()
