"""Issue 41's scenario against a real `orbit server`, on SQLite and on
PostgreSQL: an execution of Approval 1.0.0 has run `notify` and waits for
`approve`; 2.0.0 is deployed; `orbit versions` shows 1.0.0 with one live
execution; `orbit migrate plan` lists it as migratable; `orbit migrate run`
moves it (its document then names 2.0.0); after the signal, `audit` runs
and the execution completes. Then a batch killed with SIGKILL leaves every
execution either untouched on 1.0.0 or wholly on 2.0.0."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_real import Orbit
from server_harness import RawWorker, ServerProcess, wait_until

pytestmark = pytest.mark.timeout(240)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "migration"
V1, V2 = str(EXAMPLES / "approval-v1.orbit"), str(EXAMPLES / "approval-v2.orbit")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        return url
    return str(tmp_path / "orbit.db")


def notify_all(worker: RawWorker, count: int) -> None:
    for _ in range(count):
        task = worker.task()
        assert task["task_name"] == "approvals.notify", task
        assert worker.complete(task["token"], {}).status == 200


def waiting_at_approval(server: ServerProcess, ids: list[str]) -> None:
    http = server.http()
    wait_until(
        lambda: all(
            http.get(f"/v1/executions/{i}").body["units"].get("approval", {}).get("status")
            == "WAITING"
            for i in ids
        ),
        30,
        "executions waiting for approve",
        server,
    )


def test_the_issue_scenario(db: str) -> None:
    with ServerProcess(db) as server:
        orbit = Orbit(f"http://{server.addr}")
        http = server.http()
        orbit.ok("run", V1, "--id", "ap-1", "-i", json.dumps({"id": "ap-1"}), "--no-wait")
        worker = RawWorker(
            http, "w1", [("approvals.notify", "1.0.0"), ("approvals.audit", "1.0.0")]
        )
        assert worker.register().status == 200
        notify_all(worker, 1)
        waiting_at_approval(server, ["ap-1"])
        orbit.ok("deploy", V2)

        census = orbit.ok("versions", "Approval").stdout.splitlines()
        assert census[0].split() == ["Approval@1.0.0", "draining", "live", "1", "paused", "0"]
        assert census[1].split() == ["waiting", "approval", "(signal):", "1"]
        assert census[2].split() == ["Approval@2.0.0", "current", "live", "0", "paused", "0"]
        doc = json.loads(orbit.ok("versions", "Approval", "--json").stdout)
        assert [v["live"] for v in doc["versions"]] == [1, 0]

        plan = orbit.ok("migrate", "plan", "Approval", "--from", "1.0.0", "--to", "2.0.0")
        assert plan.stdout.splitlines()[2].split() == ["ap-1", "migratable"]
        assert http.get("/v1/executions/ap-1").body["version"] == "1.0.0"

        run = orbit.ok("migrate", "run", "Approval", "--from", "1.0.0", "--to", "2.0.0")
        assert run.stdout.splitlines() == [
            "migrated ap-1",
            "1 execution(s) moved from Approval@1.0.0 to Approval@2.0.0; 0 left on 1.0.0",
        ]
        assert http.get("/v1/executions/ap-1").body["version"] == "2.0.0"
        logs = orbit.ok("logs", "ap-1").stdout
        assert "WorkflowMigrated" in logs

        orbit.ok("signal", "ap-1", "approve")
        task = worker.task()
        assert task["task_name"] == "approvals.audit"
        assert worker.complete(task["token"], {}).status == 200
        wait_until(
            lambda: http.get("/v1/executions/ap-1").body["status"] == "COMPLETED",
            30,
            "ap-1 completed",
            server,
        )
        drained = json.loads(orbit.ok("versions", "Approval", "--json").stdout)["versions"][0]
        assert (drained["drain"], drained["live"]) == ("drained", 0)


def test_sigkill_during_a_batch_leaves_each_execution_on_one_version(db: str) -> None:
    count = 40
    ids = [f"k-{i:02}" for i in range(count)]
    server = ServerProcess(db).start()
    try:
        orbit = Orbit(f"http://{server.addr}")
        http = server.http()
        orbit.ok("deploy", V1)
        for eid in ids:
            reply = http.post(
                "/v1/executions",
                {"workflow": "Approval", "input": {"id": eid}, "execution_id": eid},
            )
            assert reply.status == 201, reply
        worker = RawWorker(http, "w1", [("approvals.notify", "1.0.0")])
        assert worker.register().status == 200
        notify_all(worker, count)
        waiting_at_approval(server, ids)
        orbit.ok("deploy", V2)

        # One execution per request, so the kill lands in the middle of the run.
        runner = threading.Thread(
            target=lambda: orbit(
                "migrate",
                "run",
                "Approval",
                "--from",
                "1.0.0",
                "--to",
                "2.0.0",
                "--batch-size",
                "1",
            ),
            daemon=True,
        )
        runner.start()
        wait_until(
            lambda: any(http.get(f"/v1/executions/{i}").body["version"] == "2.0.0" for i in ids),
            60,
            "a first execution migrated",
            server,
        )
        server.stop(signal.SIGKILL)
        runner.join(60)
    finally:
        server.stop(signal.SIGKILL)

    with ServerProcess(db) as again:
        http = again.http()
        docs: dict[str, Any] = {i: http.get(f"/v1/executions/{i}").body for i in ids}
        moved = [i for i, d in docs.items() if d["version"] == "2.0.0"]
        assert moved, "the kill came after no migration at all"
        for eid, doc in docs.items():
            events = [e["type"] for e in http.get(f"/v1/executions/{eid}/history").body["events"]]
            if doc["version"] == "2.0.0":
                assert events.count("WorkflowMigrated") == 1
                assert doc["definition_hash"] != ""
            else:
                assert "WorkflowMigrated" not in events
            assert doc["units"]["approval"]["status"] == "WAITING"
        # The run carries on where it stopped.
        orbit = Orbit(f"http://{again.addr}")
        orbit.ok("migrate", "run", "Approval", "--from", "1.0.0", "--to", "2.0.0")
        assert all(http.get(f"/v1/executions/{i}").body["version"] == "2.0.0" for i in ids)


def test_a_migration_runs_as_a_batch_job(tmp_path: Path) -> None:
    """The same move through the batch mechanism (POST /v1/batches with the
    `migrate` action): a durable job with progress, resumable like any
    batch, which skips executions already on another version."""
    with ServerProcess(str(tmp_path / "orbit.db")) as server:
        orbit = Orbit(f"http://{server.addr}")
        http = server.http()
        ids = ["bm-1", "bm-2", "bm-3"]
        for eid in ids:
            orbit.ok("run", V1, "--id", eid, "-i", json.dumps({"id": eid}), "--no-wait")
        worker = RawWorker(
            http, "w1", [("approvals.notify", "1.0.0"), ("approvals.audit", "1.0.0")]
        )
        assert worker.register().status == 200
        notify_all(worker, len(ids))
        waiting_at_approval(server, ids)
        orbit.ok("deploy", V2)
        orbit.ok("run", V2, "--id", "bm-new", "-i", json.dumps({"id": "bm-new"}), "--no-wait")

        refused = http.post(
            "/v1/batches",
            {"action": "migrate", "from": "1.0.0", "filter": {"workflow": "Approval"}},
        )
        assert refused.status == 400
        assert refused.body["error"]["code"] == "INVALID_REQUEST"

        request = {
            "action": "migrate",
            "from": "1.0.0",
            "to": "2.0.0",
            "filter": {"workflow": "Approval", "status": "RUNNING"},
        }
        created = http.post("/v1/batches", request)
        assert created.status in (200, 201), created.body
        batch_id = created.body["batch_id"]
        wait_until(
            lambda: http.get(f"/v1/batches/{batch_id}").body["state"] == "done",
            60,
            "the migrate batch done",
            server,
        )
        doc = http.get(f"/v1/batches/{batch_id}?items=true").body
        assert doc["outcomes"].get("ok") == 3 and doc["outcomes"].get("skipped") == 1, doc
        outcome = {i["execution_id"]: i["outcome"] for i in doc["items"]}
        assert outcome == {"bm-1": "ok", "bm-2": "ok", "bm-3": "ok", "bm-new": "skipped"}
        for eid in ids:
            assert http.get(f"/v1/executions/{eid}").body["version"] == "2.0.0"
