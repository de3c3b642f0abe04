"""Shared mode (`orbit server --cluster --cluster-mode shared`, chapter 44)
on a real PostgreSQL.

The store pieces first, in process: ownership rows written and fenced in
the commit transaction, the shared queue claimed with SKIP LOCKED, the
inbox of an execution's owner, node ids, take-overs. Then whole servers.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import server_ir
from cluster_proxy import Proxy
from fixtures_orbit import demo_definition, shared_trio
from grpc_client import GrpcWorker, grpc_addr
from server_harness import ORBIT, Http, RawWorker, ServerProcess, _parent_of, _pids, wait_until
from server_ir import _finish, _get, _obj, _rec

from orbit_core import ir
from orbit_core.coordination import rendezvous
from orbit_core.dispatch import Session
from orbit_core.engine import Engine, handoff
from orbit_core.engine.handoff import Sharing
from orbit_core.engine.task_desk import TaskDesk
from orbit_core.errors import InvalidError, OrbitError, StorageError
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.ports import CommitBatch, TaskOffer
from orbit_server.app import create_app
from orbit_server.config import ServerConfig
from orbit_server.shared import SharedNode
from orbit_store.postgres import PostgresStore
from orbit_store.shared import Listener, SharedStore, SharedTables

pytestmark = pytest.mark.postgres

CHAIN = [("bench.step", "1.0.0")]


def _token(eid: str) -> str:
    return f"{eid}/{uuid.uuid4()}"


def _session(sid: str = "s-1") -> Session:
    return Session(sid, "w-1", "python", tuple(CHAIN), None, 0, 0)


class Node:
    """One shared-mode node's store, tables and engine, in this process."""

    def __init__(self, url: str, name: str, *, local_first: bool = False) -> None:
        """`local_first`: the engine keeps its tasks in its own index, as a
        shared server's does, so its commits have nothing for the queue."""
        self.name = name
        self.store = SharedStore(url, node_id=name)
        self.lost: list[str] = []
        self.store.on_lost = self.lost.extend
        self.tables = SharedTables(self.store, name)
        sharing = Sharing(offer_tasks=True, local_first=local_first, shared_catalog=False)
        self.engine = Engine(self.store, auto_tick=False, sharing=sharing)

    def claim(self, session: str = "s-1") -> Any:
        claims = self.tables.claim_for(CHAIN, "python", [(session, "w-1")], _token)
        return claims[0] if claims else None

    def run_claimed(self) -> Any:
        """Claims a task and, owning its execution, records its dispatch."""
        claim = self.claim()
        assert claim is not None and claim.owner == self.name
        assignment = handoff.of(self.engine).dispatch_offer(
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


def _server_node(url: str, name: str = "a") -> SharedNode:
    """A whole shared-mode server in this process, not started."""
    config = ServerConfig(db=url, cluster=True, cluster_mode="shared", node_id=name)
    return SharedNode(
        config,
        node_id=name,
        advertise_addr=f"http://{name}",
        build_engine=lambda store, sharing: Engine(store, auto_tick=False, sharing=sharing),
        make_app=lambda engine, view: create_app(engine, config),
        interval=0.05,
    )


def _queue_stale_row(url: str, execution_id: str, offer_seq: int, node: str | None) -> None:
    """A queued `orbit_tasks` row of unit `s0`, oldest in the queue, as a
    server that lost the execution or the offer could have left it."""
    store = PostgresStore(url)
    try:
        with store.session("stale") as conn:
            conn.execute(
                "INSERT INTO orbit_tasks (execution_id, unit_key, offer_seq, task_name, "
                "contract_version, language, timeout_ms, assignment, node_id, state, "
                "enqueued_ms) VALUES (%s, 's0', %s, 'bench.step', '1.0.0', NULL, NULL, "
                "'{}', %s, 'queued', 0)",
                (execution_id, offer_seq, node),
            )
    finally:
        store.close()


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
        a.engine.workers.complete(first["token"], {"i": 1})
        second = a.run_claimed()
        assert second["step_id"] == "s1" and second["input"] == {"i": 1}
        a.engine.workers.complete(second["token"], {"i": 2})
        assert a.engine.get("x-1")["status"] == "COMPLETED"
        # The end of the execution ends its ownership, in the same commit.
        assert _rows(pg_url, "SELECT count(*) FROM orbit_owners") == [(0,)]
        assert a.claim() is None
    finally:
        a.close()


def test_continue_as_new_keeps_its_owner_until_the_last_run_ends(pg_url: str) -> None:
    a = Node(pg_url, "a")
    try:
        a.engine.deploy(server_ir.countdown())
        a.engine.start("Countdown", input={"n": 3}, execution_id="cd-1")
        runs = 0
        while a.engine.get("cd-1")["status"] == "RUNNING":  # a tick starts the next run
            assert _rows(pg_url, "SELECT node_id, epoch FROM orbit_owners") == [("a", 1)]
            a.engine.tick()
            runs += 1
            assert runs < 10
        assert a.engine.get("cd-1")["status"] == "COMPLETED" and runs >= 1
        assert _rows(pg_url, "SELECT count(*) FROM orbit_owners") == [(0,)]
        assert a.store.owned() == {}
    finally:
        a.close()


def _kid_and_boss() -> tuple[Any, Any]:
    """`Boss` runs the child workflow `Kid`, whose one step is `bench.step`."""
    record = _rec(i=t.INT)
    kid = _finish(
        ir.Definition(
            ir_version=ir.IR_V1,
            name="Kid",
            version="1.0.0",
            input=t.EMPTY_RECORD,
            output=t.EMPTY_RECORD,
            steps=(ir.Step("work", "task", task="bench.step", with_=_obj(i=e.Int(0))),),
            result=e.EMPTY_OBJECT,
            contracts={"bench.step": ir.TaskContract("bench.step", "1.0.0", record, record)},
        )
    )
    child = ir.from_json(kid)
    contract = ir.ChildContract(
        child.name, child.version, child.definition_hash, child.input, child.output
    )
    boss = _finish(
        ir.Definition(
            ir_version=ir.IR_V1,
            name="Boss",
            version="1.0.0",
            input=t.EMPTY_RECORD,
            output=t.EMPTY_RECORD,
            steps=(ir.Step("run", "workflow", workflow="Kid", with_=e.EMPTY_OBJECT),),
            result=e.EMPTY_OBJECT,
            contracts={"workflow:Kid": contract},
        )
    )
    return kid, boss


def test_an_execution_tree_has_one_owner_and_moves_whole(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        kid, boss = _kid_and_boss()
        a.engine.deploy(kid)
        a.engine.deploy(boss)
        a.engine.start("Boss", execution_id="boss-1")
        a.engine.tick()  # the child starts on a tick
        owners = _rows(pg_url, "SELECT execution_id, root_id, node_id FROM orbit_owners")
        assert len(owners) == 2 and {(r[1], r[2]) for r in owners} == {("boss-1", "a")}
        # The tree moves whole: b finishes the child's task and so the parent.
        moved = b.tables.take_over(["boss-1"], "a")
        assert sorted(m[0] for m in moved) == sorted(r[0] for r in owners)
        b.store.adopt(moved)
        assert handoff.of(b.engine).take_over(b.store.histories([m[0] for m in moved]))[0] == 2
        handoff.of(a.engine).release([m[0] for m in moved])
        task = b.run_claimed()
        assert b.engine.workers.complete(task["token"], {"i": 1})["accepted"]
        for _ in range(5):
            if b.engine.get("boss-1")["status"] != "RUNNING":
                break
            b.engine.tick()
        assert b.engine.get("boss-1")["status"] == "COMPLETED"
        assert _rows(pg_url, "SELECT count(*) FROM orbit_owners") == [(0,)]
    finally:
        a.close()
        b.close()


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


def test_a_node_claims_its_own_tasks_first(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        b.engine.reload_definitions()
        b.engine.start("Chain", execution_id="b-1")
        a.engine.start("Chain", execution_id="a-1")
        a.engine.start("Chain", execution_id="a-2")
        # b's own task, though a's are as old (not LOCAL_LEAD_MS older);
        # a's once b has none of its own.
        assert [
            c.execution_id for c in b.tables.claim_for(CHAIN, "python", [("s", "w")] * 3, _token)
        ] == ["b-1"]
        assert b.claim().execution_id == "a-1"
        assert [
            c.execution_id for c in a.tables.claim_for(CHAIN, "python", [("s", "w")] * 3, _token)
        ] == ["a-2"]
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


def test_a_claimed_task_of_an_ended_execution_is_deleted_not_handed_out(pg_url: str) -> None:
    # A task row left queued after its execution ended (put back by a server
    # that had just lost the execution) was claimed, found ownerless, put
    # back and claimed again, for ever.
    a = Node(pg_url, "a")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="live")
        _queue_stale_row(pg_url, "gone", 1, None)
        claims = a.tables.claim_for(CHAIN, "python", [("s-1", "w-1"), ("s-2", "w-2")], _token)
        assert [(c.execution_id, c.owner) for c in claims] == [("live", "a")]
        assert _rows(pg_url, "SELECT execution_id FROM orbit_tasks") == [("live",)]
        assert _rows(pg_url, "SELECT session_id FROM orbit_tasks") == [("s-1",)]
    finally:
        a.close()


def test_a_claim_its_owner_no_longer_wants_is_deleted_and_the_poll_goes_on(pg_url: str) -> None:
    # A row claimed while its unit moved on (ended, or offered again) was
    # left `claimed` until its execution ended, where a re-offer under the
    # same offer number could not replace it.
    node = _server_node(pg_url)
    try:
        node.start()
        node.engine.deploy(server_ir.chain(1))
        node.engine.start("Chain", execution_id="live")
        # An offer of the running unit that it no longer waits for, the
        # oldest in the queue, so it is claimed first.
        _queue_stale_row(pg_url, "live", 99, "a")
        # No poll took the unit's task from the engine: it goes to the queue.
        wait_until(
            lambda: (
                _rows(pg_url, "SELECT count(*) FROM orbit_tasks WHERE offer_seq <> 99") == [(1,)]
            ),
            10,
            "the task to be published",
        )
        session = node.engine.workers.register("w-1", "python", [CHAIN[0]])
        task = node.engine.workers.poll(session["worker_session_id"], 5_000)
        assert task is not None and task["execution_id"] == "live"
        assert _rows(pg_url, "SELECT offer_seq FROM orbit_tasks") == []
    finally:
        node.close()


def _count_queued_rows(url: str) -> None:
    """From now on every row written to the queue is also counted in
    `queue_writes` (a trigger), so a test sees rows that came and went."""
    store = PostgresStore(url)
    try:
        with store.session("audit") as conn:
            conn.execute("CREATE TABLE queue_writes (execution_id TEXT, node_id TEXT)")
            conn.execute(
                "CREATE FUNCTION count_queue_write() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN INSERT INTO queue_writes VALUES (NEW.execution_id, NEW.node_id); "
                "RETURN NEW; END $$"
            )
            conn.execute(
                "CREATE TRIGGER queue_write AFTER INSERT ON orbit_tasks "
                "FOR EACH ROW EXECUTE FUNCTION count_queue_write()"
            )
    finally:
        store.close()


def test_a_task_a_poll_on_its_owner_takes_never_reaches_the_queue(pg_url: str) -> None:
    node = _server_node(pg_url)
    _count_queued_rows(pg_url)
    try:
        node.start()
        node.engine.deploy(server_ir.chain(2))
        session = node.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]
        got: list[Any] = []
        waiting = threading.Thread(
            target=lambda: got.append(node.engine.workers.poll(session, 5_000))
        )
        waiting.start()
        wait_until(lambda: node.engine.desk.polls_waiting, 10, "the poll to wait")
        node.engine.start("Chain", execution_id="here")
        waiting.join(10)
        first = got[0]
        assert first is not None and first["step_id"] == "s0"
        # Tokens name their execution, so any server can route the result.
        assert first["token"].startswith("here/")
        node.engine.workers.complete(first["token"], {"i": 1})
        second = node.engine.workers.poll(session, 5_000)  # queued a moment ago: still here
        assert second is not None and second["step_id"] == "s1"
        node.engine.workers.complete(second["token"], {"i": 2})
        assert node.engine.wait("here", 5_000)["status"] == "COMPLETED"
        assert _rows(pg_url, "SELECT count(*) FROM queue_writes") == [(0,)]
    finally:
        node.close()


def test_a_task_no_poll_on_its_owner_takes_is_queued_for_the_other_servers(
    pg_url: str,
) -> None:
    a = _server_node(pg_url, "a")
    b = _server_node(pg_url, "b")
    _count_queued_rows(pg_url)
    try:
        a.start()
        b.start()
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="there")
        # Nothing polls on `a`: after PUBLISH_S or two, the task is queued.
        wait_until(
            lambda: _rows(pg_url, "SELECT node_id, state FROM orbit_tasks") == [("a", "queued")],
            10,
            "the task to be queued",
        )
        b.engine.reload_definitions()
        session = b.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]
        task = b.engine.workers.poll(session, 5_000)
        assert task is not None and task["execution_id"] == "there"
        # `a` recorded the dispatch from its inbox; the result goes back there.
        b.engine.workers.complete(task["token"], {"i": 1})
        assert a.engine.wait("there", 10_000)["status"] == "COMPLETED"
        history = a.engine.history("there")["events"]
        dispatched = [ev for ev in history if ev["type"] == "StepDispatched"]
        assert [ev["worker_session"] for ev in dispatched] == [session]
        assert _rows(pg_url, "SELECT count(*) FROM queue_writes") == [(1,)]
        assert _rows(pg_url, "SELECT count(*) FROM orbit_tasks") == [(0,)]
    finally:
        a.close(leave=False)
        b.close(leave=False)


