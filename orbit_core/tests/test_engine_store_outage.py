"""A database that goes away and comes back (issue 13): a commit that fails
because the store is unreachable cannot be undone by reading the store back,
so the executions it touched wait out of memory and are read again when the
store answers; the engine keeps running and nothing committed is lost."""

from __future__ import annotations

from typing import Any

import pytest
from engine_kit import plain

from orbit_core import events as ev
from orbit_core.errors import StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch, ExecutionRow
from orbit_core.testing import simulated_engine


class OutageStore(MemoryStore):
    """Every call fails while `down` is set, as a stopped database does."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise StorageError("cannot connect to the database (test)")

    def commit(self, batch: CommitBatch) -> None:
        self._check()
        super().commit(batch)

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        self._check()
        return super().history(execution_id, run)

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        self._check()
        return super().execution_row(execution_id)

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        self._check()
        return super().execution_hashes(execution_ids)


def _started() -> tuple[OutageStore, Any, str, Any]:
    store = OutageStore()
    engine = simulated_engine(store)
    engine.deploy(plain())
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    session = engine.workers.register("w", "python", [("demo.work", "1.0.0")])
    task = engine.workers.poll(session["worker_session_id"], 0)
    assert task is not None
    return store, engine, session["worker_session_id"], task


def test_a_result_refused_while_the_store_is_down_is_taken_when_it_is_back() -> None:
    store, engine, _session, task = _started()
    store.down = True
    with pytest.raises(StorageError):
        engine.workers.complete(task["token"], {"ok": True})
    # Not unknown (which would tell the worker to drop it): not loaded yet.
    with pytest.raises(StorageError, match="`p-1` is not loaded"):
        engine.workers.complete(task["token"], {"ok": True})
    with pytest.raises(StorageError):
        engine.signal("p-1", "nope")
    store.down = False
    assert engine.workers.complete(task["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == "COMPLETED"
    history = engine.events("p-1")
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    engine.close()


def test_other_executions_go_on_while_one_waits_to_be_reloaded() -> None:
    store, engine, session, task = _started()
    store.down = True
    with pytest.raises(StorageError):
        engine.workers.complete(task["token"], {"ok": True})
    store.down = False
    engine.start("Plain", input={"n": 2}, execution_id="p-2")
    assert engine.health()["active_executions"] == 2  # p-1 was read back first
    second = engine.workers.poll(session, 0)
    assert second is not None and second["execution_id"] == "p-2"
    assert engine.workers.complete(second["token"], {"ok": True}) == {"accepted": True}
    assert engine.workers.complete(task["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == engine.get("p-2")["status"] == "COMPLETED"
    engine.close()
