"""A commit the database took although the engine heard it fail (the
connection dropped after COMMIT was sent: issue 40's fault campaign, shared
mode under a partition between a server and PostgreSQL). The group is
undone in memory and rebuilt from the store, which holds its events after
all: a task dispatched by that group is in flight in the history, yet the
poll it was for was answered with the storage error, so no worker has it.
Its session keeps heartbeating and never reports it. Without a deadline
the attempt stayed DISPATCHED for ever, and the execution never ended (a
cancellation waits for in-flight work, so it never ended either).

The attempt gets the deadline of a result that could not be recorded: one
session timeout after the failure, if no worker reported it meanwhile, it
is uncertain and redelivered. A worker that did get it (a task claimed
through another server of a shared cluster, whose owner's group failed this
way) reports within that time and is answered as usual."""

from __future__ import annotations

import pytest
from engine_kit import plain

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.engine.workers import UNCONFIRMED_DISPATCH_REASON
from orbit_core.errors import StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch, ExecutionRow
from orbit_core.testing import SimulatedClock, simulated_engine

TIMEOUT_MS = 3000


class LostAnswerStore(MemoryStore):
    """With `lose_next`, the next commit is written and then reported as
    failed; with `down_after` as well, the store is unreachable from then
    on (the partition that cut the answer also cuts the reads back)."""

    def __init__(self) -> None:
        super().__init__()
        self.lose_next = False
        self.down_after = False
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise StorageError("cannot connect to the database (test)")

    def commit(self, batch: CommitBatch) -> None:
        self._check()
        super().commit(batch)
        if self.lose_next:
            self.lose_next = False
            self.down = self.down_after
            raise StorageError("server closed the connection unexpectedly (test)")

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        self._check()
        return super().history(execution_id, run)

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        self._check()
        return super().execution_row(execution_id)

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        self._check()
        return super().execution_hashes(execution_ids)


def _started() -> tuple[LostAnswerStore, Engine, str]:
    store = LostAnswerStore()
    engine = simulated_engine(store, session_timeout_ms=TIMEOUT_MS)
    engine.deploy(plain())
    engine.start("Plain", input={"n": 1}, execution_id="p-1")
    session = engine.workers.register("w1", "python", [("demo.work", "1.0.0")])
    return store, engine, session["worker_session_id"]


def _heartbeat_for(engine: Engine, session: str, ms: int) -> None:
    """Time passes while the worker keeps its session alive (and polls:
    the attempt must not come back before its deadline)."""
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
    for _ in range(ms // 500):
        engine.workers.heartbeat(session)
        clock.advance(500)


def _dispatched_but_unanswered(store: LostAnswerStore, engine: Engine, session: str) -> None:
    store.lose_next = True
    with pytest.raises(StorageError):
        engine.workers.poll(session, 0)
    store.down = False
    # The store has the dispatch; the worker got an error instead of the task.
    assert [type(e) for e in engine.events("p-1")][-1] is ev.StepDispatched
    assert engine.get("p-1")["units"]["work"]["status"] == "DISPATCHED"


def _redelivered(engine: Engine, session: str) -> None:
    again = engine.workers.poll(session, 0)
    assert again is not None
    assert (again["step_id"], again["attempt"], again["redelivery"]) == ("work", 1, True)
    uncertain = [e for e in engine.events("p-1") if isinstance(e, ev.StepAttemptUncertain)]
    assert [e.reason for e in uncertain] == [UNCONFIRMED_DISPATCH_REASON]
    assert engine.workers.complete(again["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == "COMPLETED"


@pytest.mark.parametrize("reads", ["answered", "cut off"])
def test_a_dispatch_whose_commit_answer_was_lost_is_redelivered(reads: str) -> None:
    store, engine, session = _started()
    store.down_after = reads == "cut off"
    _dispatched_but_unanswered(store, engine, session)
    _heartbeat_for(engine, session, TIMEOUT_MS - 500)
    assert engine.get("p-1")["units"]["work"]["status"] == "DISPATCHED"
    _heartbeat_for(engine, session, 1000)
    _redelivered(engine, session)
    engine.close()


def test_a_cancel_of_such_an_execution_ends_it() -> None:
    """The campaign's symptom: cancelled, its other steps cancelled, and no
    WorkflowCancelled, as the attempt in flight never ended."""
    store, engine, session = _started()
    _dispatched_but_unanswered(store, engine, session)
    engine.cancel("p-1", "test")
    _heartbeat_for(engine, session, TIMEOUT_MS + 500)
    # An uncertain attempt may have had its effect: it is redelivered, not
    # withdrawn, and the execution ends once it is resolved.
    again = engine.workers.poll(session, 0)
    assert again is not None and again["redelivery"]
    assert engine.workers.complete(again["token"], {"ok": True}) == {"accepted": True}
    assert engine.get("p-1")["status"] == "CANCELLED"
    engine.close()


def test_a_worker_that_has_the_task_reports_it_before_the_deadline() -> None:
    """An attempt whose commit answer was lost may still be at a worker (a
    task claimed through another server of a shared cluster): its report is
    taken as usual, and the deadline passes without a redelivery."""
    store, engine, session = _started()
    _dispatched_but_unanswered(store, engine, session)
    dispatched = engine.events("p-1")[-1]
    assert isinstance(dispatched, ev.StepDispatched)
    _heartbeat_for(engine, session, TIMEOUT_MS - 1000)
    assert engine.workers.complete(dispatched.token, {"ok": True}) == {"accepted": True}
    _heartbeat_for(engine, session, 2000)
    assert engine.get("p-1")["status"] == "COMPLETED"
    assert not [e for e in engine.events("p-1") if isinstance(e, ev.StepAttemptUncertain)]
    engine.close()
