"""Shared mode (`orbit server --cluster --cluster-mode shared`, chapter 44)
on a real PostgreSQL.

The store pieces first, in process: ownership rows written and fenced in
the commit transaction, the shared queue claimed with SKIP LOCKED, the
inbox of an execution's owner, node ids, take-overs. Then whole servers.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import server_ir

from orbit_core.dispatch import Session
from orbit_core.engine import Engine
from orbit_core.errors import StorageError
from orbit_store.postgres import PostgresStore
from orbit_store.shared import SharedStore, SharedTables, rendezvous

pytestmark = pytest.mark.postgres

CHAIN = [("bench.step", "1.0.0")]


def _token(eid: str) -> str:
    return f"{eid}/{uuid.uuid4()}"


def _session(sid: str = "s-1") -> Session:
    return Session(sid, "w-1", "python", tuple(CHAIN), None, 0, 0)


class Node:
    """One shared-mode node's store, tables and engine, in this process."""

    def __init__(self, url: str, name: str) -> None:
        self.name = name
        self.store = SharedStore(url, node_id=name)
        self.lost: list[str] = []
        self.store.on_lost = self.lost.extend
        self.tables = SharedTables(self.store, name)
        self.engine = Engine(self.store, auto_tick=False, offer_tasks=True)

    def claim(self, session: str = "s-1") -> Any:
        return self.tables.claim(CHAIN, "python", session, "w-1", _token)

    def run_claimed(self) -> Any:
        """Claims a task and, owning its execution, records its dispatch."""
        claim = self.claim()
        assert claim is not None and claim.owner == self.name
        assignment = self.engine.dispatch_offer(
            _session(),
            execution_id=claim.execution_id,
            unit_key=claim.unit_key,
            offer_seq=claim.offer_seq,
            token=claim.token,
        )
        assert assignment is not None and assignment["token"] == claim.token
        return assignment

    def close(self) -> None:
        self.engine.close()
        self.tables.close()


def _rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    store = PostgresStore(url)
    try:
        with store.session("test") as conn:
            return list(conn.execute(sql, params).fetchall())
    finally:
        store.close()


def test_ownership_and_the_queue_are_written_with_the_history(pg_url: str) -> None:
    a = Node(pg_url, "a")
    try:
        a.engine.deploy(server_ir.chain(2))
        a.engine.start("Chain", execution_id="x-1")
        assert _rows(pg_url, "SELECT node_id, epoch, root_id FROM orbit_owners") == [
            ("a", 1, "x-1")
        ]
        assert _rows(pg_url, "SELECT execution_id, unit_key, state FROM orbit_tasks") == [
            ("x-1", "s0", "queued")
        ]
        first = a.run_claimed()
        assert first["input"] == {"i": 0} and first["idempotency_key"]
        # The commit that records the dispatch removes the queue's row.
        assert _rows(pg_url, "SELECT count(*) FROM orbit_tasks") == [(0,)]
        a.engine.complete(first["token"], {"i": 1})
        second = a.run_claimed()
        assert second["step_id"] == "s1" and second["input"] == {"i": 1}
        a.engine.complete(second["token"], {"i": 2})
        assert a.engine.get("x-1")["status"] == "COMPLETED"
        # The end of the execution ends its ownership, in the same commit.
        assert _rows(pg_url, "SELECT count(*) FROM orbit_owners") == [(0,)]
        assert a.claim() is None
    finally:
        a.close()


def test_claims_skip_rows_another_server_is_claiming(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="first")
        a.engine.start("Chain", execution_id="second")
        admin = PostgresStore(pg_url)
        with admin.session("locker") as locker, locker.transaction():
            # Another server's claim in progress holds the oldest row.
            locker.execute(
                "SELECT id FROM orbit_tasks WHERE execution_id = 'first' FOR UPDATE"
            ).fetchall()
            claim = b.claim()
            assert claim is not None and claim.execution_id == "second"
        admin.close()
        # b does not own `second`: the dispatch went to a's inbox.
        pending = a.tables.pending()
        assert [(p.execution_id, p.kind) for p in pending] == [("second", "dispatched")]
        assert pending[0].payload["token"] == claim.token
        assert b.tables.pending() == []
        again = b.claim()
        assert again is not None and again.execution_id == "first"
        assert b.claim() is None
    finally:
        a.close()
        b.close()


