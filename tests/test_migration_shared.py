"""Issue 41 in shared mode: two servers on one PostgreSQL database, each
holding the executions it started. The census and the migration work on
the executions a server holds (docs/language/migration.md says so), so an
operator runs `orbit migrate run` against each server; a version deployed
through one server is found by the other, and every execution, moved by
the server that holds it, runs the new definition to completion."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_real import Orbit
from server_harness import RawWorker, ServerProcess, wait_until
from test_cli_real_migration import notify_all, waiting_at_approval

pytestmark = pytest.mark.timeout(240)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "migration"
V1, V2 = str(EXAMPLES / "approval-v1.orbit"), str(EXAMPLES / "approval-v2.orbit")
SHARED = ["--cluster", "--cluster-mode", "shared", "--session-timeout", "2", "--node-timeout", "2"]
VERSIONS = ("Approval", "--from", "1.0.0", "--to", "2.0.0")


@pytest.fixture
def servers(pg_url: str) -> Iterator[list[ServerProcess]]:
    env = {"ORBIT_CLUSTER_INTERVAL_MS": "200"}
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(ServerProcess(pg_url, *SHARED, "--node-id", node, env=env))
            for node in ("a", "b")
        ]


def test_each_server_migrates_the_executions_it_holds(servers: list[ServerProcess]) -> None:
    a, b = servers
    on_a, on_b = Orbit(f"http://{a.addr}"), Orbit(f"http://{b.addr}")
    on_a.ok("deploy", V1)
    for server, eid in ((a, "ap-a"), (b, "ap-b")):
        reply = server.http().post(
            "/v1/executions", {"workflow": "Approval", "input": {"id": eid}, "execution_id": eid}
        )
        assert reply.status == 201, reply
    worker = RawWorker(
        a.http(), "w1", [("approvals.notify", "1.0.0"), ("approvals.audit", "1.0.0")]
    )
    assert worker.register().status == 200
    notify_all(worker, 2)
    waiting_at_approval(a, ["ap-a", "ap-b"])
    on_a.ok("deploy", V2)

    # Each server counts and plans the executions it holds.
    for orbit, eid in ((on_a, "ap-a"), (on_b, "ap-b")):
        census = json.loads(orbit.ok("versions", "Approval", "--json").stdout)["versions"]
        assert [(v["version"], v["live"]) for v in census] == [("1.0.0", 1), ("2.0.0", 0)]
        plan = orbit.ok("migrate", "plan", *VERSIONS).stdout.splitlines()[2:]
        assert [line.split()[:2] for line in plan] == [[eid, "migratable"]]

    moved = on_a.ok("migrate", "run", *VERSIONS).stdout.splitlines()
    assert moved[0] == "migrated ap-a"
    assert a.http().get("/v1/executions/ap-b").body["version"] == "1.0.0"
    moved = on_b.ok("migrate", "run", *VERSIONS).stdout.splitlines()
    assert moved[0] == "migrated ap-b"
    for eid in ("ap-a", "ap-b"):
        assert b.http().get(f"/v1/executions/{eid}").body["version"] == "2.0.0"

    for eid in ("ap-a", "ap-b"):
        on_b.ok("signal", eid, "approve")
    audited: list[str] = []
    for _ in range(2):
        task = worker.task(wait_ms=10_000)
        assert task["task_name"] == "approvals.audit", task
        audited.append(task["input"]["id"])
        assert worker.complete(task["token"], {}).status == 200
    assert sorted(audited) == ["ap-a", "ap-b"]

    def completed() -> bool:
        docs = [a.http().get(f"/v1/executions/{eid}").body for eid in ("ap-a", "ap-b")]
        return all(d["status"] == "COMPLETED" for d in docs)

    wait_until(completed, 30, "both executions completed", a)
    drained = json.loads(on_b.ok("versions", "Approval", "--json").stdout)["versions"][0]
    assert (drained["drain"], drained["live"]) == ("drained", 0)
