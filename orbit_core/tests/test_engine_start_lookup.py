"""Starts that name their execution id are checked against the store in one
read per group (`Store.execution_hashes`), not one read each: on a database
server each read is a round trip made while the group's lead is held."""

from __future__ import annotations

from typing import Any

from engine_kit import workflow
from test_engine_faults import in_one_group

from orbit_core.errors import ConflictError, StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import ExecutionRow
from orbit_core.testing import simulated_engine


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.row_reads: list[str] = []
        self.hash_reads: list[list[str]] = []
        self.hashes_fail = False

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        self.row_reads.append(execution_id)
        return super().execution_row(execution_id)

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        self.hash_reads.append(list(execution_ids))
        if self.hashes_fail:
            raise StorageError("the database is away (test)")
        return super().execution_hashes(execution_ids)


def _engine(store: CountingStore) -> Any:
    engine = simulated_engine(store)
    engine.deploy(workflow("Empty", [], []))
    engine.deploy(workflow("Empty", [], [], version="2.0.0"))
    # Finished at once, so known only to the store, not to memory.
    assert engine.start("Empty", "1.0.0", execution_id="done-1")["created"]
    assert engine.start("Empty", "1.0.0", execution_id="done-2")["created"]
    assert engine.get("done-1")["status"] == "COMPLETED"
    store.row_reads.clear()
    store.hash_reads.clear()
    return engine


def test_a_group_of_starts_reads_the_store_once() -> None:
    store = CountingStore()
    engine = _engine(store)
    again, new_1, new_2, other, unnamed = in_one_group(
        engine,
        lambda: engine.start("Empty", "1.0.0", execution_id="done-1"),
        lambda: engine.start("Empty", "1.0.0", execution_id="new-1"),
        lambda: engine.start("Empty", "1.0.0", execution_id="new-2"),
        lambda: engine.start("Empty", "2.0.0", execution_id="done-2"),
        lambda: engine.start("Empty", "1.0.0"),
    )
    assert again == {"execution_id": "done-1", "created": False}
    assert new_1 == {"execution_id": "new-1", "created": True}
    assert new_2 == {"execution_id": "new-2", "created": True}
    assert isinstance(other, ConflictError) and other.code == "EXECUTION_EXISTS"
    assert unnamed["created"]
    assert [sorted(ids) for ids in store.hash_reads] == [["done-1", "done-2", "new-1", "new-2"]]
    assert store.row_reads == []
    engine.close()


def test_the_same_new_id_twice_in_one_group_creates_it_once() -> None:
    store = CountingStore()
    engine = _engine(store)
    first, second = in_one_group(
        engine,
        lambda: engine.start("Empty", "1.0.0", execution_id="twice"),
        lambda: engine.start("Empty", "2.0.0", execution_id="twice"),
    )
    assert first == {"execution_id": "twice", "created": True}
    assert isinstance(second, ConflictError) and second.code == "EXECUTION_EXISTS"
    engine.close()


def test_when_the_group_read_fails_each_start_reads_for_itself() -> None:
    store = CountingStore()
    engine = _engine(store)
    store.hashes_fail = True
    again, new = in_one_group(
        engine,
        lambda: engine.start("Empty", "1.0.0", execution_id="done-1"),
        lambda: engine.start("Empty", "1.0.0", execution_id="new-1"),
    )
    assert again == {"execution_id": "done-1", "created": False}
    assert new == {"execution_id": "new-1", "created": True}
    assert sorted(store.row_reads) == ["done-1", "new-1"]
    engine.close()
