"""A claim from the shared queue whose dispatch could not be recorded goes
back on the queue, even when the database is away at that moment.

Found by the shared-mode fault campaign (a PostgreSQL restart): a server
claimed its own execution's task for a poll, the group recording the
dispatch failed, and so did putting the claim back. The claimed row stayed;
the owner's offer of the same task after it read the execution back was a
no-op (one row per offer), and the execution waited for ever after its
`StepScheduled`. The in-memory board keeps one entry per offer like the
database, so this replays it on one thread."""

from __future__ import annotations

from typing import Any

import pytest
from test_engine_simulation import LEAF, _checked
from test_shared_simulation import SESSION_TIMEOUT_MS, DirectClaims

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.engine.handoff import Sharing
from orbit_core.engine.shared import SharedEngine
from orbit_core.errors import StorageError
from orbit_core.memory_cluster import MemoryCluster, MemoryNode
from orbit_core.ports import CommitBatch
from orbit_core.testing import SequentialIds, SimulatedClock

CONTRACTS = [("t.work", "1.0.0")]


class FlakyNode(MemoryNode):
    """A node whose database can be made to refuse commits and unclaims."""

    def __init__(self, cluster: MemoryCluster, node_id: str) -> None:
        super().__init__(cluster, node_id)
        self.away = False

    def commit(self, batch: CommitBatch) -> None:
        if self.away:
            raise StorageError("the database is away")
        super().commit(batch)

    def unclaim(self, token: str) -> None:
        if self.away:
            raise StorageError("the database is away")
        super().unclaim(token)


def _server() -> tuple[SharedEngine, FlakyNode, MemoryCluster]:
    clock = SimulatedClock()
    ids = SequentialIds()
    cluster = MemoryCluster(clock)
    node = FlakyNode(cluster, "a")
    engine = Engine(
        node,
        clock,
        ids,
        handler_threads=0,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        sharing=Sharing(offer_tasks=True, local_first=True, shared_catalog=True),
    )
    shared = SharedEngine(
        engine,
        node_id="a",
        tables=node,
        announcements=node,
        tasks=DirectClaims(node, lambda eid: f"{eid}/{ids.token()}"),
        reply_wait_s=0.0,
    )
    shared.deploy(_checked(LEAF)[1])
    node.heartbeat()
    return shared, node, cluster


def _rounds(shared: SharedEngine) -> None:
    """What the server's threads do between calls: publishing, the tick
    (which reads back executions a failed group left out of memory and
    offers their tasks), and putting back claims not put back yet."""
    for _ in range(3):
        shared.handoff.publish_stale()
        shared.tick()
        shared.desk.release_pending()


def test_a_claim_whose_dispatch_and_release_failed_is_put_back() -> None:
    shared, node, cluster = _server()
    try:
        session = shared.workers.register("w", "python", CONTRACTS)["worker_session_id"]
        shared.start("Leaf", None, {"n": 0}, "e1")
        for _ in range(2):  # no poll here took it: to the queue
            shared.handoff.publish_stale()
        assert [t.offer.unit_key for t in cluster.board.values()] == ["w"]

        # The database goes away just after the claim: the dispatch is not
        # recorded, and the claim cannot be put back either.
        claim_for = node.claim_for

        def claim_then_fail(*args: Any, **kwargs: Any) -> Any:
            claims = claim_for(*args, **kwargs)
            node.away = True
            return claims

        node.claim_for = claim_then_fail  # type: ignore[method-assign]
        with pytest.raises(StorageError):
            shared.workers.poll(session, 0)
        node.claim_for = claim_for  # type: ignore[method-assign]

        node.away = False
        _rounds(shared)
        task = shared.workers.poll(session, 0)
        assert task is not None and task["execution_id"] == "e1" and task["step_id"] == "w"
        shared.workers.complete(task["token"], {"v": 0})
        _rounds(shared)
        history = cluster.data.history("e1") or []
        assert any(isinstance(e, ev.StepSucceeded) and e.step == "w" for e in history)
        assert not cluster.board
    finally:
        shared.close()


def test_a_task_not_delivered_while_the_database_is_away_is_redelivered() -> None:
    """The worker hung up before its task reached it, and the database
    refused the report of that: the report is made again once it is back,
    so the attempt is redelivered (the session lives on: no session timeout
    would). Found by the same campaign."""
    shared, node, cluster = _server()
    try:
        session = shared.workers.register("w", "python", CONTRACTS)["worker_session_id"]
        shared.start("Leaf", None, {"n": 0}, "e1")
        lost = shared.workers.poll(session, 0)  # from the engine's own index
        assert lost is not None
        node.away = True
        with pytest.raises(StorageError):
            shared.workers.undelivered(lost["token"])
        node.away = False
        _rounds(shared)
        task = shared.workers.poll(session, 0)
        assert task is not None and task["step_id"] == "w" and task["redelivery"]
        history = cluster.data.history("e1") or []
        assert any(isinstance(e, ev.StepAttemptUncertain) for e in history)
    finally:
        shared.close()
