"""Batch operations against a real `orbit server` (docs/operating-executions.md):
`orbit pause|resume|cancel --workflow` run as a durable job with per-execution
outcomes, `--dry-run` acts on nothing, and a job interrupted by SIGKILL goes
on after the restart without acting on any execution twice."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from cli_real import Orbit
from server_harness import Http, ServerProcess, wait_until

from orbit_core import events as ev

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[1]
HELLO = REPO / "examples" / "hello.orbit"


def _start_many(http: Http, prefix: str, count: int) -> list[str]:
    ids = [f"{prefix}-{i:05d}" for i in range(count)]
    for eid in ids:
        reply = http.post(
            "/v1/executions", {"workflow": "Hello", "execution_id": eid, "input": {"name": "x"}}
        )
        assert reply.status == 201, reply
    return ids


def _types(http: Http, eid: str) -> list[str]:
    return [e["type"] for e in http.get(f"/v1/executions/{eid}/history").body["events"]]


def test_batches_pause_resume_and_cancel_with_outcomes(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db") as proc:
        orbit = Orbit(f"http://{proc.addr}")
        orbit.ok("deploy", str(HELLO))
        http = proc.http()
        assert http.get("/v1/batches").body == {"batches": []}
        ids = _start_many(http, "b", 12)
        orbit.ok("pause", ids[0])
        dry = orbit.ok("pause", "--workflow", "Hello", "--dry-run")
        assert dry.stdout.splitlines()[0] == "would pause 12 executions (workflow Hello)"
        assert all("WorkflowPaused" not in _types(http, eid) for eid in ids[1:])
        paused = orbit.ok("pause", "--workflow", "Hello", "--reason", "maintenance")
        assert paused.stdout == "paused 11, skipped 1, failed 0\n"
        assert "batch batch-" in paused.stderr
        batches = http.get("/v1/batches").body["batches"]
        doc = http.get(f"/v1/batches/{batches[0]['batch_id']}?items=true").body
        assert doc["state"] == "done" and doc["total"] == 12 and doc["processed"] == 12
        assert doc["outcomes"] == {"ok": 11, "skipped": 1, "failed": 0}
        skipped = [i for i in doc["items"] if i["outcome"] == "skipped"]
        assert skipped == [
            {
                "execution_id": ids[0],
                "outcome": "skipped",
                "code": "ALREADY_PAUSED",
                "message": f"execution `{ids[0]}` is already paused",
            }
        ]
        for eid in ids:
            assert http.get(f"/v1/executions/{eid}").body["paused"] is True
        resumed = orbit.ok("resume", "--workflow", "Hello", "--status", "running")
        assert resumed.stdout == "resumed 12, skipped 0, failed 0\n"
        cancelled = orbit.ok("cancel", "--workflow", "Hello", "--reason", "cleanup")
        assert cancelled.stdout == "cancelled 12, skipped 0, failed 0\n"
        for eid in ids:
            assert http.get(f"/v1/executions/{eid}").body["status"] == "CANCELLED"
        refused = http.post("/v1/batches", {"action": "explode", "filter": {"workflow": "Hello"}})
        assert refused.status == 400 and refused.body["error"]["code"] == "INVALID_REQUEST"
        unfiltered = http.post("/v1/batches", {"action": "pause", "filter": {}})
        assert unfiltered.status == 400


def test_a_batch_killed_midway_goes_on_after_a_restart_acting_once(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    proc = ServerProcess(db).start()
    try:
        Orbit(f"http://{proc.addr}").ok("deploy", str(HELLO))
        http = proc.http()
        ids = _start_many(http, "k", 600)
        created = http.post(
            "/v1/batches", {"action": "pause", "filter": {"workflow": "Hello"}}
        ).body
        batch_id = created["batch_id"]
        wait_until(
            lambda: http.get(f"/v1/batches/{batch_id}").body["processed"] > 0,
            30,
            "the batch to begin",
            proc,
            every=0.005,
        )
    finally:
        proc.stop(signal.SIGKILL)
    proc = ServerProcess(db).start()
    try:
        http = proc.http()
        interrupted = http.get(f"/v1/batches/{batch_id}").body
        assert interrupted["state"] == "running", "the batch ended before it was killed"
        done = wait_until(
            lambda: (b := http.get(f"/v1/batches/{batch_id}").body)["state"] == "done" and b,
            120,
            "the batch to finish",
            proc,
        )
        assert done["total"] == 600 and done["processed"] == 600
        assert done["outcomes"]["ok"] == 600, done["outcomes"]
        for eid in ids:
            kinds = _types(http, eid)
            assert kinds.count(ev.WorkflowPaused.TYPE) == 1, (eid, kinds)
    finally:
        proc.stop()