def test_a_take_over_queues_the_tasks_that_waited_in_the_dead_servers_engine(
    pg_url: str,
) -> None:
    # `a` is never started: its tasks wait in its engine's index, never
    # queued, and it stops heartbeating. The history says what is pending.
    a = _server_node(pg_url, "a")
    b = _server_node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="orphan")
        assert _rows(pg_url, "SELECT count(*) FROM orbit_tasks") == [(0,)]
        b.start()
        session = b.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]
        task = wait_until(
            lambda: b.engine.workers.poll(session, 200), 20, "b to take the task over"
        )
        assert task["execution_id"] == "orphan" and task["step_id"] == "s0"
        assert _rows(pg_url, "SELECT node_id FROM orbit_owners") == [("b",)]
        b.engine.workers.complete(task["token"], {"i": 1})
        assert b.engine.wait("orphan", 10_000)["status"] == "COMPLETED"
    finally:
        a.close(leave=False)
        b.close(leave=False)


def test_the_task_desk_claims_once_for_all_waiting_polls(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    errors: list[StorageError] = []
    desk = TaskDesk(b.tables, _token, recheck_s=0.2, on_error=errors.append)
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="one")
        got: dict[str, Any] = {}

        def poll(session: str, wait_s: float) -> None:
            got[session] = desk.take(
                CHAIN,
                "python",
                session,
                "w-1",
                time.monotonic() + wait_s,
                gone=lambda: False,
                alive=lambda: None,
            )

        # A poll that does not wait still claims what is queued.
        poll("s-0", 0)
        assert got["s-0"] is not None and got["s-0"].execution_id == "one"
        # Five polls wait; two tasks come: two polls get one each, each
        # claimed for its own session; the others end empty at their deadline.
        threads = [threading.Thread(target=poll, args=(f"s-{i}", 3.0)) for i in range(1, 6)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(desk._waiting.get(desk_key(), [])) == 5, 10, "five waiting polls")
        a.engine.start("Chain", execution_id="two")
        a.engine.start("Chain", execution_id="three")
        for thread in threads:
            thread.join(timeout=10)
        claims = {s: c for s, c in got.items() if c is not None and s != "s-0"}
        assert sorted(c.execution_id for c in claims.values()) == ["three", "two"]
        in_inbox = {e.payload["token"]: e.payload["session_id"] for e in a.tables.pending()}
        assert {c.token: s for s, c in claims.items()}.items() <= in_inbox.items()
        assert errors == []
    finally:
        desk.close()
        a.close()
        b.close()


