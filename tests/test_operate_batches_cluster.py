"""Batch operations with several servers on one PostgreSQL database
(docs/operating-executions.md, docs/running-several-servers.md).

Standby mode: the leader runs batch jobs; a standby shows them (GET) and
refuses their POST with 503 NOT_LEADER as any write (the CLI repeats it at
the leader and follows the job through the standby); the leader SIGKILLed
mid-batch, the new leader goes on from the store and acts on each execution
once. Shared mode: every server creates and shows batches, the one holding
the batch lock runs them, each action going to the execution's owner; the
runner SIGKILLed mid-batch, the other server takes the job over (and the
dead server's executions) and acts on each execution once."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import server_ir
from server_harness import Http, ServerProcess, run_orbit, wait_until
from test_cluster_shared import _rows
from test_cluster_standby import _role, pair  # noqa: F401 (a fixture)

from orbit_core import events as ev

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

SHARED = ["--cluster", "--cluster-mode", "shared", "--session-timeout", "2", "--node-timeout", "2"]
ENV = {"ORBIT_CLUSTER_INTERVAL_MS": "200"}


def _start(api: Http, prefix: str, count: int) -> list[str]:
    ids = [f"{prefix}-{i:04d}" for i in range(count)]
    for eid in ids:
        reply = api.post("/v1/executions", {"workflow": "Chain", "execution_id": eid})
        assert reply.status == 201, reply
    return ids


def _kinds(api: Http, eid: str) -> list[str]:
    return [e["type"] for e in api.get(f"/v1/executions/{eid}/history").body["events"]]


def _batch(api: Http, batch_id: str) -> Any:
    return api.get(f"/v1/batches/{batch_id}").body


def _kill_midway(api: Http, batch_id: str, victim: ServerProcess) -> None:
    """SIGKILLs `victim` once the job has recorded its first slice."""
    try:
        wait_until(
            lambda: _batch(api, batch_id).get("processed", 0) > 0,
            60,
            "the batch to begin",
            victim,
            every=0.005,
        )
    finally:
        victim.stop(signal.SIGKILL)


def _finished(api: Http, batch_id: str, *logs: ServerProcess) -> Any:
    return wait_until(
        lambda: (b := _batch(api, batch_id)).get("state") == "done" and b,
        180,
        "the batch to finish",
        *logs,
    )


def test_standby_mode_the_leader_runs_batches_and_the_next_leader_finishes_them(
    pair: tuple[ServerProcess, ServerProcess],  # noqa: F811
) -> None:
    a, b = pair
    leader, standby = a.http(), b.http()
    assert leader.post("/v1/workflows", server_ir.chain(1)).status == 201
    ids = _start(leader, "s", 400)
    assert standby.get("/v1/batches").body == {"batches": []}
    request = {"action": "pause", "filter": {"workflow": "Chain"}}
    for dry_run in (True, False):
        refused = standby.post("/v1/batches", {**request, "dry_run": dry_run})
        assert refused.status == 503 and refused.body["error"]["code"] == "NOT_LEADER", refused

    # The CLI through the standby: the POST is repeated at the leader, the
    # job followed through the standby, which reads it from the database.
    cli = run_orbit("pause", "--workflow", "Chain", "--server", f"http://{b.addr}", timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == "paused 400, skipped 0, failed 0\n"
    listed = standby.get("/v1/batches").body["batches"]
    assert [(x["action"], x["state"], x["processed"]) for x in listed] == [("pause", "done", 400)]

    created = leader.post("/v1/batches", {"action": "resume", "filter": {"workflow": "Chain"}})
    assert created.status == 201, created
    batch_id = created.body["batch_id"]
    _kill_midway(standby, batch_id, a)
    assert _batch(standby, batch_id)["state"] == "running", "the batch ended before the kill"
    wait_until(lambda: _role(b) == "leader", 30, "b to take over", b)
    done = _finished(standby, batch_id, b)
    assert (done["total"], done["processed"]) == (400, 400)
    assert done["outcomes"] == {"ok": 400, "skipped": 0, "failed": 0}, done
    for eid in ids:
        kinds = _kinds(standby, eid)
        assert kinds.count(ev.WorkflowResumed.TYPE) == 1, (eid, kinds)
        assert kinds.count(ev.WorkflowPaused.TYPE) == 1, (eid, kinds)


@pytest.fixture
def shared(pg_url: str) -> Iterator[list[ServerProcess]]:
    with contextlib.ExitStack() as stack:
        servers = []
        for node in ("a", "b"):
            proc = ServerProcess(pg_url, *SHARED, "--node-id", node, env=ENV)
            servers.append(stack.enter_context(proc))
        yield servers


def _runner(pg_url: str) -> str | None:
    """The node whose session holds the batch lock (its application name
    is `orbit-batch:<node>`), if any."""
    rows = _rows(
        pg_url,
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s",
        0x6F72626974_05 >> 32,
        0x6F72626974_05 & 0xFFFFFFFF,
    )
    return str(rows[0][0]).removeprefix("orbit-batch:") if rows else None


def test_shared_mode_one_server_runs_a_batch_and_another_takes_it_over(
    shared: list[ServerProcess], pg_url: str
) -> None:
    a, b = shared
    apis = {"a": a.http(), "b": b.http()}
    assert apis["a"].post("/v1/workflows", server_ir.chain(1)).status == 201
    wait_until(lambda: apis["b"].get("/v1/workflows/Chain").status == 200, 10, "b to see Chain", b)
    # Half owned by each server.
    ids = _start(apis["a"], "a", 200) + _start(apis["b"], "b", 200)
    owners = _rows(pg_url, "SELECT node_id, count(*) FROM orbit_owners GROUP BY node_id")
    assert sorted(owners) == [("a", 200), ("b", 200)]

    # Created through b; shown by both; run by one server at a time.
    created = apis["b"].post("/v1/batches", {"action": "pause", "filter": {"workflow": "Chain"}})
    assert created.status == 201, created
    batch_id = created.body["batch_id"]
    runner = wait_until(lambda: _runner(pg_url), 30, "a server to run the batch", a, b)
    survivor = "b" if runner == "a" else "a"
    victim = a if runner == "a" else b
    _kill_midway(apis[survivor], batch_id, victim)
    seen = _batch(apis[survivor], batch_id)
    assert seen["state"] == "running", "the batch ended before the kill"
    done = _finished(apis[survivor], batch_id, a if survivor == "a" else b)
    assert (done["total"], done["processed"]) == (400, 400)
    assert done["outcomes"] == {"ok": 400, "skipped": 0, "failed": 0}, done
    assert _runner(pg_url) in (None, survivor)
    for eid in ids:
        kinds = _kinds(apis[survivor], eid)
        assert kinds.count(ev.WorkflowPaused.TYPE) == 1, (eid, kinds)
    # The survivor owns every execution now, each of them paused.
    assert _rows(pg_url, "SELECT DISTINCT node_id FROM orbit_owners") == [(survivor,)]
