"""A start whose group was undone (the store refused its commit) under a
workflow `concurrency` limit: the slot it took in memory is not held by a
later execution that gets the same id, of another workflow. Found by the
shared-mode simulation once its servers' commits could fail (issue 40): the
ghost held the only slot for ever, so the next start of the limited
workflow waited for a slot nobody would free."""

from __future__ import annotations

import attrs
from engine_kit import plain

from orbit_core import ir
from orbit_core.errors import StorageError
from orbit_core.ir import definition_hash
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch
from orbit_core.testing import simulated_engine


class RefusingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.refuse_next = False

    def commit(self, batch: CommitBatch) -> None:
        if self.refuse_next:
            self.refuse_next = False
            raise StorageError("the database refused the commit (test)")
        super().commit(batch)


def _gated() -> ir.Definition:
    defn = attrs.evolve(
        plain(),
        name="Gated",
        ir_version=ir.IR_V2,
        flow=ir.definition.Flow(concurrency=ir.definition.Concurrency(1)),
    )
    return attrs.evolve(defn, definition_hash=definition_hash(defn))


def test_an_undone_start_holds_no_slot_for_a_later_execution_of_its_id() -> None:
    store = RefusingStore()
    engine = simulated_engine(store)
    engine.deploy(plain())
    engine.deploy(_gated())
    store.refuse_next = True
    try:
        engine.start("Gated", input={"n": 1}, execution_id="x")
    except StorageError:
        pass
    else:
        raise AssertionError("the start's commit was to be refused")
    # The id is free: a client starts another workflow under it.
    engine.start("Plain", input={"n": 1}, execution_id="x")
    engine.start("Gated", input={"n": 2}, execution_id="y")
    assert engine.get("y")["status"] == "RUNNING"
    assert "waiting" not in engine.get("y")
    engine.close()
