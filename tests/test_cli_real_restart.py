"""Restart and fork (issue 38) through the real CLI and a real server: the
book's hello workflow (`greeting.compose`, then `greeting.decorate`) run to
completion, then `orbit restart --from decorate` (a dry run that changes
nothing, then a forced one that runs `decorate` again and not `compose`),
`orbit fork --from decorate --id NEW`, and the refusals. Runs on PostgreSQL
too with ORBIT_TEST_DB=postgres (tests/pgkit.py)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_real import Orbit, TaskWorker
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(120)


class Hello:
    def __init__(self, server: ServerProcess, project: Path) -> None:
        self.server = server
        self.project = project
        self.orbit = Orbit(f"http://{server.addr}")
        self.calls: list[str] = []
        self.keys: list[str] = []
        self.workers = [
            TaskWorker(server, "hello-python", "python", {"greeting.compose": self.compose}),
            TaskWorker(server, "hello-ts", "typescript", {"greeting.decorate": self.decorate}),
        ]

    def compose(self, task: dict[str, Any]) -> Any:
        self.calls.append("compose")
        return {"message": f"Hello, {task['input']['name']}"}

    def decorate(self, task: dict[str, Any]) -> Any:
        self.calls.append("decorate")
        self.keys.append(task["idempotency_key"])
        return {"message": task["input"]["message"] + "!" * task["input"]["excitement"]}

    def run(self) -> str:
        result = self.orbit.ok(
            "run", str(self.project / "workflows/hello.orbit"), "--input", '{"name": "Ada"}'
        )
        found = re.search(r"^started execution (\S+)$", result.stderr, re.MULTILINE)
        assert found, result.output
        return found[1]

    def get(self, execution_id: str) -> dict[str, Any]:
        reply = self.server.http().get(f"/v1/executions/{execution_id}")
        assert reply.status == 200, reply
        body: dict[str, Any] = reply.body
        return body

    def wait(self, execution_id: str) -> dict[str, Any]:
        reply = self.server.http().get(f"/v1/executions/{execution_id}/wait?timeout_ms=20000")
        assert reply.status == 200, reply
        body: dict[str, Any] = reply.body
        return body


@pytest.fixture(scope="module")
def hello(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hello]:
    root = tmp_path_factory.mktemp("restart")
    with contextlib.chdir(root):
        Orbit("http://unused").ok("init", "hello-orbit")
    with ServerProcess(root / "orbit.db") as server:
        h = Hello(server, root / "hello-orbit")
        for worker in h.workers:
            worker.start()
        try:
            yield h
        finally:
            for worker in h.workers:
                worker.stop()


def test_restart_from_decorate(hello: Hello) -> None:
    eid = hello.run()
    done = hello.get(eid)
    assert done["status"] == "COMPLETED"
    hello.calls.clear()

    dry = hello.orbit("restart", eid, "--from", "decorate", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.splitlines() == [
        f"restart {eid} from `decorate`: run 2 of Hello@1.0.0",
        "keeps:   compose",
        "runs:    decorate",
        "effects (task attempts that run):",
        "  STEP      TASK                     EFFECT   KEY  RAN BEFORE",
        "  decorate  greeting.decorate@1.0.0  unknown  new  yes         needs --force",
        "dry run: nothing changed",
    ]
    assert hello.get(eid) == done

    refused = hello.orbit("restart", eid, "--from", "decorate")
    assert refused.exit_code == 1
    assert refused.stdout.splitlines()[0].startswith(f"restart {eid} from `decorate`")
    assert refused.stderr.startswith("error: EFFECTS_REPEATED (409): ")
    assert "`decorate` (greeting.decorate@1.0.0, unknown, new idempotency key)" in refused.stderr
    assert hello.get(eid) == done

    forced = hello.orbit("restart", eid, "--from", "decorate", "--force", "--reason", "typo")
    assert forced.exit_code == 0, forced.output
    assert forced.stdout.splitlines()[-1] == f"restarted {eid}: run 2 started"
    final = hello.wait(eid)
    assert final["status"] == "COMPLETED" and final["run"] == 2
    assert hello.calls == ["decorate"]
    assert hello.keys[-1] == f"{eid}/run2/decorate"

    # Both runs in the logs: the first ends with the restart, the second
    # starts with the kept outcome of `compose`.
    first = hello.orbit.ok("logs", eid, "--run", "1", "--json").stdout.splitlines()
    last = json.loads(first[-1])
    assert last["type"] == "WorkflowRestarted"
    assert (last["next_run"], last["step"], last["reason"]) == (2, "decorate", "typo")
    second = [json.loads(x) for x in hello.orbit.ok("logs", eid, "--json").stdout.splitlines()]
    assert [x["type"] for x in second[:3]] == ["WorkflowCreated", "WorkflowStarted", "StepRestored"]
    assert second[2]["step"] == "compose" and second[2]["from_run"] == 1
    text = hello.orbit.ok("logs", eid).stdout
    assert "StepRestored" in text and "step=compose" in text

    # Replay of both runs is consistent with the current decider.
    for run in ("1", "2"):
        replayed = hello.orbit("replay", eid, "--run", run, "--json")
        assert replayed.exit_code == 0, replayed.output
        assert json.loads(replayed.stdout)["divergences"] == []


def test_fork_from_decorate(hello: Hello) -> None:
    eid = hello.run()
    hello.calls.clear()
    forked = hello.orbit("fork", eid, "--from", "decorate", "--id", f"{eid}-fork", "--force")
    assert forked.exit_code == 0, forked.output
    assert forked.stdout.splitlines()[-1] == f"forked {eid} into {eid}-fork"
    assert hello.wait(f"{eid}-fork")["status"] == "COMPLETED"
    assert hello.calls == ["decorate"]
    assert hello.get(eid).get("run") is None

    preview = hello.orbit("fork", eid, "--from", "decorate", "--dry-run", "--json")
    assert preview.exit_code == 0, preview.output
    answer = json.loads(preview.stdout)
    assert answer["action"] == "fork" and answer["dry_run"] is True
    assert [e["task"] for e in answer["effects"]] == ["greeting.decorate@1.0.0"]


def test_refusals_are_coded(hello: Hello) -> None:
    eid = hello.run()
    unknown = hello.orbit("restart", eid, "--from", "nope", "--dry-run")
    assert unknown.exit_code == 1
    assert unknown.stderr.startswith("error: UNKNOWN_STEP (400): Hello@1.0.0 has no step `nope`")
    missing = hello.orbit("restart", "no-such-execution", "--from", "decorate", "--dry-run")
    assert missing.exit_code == 1 and "NOT_FOUND (404)" in missing.stderr
    version = hello.orbit("fork", eid, "--from", "decorate", "--version", "9.9.9", "--dry-run")
    assert version.exit_code == 1 and "WORKFLOW_NOT_FOUND (404)" in version.stderr


def test_restart_as_a_batch_over_a_workflow(hello: Hello) -> None:
    """`orbit restart --workflow` (docs/operating-executions.md): a batch job
    whose dry run lists the selection, whose unforced run fails each
    execution with EFFECTS_REPEATED, and whose forced run restarts them all."""
    mine = [hello.run(), hello.run()]
    http = hello.server.http()
    dry = hello.orbit.ok(
        "restart", "--workflow", "Hello", "--status", "completed", "--from", "decorate", "--dry-run"
    )
    lines = dry.stdout.splitlines()
    selected = [line.strip() for line in lines[1:]]
    total = len(selected)
    assert lines[0] == f"would restart {total} executions (workflow Hello, status COMPLETED)"
    assert set(mine) <= set(selected)
    assert all(hello.get(eid).get("run") is None for eid in mine)

    refused = hello.orbit(
        "restart", "--workflow", "Hello", "--status", "completed", "--from", "decorate"
    )
    assert refused.exit_code == 1, refused.output
    assert f"restarted 0, skipped 0, failed {total}\n" in refused.stdout
    assert f"  {mine[0]}: EFFECTS_REPEATED " in refused.stdout
    assert all(hello.get(eid).get("run") is None for eid in mine)

    hello.calls.clear()
    forced = hello.orbit.ok(
        "restart",
        "--workflow",
        "Hello",
        "--status",
        "completed",
        "--from",
        "decorate",
        "--force",
        "--reason",
        "bad template",
    )
    assert forced.stdout == f"restarted {total}, skipped 0, failed 0\n"
    for eid in selected:
        assert hello.wait(eid)["status"] == "COMPLETED"
    for eid in mine:
        assert hello.get(eid)["run"] == 2
    assert hello.calls == ["decorate"] * total

    # Over HTTP: the action needs its step; a dry run lists the selection.
    missing = http.post("/v1/batches", {"action": "restart", "filter": {"workflow": "Hello"}})
    assert missing.status == 400 and missing.body["error"]["code"] == "INVALID_REQUEST"
    listed = http.post(
        "/v1/batches",
        {"action": "restart", "filter": {"workflow": "Hello"}, "from": "decorate", "dry_run": True},
    )
    assert listed.status == 200 and listed.body["action"] == "restart"
    assert set(mine) <= set(listed.body["executions"])
    batches = http.get("/v1/batches").body["batches"]
    assert batches[0]["action"] == "restart"
    assert batches[0]["params"] == {"from": "decorate", "reason": "bad template", "force": True}