def desk_key() -> Any:
    return (tuple(sorted(CHAIN)), "python")


def test_notifications_reach_subscribers_before_the_listeners_wait_ends(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # psycopg's notifies(timeout=...) goes on until its timeout: the listener
    # passed wake-ups on only when its wait ended (0.5 s), not when they came.
    monkeypatch.setattr(Listener, "WAIT_S", 30.0)
    store = PostgresStore(pg_url)
    listener = Listener(store, "a")
    got: list[list[str] | None] = []
    arrived = threading.Event()

    def note(payloads: list[str] | None) -> None:
        got.append(payloads)
        if payloads:
            arrived.set()

    try:
        listener.subscribe("orbit_inbox", note)
        wait_until(lambda: got == [None], 10, "the listener's first connection")
        seen = listener.serial("orbit_done")
        with store.session("sender") as conn:
            conn.execute("SELECT pg_notify('orbit_inbox', 'x-1')")
        assert arrived.wait(10)
        assert got[-1] == ["x-1"]
        assert listener.serial("orbit_done") == seen  # other channels stay asleep
    finally:
        listener.close()
        store.close()


def test_an_end_is_announced_only_when_a_server_waits_for_it_elsewhere(pg_url: str) -> None:
    a = _server_node(pg_url, "a")
    b = _server_node(pg_url, "b")
    store = PostgresStore(pg_url)
    ears = store.session("ears")
    try:
        ears.execute("LISTEN orbit_done")
        a.start()
        b.start()
        a.engine.deploy(server_ir.chain(1))
        b.engine.reload_definitions()
        sid = a.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]

        def run(eid: str) -> None:
            a.engine.start("Chain", execution_id=eid)
            task = a.engine.workers.poll(sid, 5_000)
            assert task is not None and task["execution_id"] == eid
            a.engine.workers.complete(task["token"], {"i": 1})

        run("quiet")
        assert a.engine.get("quiet")["status"] == "COMPLETED"
        assert list(ears.notifies(timeout=0.3)) == []  # nobody waited elsewhere
        a.engine.start("Chain", execution_id="watched")
        done: list[Any] = []
        waiting = threading.Thread(target=lambda: done.append(b.engine.wait("watched", 10_000)))
        waiting.start()
        wait_until(
            lambda: (
                _rows(pg_url, "SELECT execution_id, node_id FROM orbit_waits") == [("watched", "b")]
            ),
            10,
            "b to list its wait",
        )
        task = a.engine.workers.poll(sid, 5_000)
        assert task is not None
        a.engine.workers.complete(task["token"], {"i": 1})
        assert [n.channel for n in ears.notifies(timeout=10, stop_after=1)] == ["orbit_done"]
        waiting.join(10)
        assert done[0]["status"] == "COMPLETED"
        assert _rows(pg_url, "SELECT count(*) FROM orbit_waits") == [(0,)]
    finally:
        ears.close()
        store.close()
        a.close(leave=False)
        b.close(leave=False)


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
        a.tables.done([(entries[0], {"ok": {"seq": 5}})])
        assert b.tables.reply(first) == (True, {"ok": {"seq": 5}})
        assert [e.seq for e in a.tables.pending()] == [second]
        # A sender that gives up takes its entry back, unless it was applied.
        assert not b.tables.withdraw(first)
        assert b.tables.withdraw(second)
        assert a.tables.pending() == []
        # Nobody waits for the reply to a result: the applied entry goes.
        b.tables.put("r-1", "undelivered", {"token": "r-1/t"})
        (result,) = a.tables.pending()
        a.tables.done([(result, {"ok": True})])
        assert _rows(pg_url, "SELECT count(*) FROM orbit_inbox") == [(0,)]
    finally:
        a.close()
        b.close()


def test_an_inbox_entry_is_marked_applied_by_the_commit_of_its_events(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.review())
        a.engine.start("Review", input={"order_id": "o-1"}, execution_id="r-1")
        wrong = b.tables.put("r-1", "signal", {"name": "nope", "payload": {}})
        right = b.tables.put("r-1", "signal", {"name": "decision", "payload": {}})
        # A refused command carries no receipt: its entry is still pending.
        with handoff.of(a.engine).receipt(str(wrong)), pytest.raises(OrbitError):
            a.engine.signal("r-1", "nope", {})
        assert [e.seq for e in a.tables.pending()] == [wrong, right]
        with handoff.of(a.engine).receipt(str(right)):
            a.engine.signal("r-1", "decision", {"approved": True})
        # Applied in the signal's own transaction, before any reply is written.
        assert [e.seq for e in a.tables.pending()] == [wrong]
        assert not b.tables.withdraw(right)
        events = a.engine.events("r-1")
        assert [type(e).__name__ for e in events].count("SignalReceived") == 1
    finally:
        a.close()
        b.close()


def test_attempts_to_stop_reach_a_session_through_any_server(pg_url: str) -> None:
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="z-1")
        claim = b.claim()  # the worker polls through b
        assert claim is not None and claim.owner == "a"
        (entry,) = a.tables.pending()
        assert entry.kind == "dispatched"
        assert handoff.of(a.engine).dispatch_offer(
            _session(),
            execution_id="z-1",
            unit_key=entry.payload["unit_key"],
            offer_seq=entry.payload["offer_seq"],
            token=entry.payload["token"],
        )
        a.engine.cancel("z-1")
        # The owner posts what the session should stop, once.
        cancels = handoff.of(a.engine).cancels(["s-1"])
        assert cancels == {"s-1": [claim.token]}
        assert handoff.of(a.engine).cancels(["s-1"]) == {}
        a.tables.post_cancels(cancels)
        assert b.tables.take_cancels("s-1") == [claim.token]
        assert b.tables.take_cancels("s-1") == []
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
        adopted, in_flight = handoff.of(b.engine).take_over(b.store.histories(["t-1"]))
        assert (adopted, in_flight) == (1, 1)
        # a's late write is refused by the database; memory stays as stored.
        with pytest.raises(StorageError) as refused:
            a.engine.workers.complete(held["token"], {"i": 1})
        assert refused.value.message == (
            "fenced: execution `t-1` is owned by node `b` at epoch 2; this node held epoch 1"
        )
        assert a.lost == ["t-1"]
        assert handoff.of(a.engine).release(a.lost) == 1
        # The worker's result reaches the new owner, which carries on.
        assert b.engine.workers.complete(held["token"], {"i": 1})["accepted"]
        b.run_claimed()
        assert _rows(pg_url, "SELECT node_id, epoch FROM orbit_owners") == [("b", 2)]
    finally:
        a.close()
        b.close()


