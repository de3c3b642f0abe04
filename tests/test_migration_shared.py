"""Issue 41 in shared mode: two servers on one PostgreSQL database, each
holding the executions it started. A migration asked of either server
moves every selected execution: the plan folds the histories of the
executions other servers hold, and each such execution is moved by its
owner, in its own commit, from an inbox entry (docs/language/migration.md).
That holds for `orbit migrate run` and for a migrate batch job, whichever
server runs the job. A version deployed through one server is found by the
other, and every execution runs the new definition to completion."""

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
PER_SERVER = 3


@pytest.fixture
def servers(pg_url: str) -> Iterator[list[ServerProcess]]:
    env = {"ORBIT_CLUSTER_INTERVAL_MS": "200"}
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(ServerProcess(pg_url, *SHARED, "--node-id", node, env=env))
            for node in ("a", "b")
        ]


def _migrations(server: ServerProcess, eid: str) -> list[dict[str, object]]:
    events = server.http().get(f"/v1/executions/{eid}/history").body["events"]
    return [e for e in events if e["type"] == "WorkflowMigrated"]


@pytest.mark.parametrize("via", ["run", "batch"])
def test_one_server_migrates_the_executions_of_every_server(
    servers: list[ServerProcess], via: str
) -> None:
    a, b = servers
    on_a, on_b = Orbit(f"http://{a.addr}"), Orbit(f"http://{b.addr}")
    on_a.ok("deploy", V1)
    ids: list[str] = []
    for server, node in ((a, "a"), (b, "b")):
        for i in range(PER_SERVER):
            eid = f"ap-{node}{i}"
            ids.append(eid)
            reply = server.http().post(
                "/v1/executions",
                {"workflow": "Approval", "input": {"id": eid}, "execution_id": eid},
            )
            assert reply.status == 201, reply
    worker = RawWorker(
        a.http(), "w1", [("approvals.notify", "1.0.0"), ("approvals.audit", "1.0.0")]
    )
    assert worker.register().status == 200
    notify_all(worker, len(ids))
    waiting_at_approval(a, ids)
    on_a.ok("deploy", V2)

    # The census and the plan, through either server, cover every execution.
    for orbit in (on_a, on_b):
        census = json.loads(orbit.ok("versions", "Approval", "--json").stdout)["versions"]
        assert [(v["version"], v["live"], v["drain"]) for v in census] == [
            ("1.0.0", 2 * PER_SERVER, "draining"),
            ("2.0.0", 0, "current"),
        ]
        plan = orbit.ok("migrate", "plan", *VERSIONS).stdout.splitlines()[2:]
        assert [line.split()[:2] for line in plan] == [[eid, "migratable"] for eid in ids]

    if via == "run":
        moved = on_a.ok("migrate", "run", *VERSIONS).stdout.splitlines()
        assert moved[: len(ids)] == [f"migrated {eid}" for eid in ids], moved
    else:
        request = {
            "action": "migrate",
            "from": "1.0.0",
            "to": "2.0.0",
            "filter": {"workflow": "Approval"},
        }
        created = a.http().post("/v1/batches", request)
        assert created.status in (200, 201), created.body
        batch_id = created.body["batch_id"]
        done = wait_until(
            lambda: (
                (d := a.http().get(f"/v1/batches/{batch_id}?items=true").body)["state"] == "done"
                and d
            ),
            60,
            "the migrate batch done",
            a,
            b,
        )
        outcome = {i["execution_id"]: i["outcome"] for i in done["items"]}
        assert outcome == dict.fromkeys(ids, "ok"), done
    for eid in ids:
        assert b.http().get(f"/v1/executions/{eid}").body["version"] == "2.0.0"
        migrated = _migrations(a, eid)
        assert len(migrated) == 1, (eid, migrated)

    # Nothing is left to move, through either server.
    again = json.loads(on_b.ok("migrate", "run", *VERSIONS, "--json").stdout)
    assert (again["migrated"], again["remaining"]) == (0, 0), again

    for eid in ids:
        on_b.ok("signal", eid, "approve")
    audited: list[str] = []
    for _ in ids:
        task = worker.task(wait_ms=10_000)
        assert task["task_name"] == "approvals.audit", task
        audited.append(task["input"]["id"])
        assert worker.complete(task["token"], {}).status == 200
    assert sorted(audited) == ids

    def completed() -> bool:
        docs = [a.http().get(f"/v1/executions/{eid}").body for eid in ids]
        return all(d["status"] == "COMPLETED" for d in docs)

    wait_until(completed, 30, "every execution completed", a)
    for eid in ids:
        assert len(_migrations(b, eid)) == 1
    drained = json.loads(on_b.ok("versions", "Approval", "--json").stdout)["versions"][0]
    assert (drained["drain"], drained["live"]) == ("drained", 0)
