"""Pause and resume in shared mode (docs/operating-executions.md), on a real
PostgreSQL: a pause sent to any server reaches the execution's owner, takes
its task off the shared queue so no server hands it out, and a resume offers
it again."""

from __future__ import annotations

from typing import Any

import pytest
import server_ir
from server_harness import wait_until
from test_cluster_shared import CHAIN, _rows, _server_node

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


def test_a_paused_execution_hands_out_nothing_from_any_server(pg_url: str) -> None:
    a = _server_node(pg_url, "a")
    b = _server_node(pg_url, "b")
    try:
        a.start()
        b.start()
        a.engine.deploy(server_ir.chain(1))
        a.engine.start("Chain", execution_id="held")
        # Nothing polls on `a`: the task is queued for the other servers.
        wait_until(
            lambda: _rows(pg_url, "SELECT state FROM orbit_tasks") == [("queued",)],
            10,
            "the task to be queued",
        )
        b.engine.reload_definitions()
        doc = b.engine.operations.pause("held", "through b")  # forwarded to the owner, `a`
        assert doc["paused"] is True and doc["pause_reason"] == "through b"
        assert _rows(pg_url, "SELECT count(*) FROM orbit_tasks") == [(0,)]
        session = b.engine.workers.register("w-1", "python", [CHAIN[0]])["worker_session_id"]
        assert b.engine.workers.poll(session, 1_000) is None
        assert b.engine.get("held")["paused"] is True
        b.engine.operations.resume("held")
        task = b.engine.workers.poll(session, 10_000)
        assert task is not None and task["execution_id"] == "held"
        b.engine.workers.complete(task["token"], {"i": 1})
        assert a.engine.wait("held", 10_000)["status"] == "COMPLETED"
    finally:
        a.close(leave=False)
        b.close(leave=False)


def _run_to_the_end(node: Any, session: str, execution_id: str) -> None:
    """Completes the execution's tasks through `node`'s worker calls."""
    while node.engine.get(execution_id)["status"] == "RUNNING":
        task = node.engine.workers.poll(session, 10_000)
        assert task is not None and task["execution_id"] == execution_id, task
        node.engine.workers.complete(task["token"], {"i": 1})
        wait_until(
            lambda: node.engine.get(execution_id)["last_seq"] > 0, 10, "the result to be recorded"
        )
    assert node.engine.wait(execution_id, 10_000)["status"] == "COMPLETED"


def test_restart_and_fork_of_executions_other_servers_ran(pg_url: str) -> None:
    """docs/restart-and-fork.md in shared mode: a finished execution that
    another server ran is restarted by the server asked (it owns the new
    run), a running one by its owner; a fork is owned by the server asked."""
    a = _server_node(pg_url, "a")
    b = _server_node(pg_url, "b")
    try:
        a.start()
        b.start()
        a.engine.deploy(server_ir.chain(2))
        session = a.engine.workers.register("w-a", "python", [CHAIN[0]])["worker_session_id"]
        a.engine.start("Chain", execution_id="done-1")
        _run_to_the_end(a, session, "done-1")
        b.engine.reload_definitions()
        dry = b.engine.operations.restart("done-1", "s1", dry_run=True)
        assert dry["rerun"] == ["s1"] and dry["kept"] == ["s0"]
        again = b.engine.operations.restart("done-1", "s1", force=True)
        assert again["started"] is True and again["run"] == 2
        assert _rows(pg_url, "SELECT node_id FROM orbit_owners WHERE execution_id = 'done-1'") == [
            ("b",)
        ]
        other = b.engine.workers.register("w-b", "python", [CHAIN[0]])["worker_session_id"]
        _run_to_the_end(b, other, "done-1")
        assert a.engine.get("done-1")["run"] == 2

        forked = b.engine.operations.fork("done-1", "s1", new_id="done-1-fork", force=True)
        assert forked["started"] is True
        _run_to_the_end(b, other, "done-1-fork")

        # A running execution owned by `a`: restarted there, forked here.
        a.engine.start("Chain", execution_id="live-1")
        running = b.engine.operations.restart("live-1", "s0", force=True)
        assert running["run"] == 2
        copy = b.engine.operations.fork("live-1", "s0", new_id="live-1-fork", force=True)
        assert copy["started"] is True
        _run_to_the_end(b, other, "live-1-fork")
    finally:
        a.close(leave=False)
        b.close(leave=False)