def _record_writes(url: str) -> None:
    """From now on every row written to the history or the ownership table
    is recorded in `writes` with the client statement that wrote it and
    its transaction (triggers)."""
    store = PostgresStore(url)
    try:
        with store.session("audit") as conn:
            conn.execute(
                "CREATE TABLE writes (tab TEXT, execution_id TEXT, query TEXT, xid BIGINT)"
            )
            conn.execute(
                "CREATE FUNCTION record_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "INSERT INTO writes SELECT TG_TABLE_NAME, "
                "CASE WHEN TG_OP = 'DELETE' THEN OLD.execution_id ELSE NEW.execution_id END, "
                "current_query(), txid_current(); RETURN NULL; END $$"
            )
            for table in ("execution_events", "orbit_owners"):
                conn.execute(
                    f"CREATE TRIGGER {table}_write AFTER INSERT OR DELETE ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION record_write()"
                )
    finally:
        store.close()


def test_a_usual_commit_is_one_statement_with_its_fence_and_ownership(pg_url: str) -> None:
    a = Node(pg_url, "a", local_first=True)
    try:
        a.engine.deploy(server_ir.chain(1))
        _record_writes(pg_url)
        a.engine.start("Chain", execution_id="o-1")
        sid = a.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]
        task = a.engine.workers.poll(sid, 0)
        assert task is not None
        a.engine.workers.complete(task["token"], {"i": 1})
        assert a.engine.get("o-1")["status"] == "COMPLETED"
        writes = _rows(pg_url, "SELECT tab, query, xid FROM writes ORDER BY xid")
        # Start, dispatch, completion: three commits, each one statement
        # that wrote the history and the ownership row; those that changed
        # an execution it held with the fence.
        xids = sorted({xid for _, _, xid in writes})
        assert len(xids) == 3
        queries = [{q for _, q, x in writes if x == xid} for xid in xids]
        assert [len(q) for q in queries] == [1, 1, 1]
        assert ["orbit_fence" in q.pop() for q in queries] == [False, True, True]
        tables = [(t, x) for t, _, x in writes if t == "orbit_owners"]
        assert [x for _, x in tables] == [xids[0], xids[-1]]  # inserted, deleted
        assert _rows(pg_url, "SELECT count(*) FROM orbit_owners") == [(0,)]
    finally:
        a.close()


def test_publishing_with_nothing_queued_runs_no_command(pg_url: str) -> None:
    a = Node(pg_url, "a", local_first=True)
    commands: list[Any] = []
    submit = a.engine._pipeline.submit

    def counted(*args: Any, **kwargs: Any) -> Any:
        commands.append(args)
        return submit(*args, **kwargs)

    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine._pipeline.submit = counted  # type: ignore[method-assign]
        assert [handoff.of(a.engine).publish_stale() for _ in range(3)] == [0, 0, 0]
        assert commands == []
        a.engine.start("Chain", execution_id="p-1")
        commands.clear()
        # Marked by the first call, published by the second, then idle again.
        assert [handoff.of(a.engine).publish_stale() for _ in range(4)] == [0, 1, 0, 0]
        assert len(commands) == 3
        assert _rows(pg_url, "SELECT execution_id FROM orbit_tasks") == [("p-1",)]
    finally:
        a.close()


def test_a_deposed_owner_cannot_offer_the_tasks_of_an_execution_it_lost(pg_url: str) -> None:
    """Found by orbit_core's simulation of shared mode: a group that only
    offers tasks (publishing those no poll took) wrote them to the queue
    unfenced, so a server that had lost the execution could queue a task
    its new owner offers too (handed out twice)."""
    a = Node(pg_url, "a", local_first=True)
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="q-1")
        assert handoff.of(a.engine).publish_stale() == 0  # marks the task as waiting
        moved = b.tables.take_over(["q-1"], "a")  # a stopped heartbeating
        b.store.adopt(moved)
        handoff.of(b.engine).take_over(b.store.histories(["q-1"]))
        before = _rows(pg_url, "SELECT node_id FROM orbit_tasks")
        with pytest.raises(StorageError) as refused:
            handoff.of(a.engine).publish_stale()
        assert refused.value.message.startswith("fenced: execution `q-1` is owned by node `b`")
        assert _rows(pg_url, "SELECT node_id FROM orbit_tasks") == before
        assert a.lost == ["q-1"]
        assert handoff.of(a.engine).release(a.lost) == 1
        assert handoff.of(a.engine).publish_stale() == 0  # nothing left to offer
    finally:
        a.close()
        b.close()


def test_a_one_statement_commit_of_a_deposed_owner_writes_nothing(pg_url: str) -> None:
    a = Node(pg_url, "a", local_first=True)
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(2))
        a.engine.start("Chain", execution_id="f-1")
        sid = a.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]
        held = a.engine.workers.poll(sid, 0)
        assert held is not None
        moved = b.tables.take_over(["f-1"], "a")
        assert moved == [("f-1", "f-1", 2)]
        before = _rows(pg_url, "SELECT count(*) FROM execution_events")
        with pytest.raises(StorageError) as refused:
            a.engine.workers.complete(held["token"], {"i": 1})
        assert refused.value.message == (
            "fenced: execution `f-1` is owned by node `b` at epoch 2; this node held epoch 1"
        )
        assert a.lost == ["f-1"] and a.store.owned() == {}
        assert _rows(pg_url, "SELECT count(*) FROM execution_events") == before
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
        handoff.of(b.engine).take_over(b.store.histories(["c-1"]))
        again = b.run_claimed()
        assert again["execution_id"] == "c-1" and again["token"] != claim.token
    finally:
        a.close()
        b.close()


def test_a_claim_left_behind_by_a_failed_dispatch_is_claimable_again_once_re_offered(
    pg_url: str,
) -> None:
    # Issue 40's campaign: a server claimed its own task, the commit of the
    # dispatch failed and so did putting the claim back (the database was
    # restarting). The group's undo offered the unit again under the same
    # offer number, which the claimed row swallowed (ON CONFLICT DO NOTHING):
    # no server ever handed the task out and the execution never ended.
    a = Node(pg_url, "a")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="c-1")
        left = a.claim()  # its dispatch and its unclaim both failed
        assert left is not None
        # The unit is offered again, as a group's undo (or a take-over) does.
        moved = handoff.of(a.engine)
        moved.release(["c-1"])
        moved.take_over(a.store.histories(["c-1"]))
        a.engine.tick()
        again = a.run_claimed()
        assert again["execution_id"] == "c-1" and again["token"] != left.token
    finally:
        a.close()


def test_a_group_that_offers_a_task_twice_commits(pg_url: str) -> None:
    # An offer made again after a failed group can ride in a later group
    # twice; the queue's upsert must take it once (a statement may not
    # update one row twice), or every such group fails.
    a = Node(pg_url, "a")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="c-1")
        (row,) = _rows(pg_url, "SELECT unit_key, offer_seq, assignment FROM orbit_tasks")
        offer = TaskOffer("c-1", row[0], int(row[1]), "bench.step", "1.0.0", "python", None, {})
        a.claim()  # left behind, so the upsert updates it
        a.store.commit(CommitBatch(offers=[offer, offer]))
        assert _rows(pg_url, "SELECT state FROM orbit_tasks") == [("queued",)]
    finally:
        a.close()


