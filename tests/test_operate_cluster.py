"""Pause and resume in shared mode (docs/operating-executions.md), on a real
PostgreSQL: a pause sent to any server reaches the execution's owner, takes
its task off the shared queue so no server hands it out, and a resume offers
it again."""

from __future__ import annotations

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