def test_concurrent_claims_never_hand_out_a_task_twice(pg_url: str) -> None:
    a = Node(pg_url, "a")
    nodes = [Node(pg_url, name) for name in ("b", "c", "d")]
    try:
        a.engine.deploy(server_ir.chain(1))
        for i in range(30):
            a.engine.start("Chain", execution_id=f"e-{i}")
        got: list[str] = []
        lock = threading.Lock()

        def drain(node: Node) -> None:
            while (claim := node.claim()) is not None:
                with lock:
                    got.append(claim.execution_id)

        threads = [threading.Thread(target=drain, args=(n,)) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert sorted(got) == sorted(f"e-{i}" for i in range(30))
    finally:
        a.close()
        for node in nodes:
            node.close()


def test_the_inbox_keeps_order_and_carries_replies(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.review())
        a.engine.start("Review", input={"order_id": "o-1"}, execution_id="r-1")
        first = b.tables.put("r-1", "signal", {"name": "decision", "payload": {"approved": True}})
        second = b.tables.put("r-1", "cancel", {"reason": "x"})
        entries = a.tables.pending()
        assert [e.seq for e in entries] == [first, second]
        assert b.tables.pending() == []  # b owns nothing
        assert b.tables.reply(first) == (False, None)
        a.tables.done(first, {"ok": {"seq": 5}})
        assert b.tables.reply(first) == (True, {"ok": {"seq": 5}})
        assert [e.seq for e in a.tables.pending()] == [second]
    finally:
        a.close()
        b.close()


def test_a_take_over_fences_the_old_owner(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(2))
        a.engine.start("Chain", execution_id="t-1")
        held = a.run_claimed()
        # a stops heartbeating; b takes the tree over (epoch 2).
        moved = b.tables.take_over(["t-1"], "a")
        assert moved == [("t-1", "t-1", 2)]
        assert b.tables.take_over(["t-1"], "a") == []  # one winner
        b.store.adopt(moved)
        adopted, in_flight = b.engine.take_over(b.store.histories(["t-1"]))
        assert (adopted, in_flight) == (1, 1)
        # a's late write is refused by the database; memory stays as stored.
        with pytest.raises(StorageError) as refused:
            a.engine.complete(held["token"], {"i": 1})
        assert refused.value.message == (
            "fenced: execution `t-1` is owned by node `b` at epoch 2; this node held epoch 1"
        )
        assert a.lost == ["t-1"]
        assert a.engine.release(a.lost) == 1
        # The worker's result reaches the new owner, which carries on.
        assert b.engine.complete(held["token"], {"i": 1})["accepted"]
        b.run_claimed()
        assert _rows(pg_url, "SELECT node_id, epoch FROM orbit_owners") == [("b", 2)]
    finally:
        a.close()
        b.close()


def test_a_dead_owners_own_claims_are_queued_again_on_take_over(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="c-1")
        claim = a.claim()  # a dies before it records the dispatch
        assert claim is not None
        b.store.adopt(b.tables.take_over(["c-1"], "a"))
        b.engine.take_over(b.store.histories(["c-1"]))
        again = b.run_claimed()
        assert again["execution_id"] == "c-1" and again["token"] != claim.token
    finally:
        a.close()
        b.close()


def test_a_restarted_node_resumes_its_executions_under_a_new_epoch(pg_url: str) -> None:
    a = Node(pg_url, "a")
    a.engine.deploy(server_ir.chain(1))
    a.engine.start("Chain", execution_id="r-1")
    old = a.store
    again = Node(pg_url, "a")
    try:
        assert again.engine.recovered_executions == 1
        assert _rows(pg_url, "SELECT epoch FROM orbit_owners") == [(2,)]
        with pytest.raises(StorageError, match="fenced"):
            a.engine.cancel("r-1")
        assert old.owned() == {}
        again.run_claimed()
    finally:
        a.close()
        again.close()


def test_a_node_id_is_held_by_one_live_process(pg_url: str) -> None:
    a = Node(pg_url, "a")
    try:
        assert a.tables.join("http://a", "first", 60_000)
        assert not a.tables.join("http://a", "second", 60_000)
        assert a.tables.heartbeat("first")
        assert not a.tables.heartbeat("second")
        a.tables.leave("first")  # heartbeat 0: expired for everyone
        assert a.tables.join("http://a", "second", 60_000)
        assert not a.tables.heartbeat("first")
        nodes = a.tables.nodes(60_000)
        assert [(n.node_id, n.addr, n.live) for n in nodes] == [("a", "http://a", True)]
    finally:
        a.close()


def test_rendezvous_spreads_trees_over_the_live_nodes() -> None:
    nodes = ["n1", "n2", "n3"]
    share = [rendezvous(f"root-{i}", nodes) for i in range(300)]
    assert {n: share.count(n) for n in nodes} == {
        n: share.count(n) for n in nodes if share.count(n) > 60
    }
    # Every server computes the same answer.
    assert share == [rendezvous(f"root-{i}", list(reversed(nodes))) for i in range(300)]
