"""Issue 41's safety net against a real server: `orbit deploy
--require-drained VERSION` refuses while VERSION has live executions, and
`orbit compat --server` warns when the new version changes the step live
executions of the old one wait in (and says nothing new without --server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_real import Orbit, one_error_line
from server_harness import RawWorker, ServerProcess, wait_until
from test_cli_real_migration import notify_all, waiting_at_approval

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[1]
V1 = str(REPO / "examples" / "migration" / "approval-v1.orbit")
V2 = str(REPO / "examples" / "migration" / "approval-v2.orbit")
LONGER = str(REPO / "tests" / "fixtures" / "migration" / "approval-v2-longer.orbit")


def test_deploy_require_drained_and_compat_live_waits(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db") as server:
        orbit = Orbit(f"http://{server.addr}")
        http = server.http()
        # Nothing of the workflow is registered yet: trivially drained.
        orbit.ok("deploy", "--require-drained", "0.9.0", V1)
        orbit.ok("run", V1, "--id", "ap-1", "-i", json.dumps({"id": "ap-1"}), "--no-wait")
        worker = RawWorker(
            http, "w1", [("approvals.notify", "1.0.0"), ("approvals.audit", "1.0.0")]
        )
        assert worker.register().status == 200
        notify_all(worker, 1)
        waiting_at_approval(server, ["ap-1"])

        refused = orbit("deploy", "--require-drained", "1.0.0", V2)
        assert refused.exit_code == 1
        assert one_error_line(refused) == (
            "error: Approval@1.0.0 has 1 live execution(s), so it is not drained; nothing was "
            "deployed (--require-drained 1.0.0). Move them with `orbit migrate plan Approval "
            "--from 1.0.0 --to 2.0.0` or wait until `orbit versions Approval` says drained"
        )
        census = http.get("/v1/workflows/Approval/versions").body
        assert [v["version"] for v in census["versions"]] == ["1.0.0"]

        # compat: without --server, the same output as ever; with it, a
        # warning for the changed step `approval` only.
        plain = orbit("compat", V1, LONGER)
        live = orbit("compat", V1, LONGER, "--server", orbit.server)
        assert live.exit_code == plain.exit_code == 0
        extra = live.stdout.splitlines()[len(plain.stdout.splitlines()) :]
        assert live.stdout.startswith(plain.stdout)
        assert extra == [
            "warning workflow Approval 1.0.0 → 2.0.0: 1 live execution(s) of 1.0.0 wait in "
            "step `approval` (signal), which 2.0.0 changes; hint: they stay on 1.0.0; see "
            "`orbit migrate plan Approval --from 1.0.0 --to 2.0.0`"
        ]
        unchanged = orbit("compat", V1, V2, "--server", orbit.server)
        assert unchanged.stdout == orbit("compat", V1, V2).stdout
        as_json = json.loads(
            orbit("compat", V1, LONGER, "--server", orbit.server, "--format", "json").stdout
        )
        assert any("migrate plan" in f.get("hint", "") for f in as_json["findings"])

        # Drained after the move: the gated deploy goes through.
        orbit.ok("deploy", V2)
        orbit.ok("migrate", "run", "Approval", "--from", "1.0.0", "--to", "2.0.0")
        done = orbit.ok("deploy", "--require-drained", "1.0.0", V2)
        assert "up to date Approval@2.0.0" in done.stderr


def test_logs_and_replay_of_a_migrated_execution(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db") as server:
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
        orbit.ok("migrate", "run", "Approval", "--from", "1.0.0", "--to", "2.0.0")
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

        logs = orbit.ok("logs", "ap-1").stdout.splitlines()
        moved = [line for line in logs if "WorkflowMigrated" in line]
        assert len(moved) == 1
        assert moved[0].split()[3:] == [
            "WorkflowMigrated",
            "from_version=1.0.0",
            "to_version=2.0.0",
        ]

        # The history names 1.0.0 in its WorkflowCreated and 2.0.0 after the
        # migration: the CLI fetches both definitions.
        replayed = orbit("replay", "ap-1")
        assert replayed.exit_code == 0, replayed.output
        as_json = json.loads(orbit("replay", "ap-1", "--json").stdout)
        assert as_json["divergences"] == []

        # From a file, the target is looked for in --definition's file.
        history = tmp_path / "history.json"
        history.write_text(json.dumps(http.get("/v1/executions/ap-1/history").body))
        alone = orbit("replay", "--history", str(history), "--definition", V1)
        assert alone.exit_code == 1
        assert "replay needs that definition too" in alone.output


SEARCHABLE_V1 = str(REPO / "tests" / "fixtures" / "migration" / "searchable-v1.orbit")
SEARCHABLE_V2 = str(REPO / "tests" / "fixtures" / "migration" / "searchable-v2.orbit")


def test_migrate_plan_and_run_where(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db") as server:
        orbit = Orbit(f"http://{server.addr}")
        http = server.http()
        for eid in ("ap-1", "ap-2"):
            orbit.ok("run", SEARCHABLE_V1, "--id", eid, "-i", json.dumps({"id": eid}), "--no-wait")
        worker = RawWorker(http, "w1", [("approvals.notify", "1.0.0")])
        assert worker.register().status == 200
        notify_all(worker, 2)
        waiting_at_approval(server, ["ap-1", "ap-2"])
        orbit.ok("deploy", SEARCHABLE_V2)
        versions = ("Approval", "--from", "1.0.0", "--to", "2.0.0")

        plan = orbit.ok("migrate", "plan", *versions, "--where", 'id == "ap-2"')
        assert [line.split()[0] for line in plan.stdout.splitlines()[2:]] == ["ap-2"]
        every = orbit.ok("migrate", "plan", *versions)
        assert [line.split()[0] for line in every.stdout.splitlines()[2:]] == ["ap-1", "ap-2"]
        with_status = orbit.ok(
            "migrate", "plan", *versions, "--status", "COMPENSATING", "--where", 'id == "ap-2"'
        )
        assert with_status.stdout.splitlines()[2:] == []

        # A filter that does not parse, or names no declared field: exit 2.
        typo = orbit("migrate", "plan", *versions, "--where", 'id === "ap-2"')
        assert typo.exit_code == 2, typo.output
        unknown = orbit("migrate", "plan", *versions, "--where", 'customer == "c"')
        assert unknown.exit_code == 2, unknown.output
        assert "customer" in unknown.stderr

        run = orbit.ok("migrate", "run", *versions, "--where", 'id == "ap-2"')
        assert run.stdout.splitlines()[0] == "migrated ap-2"
        assert http.get("/v1/executions/ap-2").body["version"] == "2.0.0"
        assert http.get("/v1/executions/ap-1").body["version"] == "1.0.0"