def test_a_claim_refused_while_its_execution_was_paused_is_claimable_after_the_resume(
    pg_url: str,
) -> None:
    # Another server claimed the task; its `dispatched` entry reached the
    # owner while the execution was paused, so the owner refused it (and
    # the claimer's worker was told to stop). The resume offers the unit
    # again under the same offer number: the claimed row must not swallow it.
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="c-1")
        claim = b.claim()
        assert claim is not None and claim.owner == "a"
        a.engine.operations.pause("c-1")
        (entry,) = a.tables.pending()
        assert entry.kind == "dispatched"
        refused = handoff.of(a.engine).dispatch_offer(
            _session(),
            execution_id="c-1",
            unit_key=entry.payload["unit_key"],
            offer_seq=entry.payload["offer_seq"],
            token=entry.payload["token"],
        )
        assert refused is None
        a.tables.done([(entry, {"ok": False})])
        a.engine.operations.resume("c-1")
        again = a.run_claimed()
        assert again["execution_id"] == "c-1" and again["token"] != claim.token
    finally:
        a.close()
        b.close()


def test_a_re_offer_leaves_a_claim_whose_dispatch_waits_in_the_owners_inbox(pg_url: str) -> None:
    # A claim made through another server is in flight until its owner
    # applies the `dispatched` entry: offering the unit again meanwhile must
    # not hand the task to a second worker.
    a = Node(pg_url, "a")
    b = Node(pg_url, "b")
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="c-1")
        claim = b.claim()
        assert claim is not None and claim.owner == "a"
        moved = handoff.of(a.engine)
        moved.release(["c-1"])
        moved.take_over(a.store.histories(["c-1"]))
        a.engine.tick()
        assert a.claim() is None and b.claim() is None
    finally:
        a.close()
        b.close()


def test_a_take_over_waits_for_a_claim_in_progress_instead_of_deadlocking(pg_url: str) -> None:
    # A claim locks its task's row, then reads the owner's row FOR SHARE; a
    # take-over that updated the owners' rows first and then the queue's
    # deadlocked with it (PostgreSQL aborted one of the two).
    a = Node(pg_url, "a")
    c = Node(pg_url, "c")
    admin = PostgresStore(pg_url)
    try:
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="d-1")
        with admin.session("claimer") as claimer, claimer.transaction():
            claimer.execute("SELECT id FROM orbit_tasks WHERE execution_id = 'd-1' FOR UPDATE")
            moved: list[Any] = []
            taking = threading.Thread(target=lambda: moved.extend(c.tables.take_over(["d-1"], "a")))
            taking.start()

            def take_over_waits() -> bool:
                rows = _rows(
                    pg_url,
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = 'orbit-shared:c' AND wait_event_type = 'Lock'",
                )
                return rows == [(1,)]

            wait_until(take_over_waits, 10, "the take-over to wait for the claim's lock")
            # The claim's second half: not blocked, no deadlock.
            owner = claimer.execute(
                "SELECT node_id FROM orbit_owners WHERE execution_id = 'd-1' FOR SHARE"
            ).fetchone()
            assert owner == ("a",)
        taking.join(timeout=10)
        assert [m[0] for m in moved] == ["d-1"]
    finally:
        admin.close()
        a.close()
        c.close()


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


def _deposed(pg_url: str) -> tuple[SharedNode, SharedNode]:
    """Servers a and b; `d-1` started on a and taken over by b, and a's
    next write to it refused: a's store has let it go, but the group undone
    read it back into a's engine (issue 40's shared campaign)."""
    a, b = _server_node(pg_url, "a"), _server_node(pg_url, "b")
    a.engine.deploy(server_ir.chain(2))
    a.engine.start("Chain", execution_id="d-1")
    moved = b._own_tables.take_over(["d-1"], "a")
    b.store.adopt(moved)
    b.engine.handoff.take_over(b.store.histories(["d-1"]))
    with pytest.raises(StorageError, match="fenced"):
        a.engine.engine.cancel("d-1")  # (the wrapped engine: a thinks it owns it)
    assert not a.store.owns("d-1") and a.engine.handoff.holds("d-1")
    return a, b


