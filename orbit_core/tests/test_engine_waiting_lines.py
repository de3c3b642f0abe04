"""The waiting lines of flow control (engine/admission.py: a workflow's
`concurrency`; engine/start_gates.py: its start `rate`) after an execution
leaves memory without ending through them: its group undone (the store
refused the commit, or took it without the server hearing) or its
ownership handed to another server. Found by the shared-mode simulation
(issue 40, seeds 3221, 3969 and 4876): an execution recorded
`WorkflowWaiting` and was never admitted, though a slot was free.

- A start whose commit is refused and that the client tries again under the
  same id waited behind the slot its undone self still held.
- An execution that held the slot and went to another server left the slot
  taken in this server's view until something else touched the line.
- An undone start that waited in one key's line, tried again under another
  key, kept its place in the old line and never joined the new one.
"""

from __future__ import annotations

import attrs
import pytest
from engine_kit import inp, plain

from orbit_core import ir
from orbit_core.engine import Engine, handoff
from orbit_core.engine.handoff import Sharing
from orbit_core.errors import StorageError
from orbit_core.ir import definition_hash
from orbit_core.ir.expr import Expr
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch
from orbit_core.testing import simulated_engine


class RefusingStore(MemoryStore):
    """A store whose next commit fails: refused (nothing written) or, with
    `answer_lost`, written but reported failed."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse_next = False
        self.answer_lost = False

    def commit(self, batch: CommitBatch) -> None:
        refuse, self.refuse_next = self.refuse_next, False
        lost, self.answer_lost = self.answer_lost, False
        if refuse:
            raise StorageError("the database refused the commit (test)")
        super().commit(batch)
        if lost:
            raise StorageError("the connection dropped after COMMIT (test)")


def _limited(flow: ir.definition.Flow) -> ir.Definition:
    defn = attrs.evolve(plain(), name="Limited", ir_version=ir.IR_V2, flow=flow)
    return attrs.evolve(defn, definition_hash=definition_hash(defn))


def _concurrency(key: Expr | None = None) -> ir.Definition:
    return _limited(ir.definition.Flow(concurrency=ir.definition.Concurrency(1, key)))


def _refused_start(engine: Engine, store: RefusingStore, eid: str, n: int) -> None:
    store.refuse_next = True
    with pytest.raises(StorageError):
        engine.start("Limited", input={"n": n}, execution_id=eid)
    assert store.history(eid) is None


def _started(engine: Engine, eid: str) -> bool:
    doc = engine.get(eid)
    return doc["status"] == "RUNNING" and "waiting" not in doc


def test_an_undone_start_tried_again_under_its_id_takes_the_free_slot() -> None:
    store = RefusingStore()
    engine = simulated_engine(store)
    engine.deploy(_concurrency())
    _refused_start(engine, store, "x", 1)
    engine.start("Limited", input={"n": 1}, execution_id="x")
    assert _started(engine, "x")
    engine.close()


def test_a_start_whose_answer_was_lost_holds_its_slot_once() -> None:
    # The store took the start: the engine rebuilds it from there, holding
    # the one slot, and the next start waits for it until it ends.
    store = RefusingStore()
    engine = simulated_engine(store)
    engine.deploy(_concurrency())
    store.answer_lost = True
    with pytest.raises(StorageError):
        engine.start("Limited", input={"n": 1}, execution_id="x")
    engine.start("Limited", input={"n": 2}, execution_id="y")
    assert _started(engine, "x")
    assert engine.get("y")["waiting"]["reason"] == "concurrency"
    engine.cancel("x")
    assert _started(engine, "y")
    engine.close()


def test_an_undone_wait_tried_again_under_another_key_joins_that_keys_line() -> None:
    store = RefusingStore()
    engine = simulated_engine(store)
    engine.deploy(_concurrency(inp("n")))
    engine.start("Limited", input={"n": 1}, execution_id="a")
    engine.start("Limited", input={"n": 3}, execution_id="b")
    _refused_start(engine, store, "x", 1)  # it waited for a's slot
    engine.start("Limited", input={"n": 3}, execution_id="x")
    assert engine.get("x")["waiting"]["key"] == "3"
    engine.cancel("b")
    assert _started(engine, "x")
    engine.close()


def test_a_slot_holder_another_server_took_frees_the_slot_here() -> None:
    # Shared mode counts a limit per server: once the holder is owned
    # elsewhere, this server's line lets its first waiter in on the next tick.
    engine = simulated_engine(sharing=Sharing())
    engine.deploy(_concurrency())
    engine.start("Limited", input={"n": 1}, execution_id="a")
    engine.start("Limited", input={"n": 2}, execution_id="b")
    assert engine.get("b")["waiting"]["reason"] == "concurrency"
    assert handoff.of(engine).release(["a"]) == 1
    engine.tick()
    assert _started(engine, "b")
    engine.close()


def test_an_undone_rate_wait_tried_again_under_another_key_leaves_the_old_line() -> None:
    # One start per minute per `n`: a and b took their keys' tokens; x's
    # undone wait was for key 1, it comes back under key 2, then y waits for
    # key 1's next token.
    rate = ir.definition.Rate(1, 60_000, key=inp("n"))
    store = RefusingStore()
    engine = simulated_engine(store)
    engine.deploy(_limited(ir.definition.Flow(rate=rate)))
    engine.start("Limited", input={"n": 1}, execution_id="a")
    engine.start("Limited", input={"n": 2}, execution_id="b")
    _refused_start(engine, store, "x", 1)
    engine.start("Limited", input={"n": 2}, execution_id="x")
    engine.start("Limited", input={"n": 1}, execution_id="y")
    assert engine.get("x")["waiting"]["key"] == "2"
    for _ in range(61):
        engine.clock.advance(1_000)  # type: ignore[attr-defined]
    # Each key's token went to its own waiter.
    assert _started(engine, "y")
    assert _started(engine, "x")
    engine.close()
