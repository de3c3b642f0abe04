"""Chapter 64, human approvals: the expense claim with typed signals, a query,
comments handled by `on event`, and a deadline that escalates through
`on failure`, served by a Python and a TypeScript worker. Decisions are sent
with the CLI, the Python SDK's client and the TypeScript SDK's client."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_processes import TSX_LOADER, Cli, Server, Stack, Worker, clean_env
from server_harness import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

EXPENSE = Path(__file__).resolve().parent / "projects" / "expense" / "expense.orbit"


@dataclass
class Approvals:
    server: Server
    cli: Cli
    python: Worker
    typescript: Worker
    workers: Path
    workflow: Path

    def start(self, claim_id: str, amount: float, workflow: Path | None = None) -> str:
        claim = {"claim_id": claim_id, "employee": "ann", "manager": "bo", "amount": amount}
        run = self.cli.ok(
            "run",
            str(workflow or self.workflow),
            "--id",
            claim_id,
            "--no-wait",
            "--input",
            json.dumps(claim),
        )
        return run.stdout.strip()

    def waiting_for(self, claim_id: str, signal: str) -> None:
        self.server.wait_for_event(
            claim_id, lambda e: e["type"] == "SignalAwaitStarted" and e["signal"] == signal
        )

    def query(self, claim_id: str) -> Any:
        return json.loads(self.cli.ok("query", claim_id, "status").stdout)

    def signal(self, claim_id: str, name: str, payload: dict[str, Any]) -> int:
        sent = self.cli.ok("signal", claim_id, name, "--data", json.dumps(payload))
        return int(sent.stdout)

    def typescript_client(self, *args: str) -> Any:
        done = subprocess.run(
            ["node", "--import", TSX_LOADER.as_uri(), str(self.workers / "client.ts"), *args],
            check=False,
            cwd=self.workers,
            env=clean_env({"ORBIT_SERVER": self.server.url}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def notifications(self) -> list[dict[str, Any]]:
        lines = [line for line in self.typescript.log().splitlines() if '"notified"' in line]
        return [json.loads(line) for line in lines]

    def finished(self, claim_id: str) -> dict[str, Any]:
        return self.server.wait_for_status(claim_id, {"COMPLETED", "FAILED", "CANCELLED"})


@pytest.fixture(scope="module")
def claims(module_stack: Stack) -> Approvals:
    server = module_stack.server()
    workers = module_stack.workers_dir()
    python = module_stack.python_worker("expense-python", workers / "expense_workers.py", server)
    typescript = module_stack.typescript_worker(
        "expense-typescript", workers / "expense_workers.ts", server
    )
    cli = module_stack.cli(server)
    assert cli.ok("check", str(EXPENSE)).stdout.strip() == "ok ExpenseClaim@1.0.0 (4 steps)"
    return Approvals(server, cli, python, typescript, workers, EXPENSE)


def unit_statuses(state: dict[str, Any]) -> dict[str, str]:
    return {key: unit["status"] for key, unit in state["units"].items()}


def test_a_small_claim_is_paid_without_review(claims: Approvals) -> None:
    claims.start("claim-small", 40.0)
    state = claims.finished("claim-small")
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"paid": True, "payment_id": "pay-claim-small"}
    assert unit_statuses(state) == {
        "rules": "SUCCEEDED",
        "manager": "SKIPPED",
        "finance": "SKIPPED",
        "pay": "SUCCEEDED",
    }
    assert claims.query("claim-small") == {"waiting_for": "nobody", "paid": True}


def test_a_medium_claim_waits_for_the_manager(claims: Approvals) -> None:
    claims.start("claim-medium", 500.0)
    claims.waiting_for("claim-medium", "manager_review")
    assert claims.query("claim-medium") == {"waiting_for": "manager", "paid": False}

    refused = claims.cli(
        "signal", "claim-medium", "manager_review", "--data", '{"approved": "yes", "by": "bo"}'
    )
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "error: SIGNAL_PAYLOAD_INVALID (422): payload for signal `manager_review` is invalid"
        " at $.approved: expected Bool, found a string"
    )
    unknown = claims.cli("signal", "claim-medium", "manager_reveiw", "--data", "{}")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        "error: UNKNOWN_SIGNAL (404): ExpenseClaim@1.0.0 has no signal `manager_reveiw`;"
        " declared: manager_review, finance_review, comment"
    )
    assert not [e for e in claims.server.events("claim-medium") if e["type"] == "SignalReceived"]

    sent = claims.cli.ok(
        "signal", "claim-medium", "manager_review", "--data", '{"approved": true, "by": "bo"}'
    )
    seq = int(sent.stdout)
    assert sent.stderr.strip() == (
        f"signal `manager_review` recorded for claim-medium (history #{seq});"
        " the next `await manager_review` step takes it"
    )
    state = claims.finished("claim-medium")
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"paid": True, "payment_id": "pay-claim-medium"}
    assert unit_statuses(state)["finance"] == "SKIPPED"
    received = next(e for e in claims.server.events("claim-medium") if e["seq"] == seq)
    assert received["type"] == "SignalReceived"
    assert received["payload"] == {"approved": True, "by": "bo"}

    finished = claims.cli("signal", "claim-medium", "manager_review", "--data", "{}")
    assert finished.returncode == 1
    assert finished.stderr.strip() == (
        "error: EXECUTION_FINISHED (409): execution is already COMPLETED"
    )


def test_a_large_claim_needs_the_manager_then_finance(claims: Approvals) -> None:
    from orbit_sdk import Client

    claims.start("claim-large", 7500.0)
    claims.waiting_for("claim-large", "manager_review")
    # Finance decides first: the signal waits in the buffer until `finance` awaits it.
    early = claims.typescript_client(
        "signal", "claim-large", "finance_review", '{"approved": true, "by": "cy"}'
    )
    assert isinstance(early, int)
    assert claims.typescript_client("query", "claim-large", "status") == {
        "waiting_for": "manager",
        "paid": False,
    }
    with Client(server=claims.server.url) as client:
        manager_seq = client.signal("claim-large", "manager_review", {"approved": True, "by": "bo"})
        state = client.wait("claim-large", timeout_ms=30000)
        assert client.query("claim-large", "status") == {"waiting_for": "nobody", "paid": True}
    assert manager_seq is not None and manager_seq > early
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"paid": True, "payment_id": "pay-claim-large"}
    events = claims.server.events("claim-large")
    delivered = {e["step"]: e for e in events if e["type"] == "SignalDelivered"}
    assert {step: e["signal_seq"] for step, e in delivered.items()} == {
        "manager": manager_seq,
        "finance": early,
    }
    paid = next(e for e in events if e["type"] == "StepSucceeded" and e["step"] == "pay")
    assert delivered["manager"]["seq"] < delivered["finance"]["seq"] < paid["seq"]


def test_finance_can_refuse_what_the_manager_approved(claims: Approvals) -> None:
    claims.start("claim-refused", 6000.0)
    claims.waiting_for("claim-refused", "manager_review")
    claims.signal("claim-refused", "manager_review", {"approved": True, "by": "bo"})
    claims.waiting_for("claim-refused", "finance_review")
    assert claims.query("claim-refused") == {"waiting_for": "finance", "paid": False}
    claims.signal("claim-refused", "finance_review", {"approved": False, "by": "cy"})
    state = claims.finished("claim-refused")
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"paid": False, "payment_id": None}
    assert unit_statuses(state)["pay"] == "SKIPPED"
    assert "claim claim-refused" not in claims.python.log()


def test_comments_are_forwarded_while_the_claim_waits(claims: Approvals) -> None:
    from orbit_sdk import Client

    claims.start("claim-comments", 300.0)
    claims.waiting_for("claim-comments", "manager_review")
    seqs = [
        claims.signal("claim-comments", "comment", {"by": "bo", "text": "which trip was this?"})
    ]
    with Client(server=claims.server.url) as client:
        seq = client.signal("claim-comments", "comment", {"by": "ann", "text": "the Lyon visit"})
        assert seq is not None  # a single server always knows it
        seqs.append(seq)
    seqs.append(
        claims.typescript_client(
            "signal", "claim-comments", "comment", '{"by": "bo", "text": "thanks"}'
        )
    )

    def forwarded() -> list[str]:
        return [n["text"] for n in claims.notifications() if n["execution_id"] == "claim-comments"]

    wait_until(lambda: len(forwarded()) == 3, 30, "three forwarded comments")
    # One handler run per comment, keyed by the seq of its SignalReceived.
    handled = {
        e["step"]
        for e in claims.server.events("claim-comments")
        if e["type"] == "StepSucceeded" and e["step"].startswith("on_event:comment@")
    }
    assert handled == {f"on_event:comment@{seq}:forward" for seq in seqs}
    assert sorted(forwarded()) == sorted(
        [
            "bo commented: which trip was this?",
            "ann commented: the Lyon visit",
            "bo commented: thanks",
        ]
    )
    assert {n["to"] for n in claims.notifications() if n["execution_id"] == "claim-comments"} == {
        "ann"
    }
    assert claims.query("claim-comments") == {"waiting_for": "manager", "paid": False}
    claims.signal("claim-comments", "manager_review", {"approved": True, "by": "bo"})
    state = claims.finished("claim-comments")
    assert state["status"] == "COMPLETED"
    assert state["output"]["paid"] is True


def test_a_claim_nobody_reviews_fails_and_escalates(claims: Approvals, tmp_path: Path) -> None:
    # The book's deadlines are days long; this copy waits two seconds.
    quick = tmp_path / "expense.orbit"
    source = claims.workflow.read_text()
    quick.write_text(
        source.replace('version "1.0.0"\n    description', 'version "1.0.1"\n    description')
        .replace("timeout 3d", "timeout 2s")
        .replace("timeout 5d", "timeout 2s")
    )
    claims.start("claim-late", 900.0, workflow=quick)
    state = claims.finished("claim-late")
    assert state["status"] == "FAILED"
    message = "step `manager` failed: no `manager_review` signal arrived before the step's timeout"
    assert state["error"]["code"] == "SIGNAL_TIMEOUT"
    assert state["error"]["message"] == message
    assert state["units"]["on_failure:escalate"]["status"] == "SUCCEEDED"
    escalations = [n for n in claims.notifications() if n["execution_id"] == "claim-late"]
    assert [(n["to"], n["text"]) for n in escalations] == [
        ("bo", f"Claim claim-late was not decided in time: {message}")
    ]
    types = [e["type"] for e in claims.server.events("claim-late")]
    assert types[-3:] == ["StepDispatched", "StepSucceeded", "WorkflowFailed"]
    assert "HandlersStarted" in types
    assert claims.query("claim-late") == {"waiting_for": "manager", "paid": False}