def test_a_failed_round_does_not_leave_a_lost_execution_in_memory(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fenced commit named d-1 lost; the round that was to drop it from
    # memory failed (the database went away) and forgot it: the stale copy
    # answered reads with RUNNING after the execution had completed on b.
    a, b = _deposed(pg_url)
    try:
        fails = [StorageError("the database is away (simulated)")]

        def owned_rows() -> dict[str, int]:
            if fails:
                raise fails.pop()
            return SharedTables.owned_rows(a._own_tables)

        monkeypatch.setattr(a._own_tables, "owned_rows", owned_rows)
        with pytest.raises(StorageError, match="away"):
            a.round()
        a.round()
        assert not a.engine.handoff.holds("d-1")
        b.engine.cancel("d-1")
        assert a.engine.get("d-1")["status"] == "CANCELLED"
    finally:
        a.close(leave=False)
        b.close(leave=False)


def test_a_copy_of_an_execution_owned_elsewhere_is_dropped_by_the_next_round(
    pg_url: str,
) -> None:
    # However the copy came back (here: the undone group read it again
    # after the loss was noted and dropped), the round finds it.
    a, b = _deposed(pg_url)
    try:
        with a._lost_lock:
            a._lost.clear()
        a.round()
        assert not a.engine.handoff.holds("d-1")
    finally:
        a.close(leave=False)
        b.close(leave=False)


def test_a_server_holding_a_stale_copy_leaves_the_owners_inbox_alone(pg_url: str) -> None:
    # Every server hears an entry's notification. The stale copy on a found
    # the token unknown and the claim's dispatch no longer wanted, deleted
    # the `dispatched` entry and told the worker to stop: its refusals commit
    # nothing, so no fence stopped them, and b never saw the entries.
    a, b = _deposed(pg_url)
    try:
        b.tables.put("d-1", "undelivered", {"token": "d-1/unknown"})
        assert a.apply_inbox(["d-1"]) == 0
        assert [e.kind for e in b.tables.pending()] == ["undelivered"]
        assert b.apply_inbox(["d-1"]) == 1
    finally:
        a.close(leave=False)
        b.close(leave=False)


def test_an_execution_whose_creation_was_taken_unheard_is_run_by_its_node(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database took the commit that created it, but the connection
    # dropped during COMMIT and the check that follows failed too: the
    # store never recorded owning it, so each of its writes was refused
    # and, its node being live, nobody else would take it over.
    a = _server_node(pg_url, "a")
    try:
        a.engine.deploy(server_ir.chain(1))
        write = PostgresStore._write

        def unheard(store: Any, *args: Any, **named: Any) -> None:
            write(store, *args, **named)
            raise StorageError("lost the connection to PostgreSQL (simulated)")

        monkeypatch.setattr(PostgresStore, "_write", unheard)
        with pytest.raises(StorageError, match="simulated"):
            a.engine.start("Chain", execution_id="u-1")
        monkeypatch.setattr(PostgresStore, "_write", write)
        assert _rows(pg_url, "SELECT node_id, epoch FROM orbit_owners") == [("a", 1)]
        assert not a.store.owns("u-1")
        a.round()
        assert a.store.owns("u-1") and a.engine.handoff.holds("u-1")
        assert a.engine.cancel("u-1")["status"] == "CANCELLED"
    finally:
        a.close(leave=False)


def test_a_start_whose_commit_failed_leaves_no_step_slot_behind(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The slot of a step's concurrency is a row taken in a transaction of
    # its own, before the group's commit. The commit that was to create
    # x-1 failed: the execution never existed, so no owner reconciled its
    # row, and it held c-1's one slot for ever (shared simulation seed
    # 610225: every later execution of the key waited).
    a = _server_node(pg_url, "a")
    try:
        definition = demo_definition(
            "SlotOnce", step="concurrency { max: 1, key: input.customer_id }"
        )
        a.engine.deploy(definition)

        def refused(store: Any, *args: Any, **named: Any) -> None:
            raise StorageError("the database refused the commit (simulated)")

        monkeypatch.setattr(PostgresStore, "_write", refused)
        with pytest.raises(StorageError, match="simulated"):
            a.engine.start("SlotOnce", None, {"customer_id": "c-1"}, "x-1")
        monkeypatch.undo()
        assert _rows(pg_url, "SELECT execution_id FROM orbit_step_slots") == []
        a.engine.start("SlotOnce", None, {"customer_id": "c-1"}, "x-2")
        assert _rows(pg_url, "SELECT execution_id FROM orbit_step_slots") == [("x-2",)]
        # The database away when the row is to go: the next tick deletes it.
        monkeypatch.setattr(PostgresStore, "_write", refused)
        slots = a._slot_tables
        monkeypatch.setattr(slots, "free_step_slots", functools.partial(refused, slots))
        with pytest.raises(StorageError, match="simulated"):
            a.engine.start("SlotOnce", None, {"customer_id": "c-2"}, "x-3")
        monkeypatch.undo()
        assert len(_rows(pg_url, "SELECT 1 FROM orbit_step_slots WHERE key = 'c-2'")) == 1
        a.engine.tick()
        assert _rows(pg_url, "SELECT execution_id FROM orbit_step_slots") == [("x-2",)]
        # A unit of such a start refused a slot has a waiting row: it goes at
        # once too (a server stopped before its next tick left it at the head
        # of the key's line for good: simulation seed 626956).
        monkeypatch.setattr(PostgresStore, "_write", refused)
        with pytest.raises(StorageError, match="simulated"):
            a.engine.start("SlotOnce", None, {"customer_id": "c-1"}, "x-4")
        monkeypatch.undo()
        assert _rows(pg_url, "SELECT execution_id FROM orbit_step_waits") == []
    finally:
        a.close(leave=False)


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


def test_a_stuck_round_does_not_stop_the_heartbeat(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The heartbeat was the first step of the round, which waited for a
    # vacuum of the queue for up to 4 s under load: the other servers took
    # this one's executions while it was serving them.
    stuck = threading.Event()
    release = threading.Event()

    def round_that_hangs(node: SharedNode) -> None:
        stuck.set()
        release.wait(30)

    monkeypatch.setattr(SharedNode, "round", round_that_hangs)
    node = _server_node(pg_url)
    try:
        node.start()
        assert stuck.wait(10)
        ages: list[int] = []

        def fresh() -> bool:
            (row,) = [n for n in node.tables.nodes(10**9) if n.node_id == "a"]
            ages.append(row.heartbeat_age_ms)
            return len(ages) > 20 and ages[-1] < 1000

        wait_until(fresh, 10, "heartbeats while the round hangs")
        assert node.serving()
    finally:
        release.set()
        node.close()


def test_rendezvous_spreads_trees_over_the_live_nodes() -> None:
    nodes = ["n1", "n2", "n3"]
    share = [rendezvous(f"root-{i}", nodes) for i in range(300)]
    assert {n: share.count(n) for n in nodes} == {
        n: share.count(n) for n in nodes if share.count(n) > 60
    }
    # Every server computes the same answer.
    assert share == [rendezvous(f"root-{i}", list(reversed(nodes))) for i in range(300)]


# ---- real processes


INTERVAL_MS = 200
ENV = {"ORBIT_CLUSTER_INTERVAL_MS": str(INTERVAL_MS)}
HERE = Path(__file__).resolve().parent


def _wait(check: Callable[[], Any], timeout: float, what: str, *logs: ServerProcess) -> Any:
    return wait_until(check, timeout, what, *logs, every=0.02)


def _shared_args(node: str) -> list[str]:
    return [
        "--cluster",
        "--cluster-mode",
        "shared",
        "--node-id",
        node,
        "--session-timeout",
        "2",
        "--node-timeout",
        "2",
    ]


def _shared(url: str, node: str, *args: str) -> ServerProcess:
    return ServerProcess(url, *_shared_args(node), *args, env=ENV)


@pytest.fixture
def three(pg_url: str) -> Iterator[list[ServerProcess]]:
    yield from shared_trio(pg_url, _shared)


def _owned(server: ServerProcess) -> int:
    return int(server.http().get("/v1/health").body["owned_executions"])


def _succeeded(api: Http, eid: str) -> list[str]:
    events = api.get(f"/v1/executions/{eid}/history").body["events"]
    return [e["step"] for e in events if e["type"] == "StepSucceeded"]


def test_every_server_serves_and_commands_reach_the_owner(three: list[ServerProcess]) -> None:
    a, b, c = three
    log = a.log()
    assert re.search(
        r'cluster mode: shared \(every server active\) node_id=a advertise_addr="http://127\.0\.0\.1:\d+" '
        r"node_timeout_ms=2000",
        log,
    ), log
    assert "shared: node is serving node_id=a resumed=0" in log
    for server in three:
        assert server.http().get("/v1/ready").status == 200
    ready = b.http().get("/v1/ready").body
    assert {k: ready[k] for k in ("role", "node_id", "term", "leader", "ready")} == {
        "role": "shared",
        "node_id": "b",
        "term": None,
        "leader": None,
        "ready": True,
    }
    assert [n["node_id"] for n in ready["nodes"]] == ["a", "b", "c"]
    assert all(n["live"] for n in ready["nodes"])
    # Deployed through a, started through b (b owns it), signalled through c.
    assert a.http().post("/v1/workflows", server_ir.review()).status == 201
    started = b.http().post(
        "/v1/executions",
        {"workflow": "Review", "execution_id": "rv-1", "input": {"order_id": "o-1"}},
    )
    assert started.status == 201, started
    health = b.http().get("/v1/health").body
    assert (health["role"], health["owned_executions"], health["active_executions"]) == (
        "shared",
        1,
        1,
    )
    bad = c.http().post("/v1/executions/rv-1/signals/nope", {})
    assert bad.status == 404 and bad.body["error"]["code"] == "UNKNOWN_SIGNAL", bad
    sent = c.http().post("/v1/executions/rv-1/signals/decision", {"approved": True})
    assert sent.status == 200, sent
    assert sent.body["accepted"] is True and sent.body["seq"] > 0
    # A worker registered through a polls through c and reports through a.
    worker = RawWorker(a.http(), "w-1", [("reviews.record", "1.0.0")])
    assert worker.register().status == 200
    through_c = RawWorker(c.http(), "w-1", [])
    through_c.session = worker.session
    task = through_c.task()
    assert task["execution_id"] == "rv-1" and task["token"].startswith("rv-1/")
    # Every server lists the worker online, whichever it talks to.
    for server in three:
        (listed,) = server.http().get("/v1/workers").body["workers"]
        assert (listed["worker_id"], listed["online"], listed["sessions"]) == ("w-1", True, 1)
    assert worker.complete(task["token"], {"receipt": "r-1"}).body["accepted"] is True
    done = a.http().get("/v1/executions/rv-1/wait?timeout_ms=10000").body
    assert done["status"] == "COMPLETED", done
    events = b.http().get("/v1/executions/rv-1/history").body["events"]
    dispatched = [e for e in events if e["type"] == "StepDispatched"]
    assert [d["token"] for d in dispatched] == [task["token"]]
    # A cancel through another server answers with the owner's refusal.
    late = c.http().post("/v1/executions/rv-1/cancel", {})
    assert late.status == 409 and late.body["error"]["code"] == "EXECUTION_FINISHED", late
    # b leaves gracefully: its execution moves without waiting for the node timeout.
    parked = b.http().post(
        "/v1/executions",
        {"workflow": "Review", "execution_id": "rv-2", "input": {"order_id": "o-2"}},
    )
    assert parked.status == 201, parked
    assert b.stop(signal.SIGTERM) == 0
    assert "shared: left the cluster; other servers take over this server's executions" in (b.log())
    _wait(lambda: _owned(a) + _owned(c) == 1, 10, "rv-2 to move", a, c)
    signalled = a.http().post("/v1/executions/rv-2/signals/decision", {"approved": False})
    assert signalled.status == 200, signalled


def _start_worker(tmp_path: Path, name: str, server: str) -> subprocess.Popen[bytes]:
    """tests/cluster_worker.py (the Python SDK) polling `server`; every
    attempt it runs is a line of runs.txt; it holds `s1` until `release`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
    env.update(
        ORBIT_SERVER=server,
        CLUSTER_RUNS=str(tmp_path / "runs.txt"),
        CLUSTER_RELEASE=str(tmp_path / "release"),
        CLUSTER_HOLD_STEP="s1",
        PYTHONUNBUFFERED="1",
    )
    with open(tmp_path / f"worker-{name}.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, str(HERE / "cluster_worker.py")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _signalled_chain() -> Any:
    """`Go`: a task, then a wait for the signal `go`, then two more tasks
    (each `bench.step`, fed the previous step's output)."""
    record = _rec(i=t.INT)

    def step(name: str, after: str, source: str | None) -> ir.Step:
        value: e.Expr = _get(e.StepRef(source), "i") if source else e.Int(0)
        after_it = (after,) if after else ()
        return ir.Step(name, "task", task="bench.step", depends_on=after_it, with_=_obj(i=value))

    return _finish(
        ir.Definition(
            ir_version=ir.IR_V2,
            name="Go",
            version="1.0.0",
            input=t.EMPTY_RECORD,
            output=t.EMPTY_RECORD,
            steps=(
                step("s0", "", None),
                ir.Step("go", "await", signal="go", timeout_ms=3_600_000, depends_on=("s0",)),
                step("s1", "go", "s0"),
                step("s2", "s1", "s1"),
            ),
            result=e.EMPTY_OBJECT,
            contracts={"bench.step": ir.TaskContract("bench.step", "1.0.0", record, record)},
            signals=(ir.Signal("go", t.EMPTY_RECORD),),
        )
    )


def _finished(server: ServerProcess, eid: str) -> Any:
    """The execution's document once it is no longer running, else False."""
    document = server.http().get(f"/v1/executions/{eid}").body
    return document["status"] != "RUNNING" and document


def _runs(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "runs.txt"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.timeout(240)
def test_a_server_killed_mid_run_has_its_executions_taken_over(
    three: list[ServerProcess], tmp_path: Path
) -> None:
    """Executions started through every server, Python SDK workers
    connected to different servers (the one of the server killed goes
    through a proxy that moves on to a live server); c is SIGKILLed while
    every worker holds a task. Every execution completes exactly once, and
    a step runs again only as a redelivery of the same attempt."""
    a, b, c = three
    by_name = {"a": a, "b": b, "c": c}
    assert a.http().post("/v1/workflows", _signalled_chain()).status == 201
    ids = [f"k-{server_name}-{i}" for server_name in "abc" for i in range(2)]
    for eid in ids:
        server = by_name[eid.split("-")[1]]
        reply = server.http().post("/v1/executions", {"workflow": "Go", "execution_id": eid})
        assert reply.status == 201, reply
    proxy = Proxy(lambda: [c.addr if c.proc else "", a.addr, b.addr])
    workers = [
        _start_worker(tmp_path, "a", f"http://{a.addr}"),
        _start_worker(tmp_path, "b", f"http://{b.addr}"),
        _start_worker(tmp_path, "c", proxy.url),
    ]
    try:
        # Each execution is signalled through the next server after its owner.
        for eid in ids:
            through = by_name["abc"["abc".index(eid.split("-")[1]) - 2]]
            sent = through.http().post(f"/v1/executions/{eid}/signals/go", {})
            assert sent.status == 200 and sent.body["accepted"] is True, sent
        # Every worker (concurrency 2) holds an `s1`: all six are in flight.
        _wait(
            lambda: len([r for r in _runs(tmp_path) if r[1] == "s1"]) >= 6,
            60,
            "every s1 to be running",
            a,
            b,
            c,
        )
        # c owns what it started (a busy machine may have moved some already).
        assert _owned(c) >= 1
        c.stop(signal.SIGKILL)
        (tmp_path / "release").touch()
        for eid in ids:
            done = _wait(functools.partial(_finished, a, eid), 60, f"{eid} to finish", a, b)
            assert done["status"] == "COMPLETED", done
            assert _succeeded(a.http(), eid) == ["s0", "s1", "s2"]
            events = a.http().get(f"/v1/executions/{eid}/history").body["events"]
            assert [e["type"] for e in events].count("SignalReceived") == 1
        logs = a.log() + b.log()
        assert "shared: taking over executions of a node that stopped heartbeating" in logs
        assert re.search(
            r"shared: took ownership of executions executions=\d+ in_flight=\d+ from=c", logs
        )
        # At-least-once only: a step ran again only as a redelivery.
        by_step: dict[tuple[str, str], list[list[str]]] = {}
        for run in _runs(tmp_path):
            by_step.setdefault((run[0], run[1]), []).append(run)
        assert sorted({eid for eid, _ in by_step}) == sorted(ids)
        for runs in by_step.values():
            assert runs[0][3] == "False", runs
            assert all(r[3] == "True" for r in runs[1:]), runs
        nodes = a.http().get("/v1/health").body["nodes"]
        assert [n["node_id"] for n in nodes] == ["a", "b"]  # c: dead and owns nothing
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(10)
        proxy.close()


def test_a_second_server_with_a_running_node_id_is_refused(
    three: list[ServerProcess], pg_url: str
) -> None:
    a = three[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
    env.update(ENV)
    twin = subprocess.run(
        [ORBIT, "server", "--db", pg_url, "--addr", "127.0.0.1:0", *_shared_args("a")],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    # It waited three node timeouts for the other `a` to stop, then gave up.
    assert twin.returncode == 1, twin.stderr
    assert re.search(
        r"ERROR orbit: cannot join the shared cluster: STORAGE_ERROR: another server with node "
        r"id `a` is running \(it heartbeated \d+ ms ago\); give every server its own --node-id",
        twin.stderr,
    ), twin.stderr
    # The running one is untouched.
    assert a.http().get("/v1/ready").status == 200


def _fired(server: ServerProcess) -> float:
    text = server.http().get("/v1/metrics").text
    match = re.search(r"^orbit_schedules_fired_total (\S+)$", text, re.M)
    assert match, text
    return float(match[1])


def test_each_schedule_occurrence_is_fired_by_one_server(three: list[ServerProcess]) -> None:
    a, b, c = three
    assert a.http().post("/v1/workflows", server_ir.chain(1)).status == 201
    # Chain's task never runs here: overlap "allow" starts every occurrence.
    body = {"schedule_id": "tick", "workflow": "Chain", "interval": "1s", "overlap": "allow"}
    assert b.http().post("/v1/schedules", body).status == 201
    _wait(lambda: b.http().get("/v1/schedules/tick").body["fired"] >= 4, 20, "four fires", *three)
    # The one that created it stops: the others carry on with it.
    b.stop(signal.SIGKILL)
    before = a.http().get("/v1/schedules/tick").body["fired"]
    _wait(
        lambda: a.http().get("/v1/schedules/tick").body["fired"] >= before + 3,
        30,
        "fires after b stopped",
        a,
        c,
    )
    assert a.http().post("/v1/schedules/tick/pause", {}).status == 200
    schedule = a.http().get("/v1/schedules/tick").body
    runs = a.http().get("/v1/executions?workflow=Chain&limit=1000").body["executions"]
    ids = [e["execution_id"] for e in runs]
    assert len(ids) == len(set(ids))
    # Every fire started one execution, on one server.
    assert schedule["fired"] <= len(ids) <= schedule["fired"] + 1, (schedule, ids)
    assert _fired(a) + _fired(c) <= schedule["fired"]


def _processes(server: ServerProcess) -> list[int]:
    """The arbiter and its worker (which holds the engine)."""
    assert server.proc is not None
    root = server.proc.pid
    return [root, *(p for p in _pids() if _parent_of(p) == root)]


def test_a_server_paused_past_the_node_timeout_cannot_write_when_it_resumes(
    three: list[ServerProcess],
) -> None:
    a, b, c = three
    assert a.http().post("/v1/workflows", server_ir.chain(2)).status == 201
    assert c.http().post("/v1/executions", {"workflow": "Chain", "execution_id": "p-1"}).status
    worker = RawWorker(a.http(), "w-1", [("bench.step", "1.0.0")])
    assert worker.register().status == 200
    token = worker.task()["token"]  # claimed through a; c records the dispatch

    def dispatched() -> bool:
        events = a.http().get("/v1/executions/p-1/history").body["events"]
        return any(e["type"] == "StepDispatched" for e in events)

    _wait(dispatched, 10, "c to record the dispatch", c)
    frozen = _processes(c)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        _wait(
            lambda: (
                "took ownership of executions executions=1 in_flight=1 from=c" in a.log() + b.log()
            ),
            20,
            "a take-over",
            a,
            b,
        )
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    new_owner = "a" if "from=c" in a.log() else "b"
    # Resumed, c still holds p-1 for a moment: the database refuses its
    # write, or c already dropped it and sends the result to the owner.
    late = c.http().post("/v1/tasks/complete", {"token": token, "output": {"i": 1}})
    if late.status == 500:
        assert late.body["error"]["code"] == "STORAGE_ERROR"
        assert late.body["error"]["message"] == (
            f"fenced: execution `p-1` is owned by node `{new_owner}` at epoch 2; "
            "this node held epoch 1"
        )
        assert worker.complete(token, {"i": 1}).body["accepted"] is True
    else:
        assert late.status == 200 and late.body["accepted"] is True, late
    _wait(lambda: "shared: lost executions to another server" in c.log(), 10, "c to drop p-1", c)
    # Silent through the take-over, past the session timeout: its session
    # expired, so the worker registers again, as chapter 68 has it do.
    assert worker.register().status == 200
    second = worker.task()
    assert second["step_id"] == "s1"
    assert worker.complete(second["token"], {"i": 2}).status == 200
    done = a.http().get("/v1/executions/p-1/wait?timeout_ms=10000").body
    assert done["status"] == "COMPLETED", done
    assert _succeeded(a.http(), "p-1") == ["s0", "s1"]


def test_grpc_workers_are_served_like_http_ones(pg_url: str) -> None:
    """gRPC with --cluster-mode shared (refused at start before): a gRPC
    worker on one server runs the tasks of an execution another server owns,
    its results reaching the owner, as an HTTP worker's do."""
    servers = [_shared(pg_url, name, "--grpc-addr", "127.0.0.1:0") for name in ("a", "b")]
    try:
        a, b = (server.start(timeout=90) for server in servers)
        assert re.search(r"gRPC worker protocol listening addr=127\.0\.0\.1:\d+", b.log())
        api = a.http()
        assert api.post("/v1/workflows", server_ir.chain(2)).status == 201
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "g-1"}).status
        with grpc.insecure_channel(grpc_addr(b)) as channel:
            worker = GrpcWorker(channel, None, "g-b", CHAIN, "python")
            assert worker.register().accepted
            for i in range(2):
                task = worker.task(wait_ms=10_000)
                assert (task.execution_id, task.step_id) == ("g-1", f"s{i}")
                assert worker.complete(task.token, {"i": i + 1}).accepted
            assert worker.heartbeat().accepted
            assert worker.unregister().accepted
        done = _wait(lambda: _finished(a, "g-1"), 10, "g-1 to finish", a, b)
        assert done["status"] == "COMPLETED", done
        assert _succeeded(b.http(), "g-1") == ["s0", "s1"]
    finally:
        for server in servers:
            if server.proc is not None:
                server.stop(signal.SIGKILL)


def test_a_result_for_an_execution_owned_elsewhere_is_checked_and_answered_by_the_owner(
    pg_url: str,
) -> None:
    """Issue 37's fault: a result sent through another server than the
    owner's skipped the checks made on arrival and was answered `accepted`
    before the owner had decided; now it is refused or accepted as on one
    server."""
    a = _server_node(pg_url, "a")
    b = _server_node(pg_url, "b")
    try:
        a.start()
        b.start()
        a.engine.deploy(server_ir.chain(2))
        a.engine.start("Chain", execution_id="far")
        b.engine.reload_definitions()
        session = b.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]
        task = b.engine.workers.poll(session, 10_000)
        assert task is not None and task["execution_id"] == "far"
        token = task["token"]
        # Refused on arrival, like on one server: nothing reaches the owner.
        with pytest.raises(InvalidError) as refused:
            b.engine.workers.complete(token, {"i": 2**70})
        assert refused.value.code == "INVALID_REQUEST"
        with pytest.raises(InvalidError):
            b.engine.workers.fail(token, "")
        # The owner decides, and its answer is the worker's.
        assert b.engine.workers.complete("far/not-a-token", {"i": 1}) == {
            "accepted": False,
            "reason": "unknown token (execution finished or token invalid)",
        }
        assert b.engine.workers.complete(token, {"i": 1}) == {"accepted": True}
        assert b.engine.workers.complete(token, {"i": 1}) == {
            "accepted": False,
            "reason": "duplicate result; step already resolved",
        }
        second = b.engine.workers.poll(session, 10_000)
        assert second is not None and second["step_id"] == "s1"
        assert b.engine.workers.complete(second["token"], {"wrong": "shape"}) == {
            "accepted": False,
            "reason": "output violates the task contract",
        }
        assert a.engine.wait("far", 10_000)["status"] == "FAILED"
    finally:
        a.close(leave=False)
        b.close(leave=False)
