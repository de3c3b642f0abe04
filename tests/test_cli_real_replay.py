"""`orbit replay` (chapter 53) on histories recorded by a real `orbit server`:
the chapter's Reminder (consistent, `--at`, a divergence against edited
source, the JSON report from a saved history), an execution with worker
results and a compensation, every run of one that continued as new, and an
execution id the server does not know."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_real import REPO, Orbit, TaskWorker, one_error_line
from e2e.e2e_transcripts import same
from server_harness import Http, ServerProcess

pytestmark = pytest.mark.timeout(120)

REMINDER = (REPO / "tests" / "book" / "examples" / "53-replay" / "0047.orbit").read_text()
APPROVAL = REPO / "tests" / "book" / "support" / "approval.orbit"

# Chapter 25's Inbox: one run per message until "stop".
INBOX = """\
workflow Inbox {
    version "1.0.0"
    input { seen: Int = 0 }
    output { seen: Int }
    signal message { text: String }
    step take { await message timeout 1d }
    step pause { sleep 50ms after take }
    continue_as_new when take.text != "stop" with { seen: input.seen + 1 }
    return { seen: input.seen + 1 }
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("replay") / "orbit.db"
    with ServerProcess(db) as proc:
        worker = TaskWorker(
            proc,
            "replay-python",
            "python",
            {
                "payments.charge": lambda t: {"transaction_id": "tx-1", "status": "captured"},
                "payments.refund": lambda t: {"refunded": True},
                "notifications.send": _mailbox_full,
            },
        ).start()
        try:
            yield proc
        finally:
            worker.stop()


def _mailbox_full(task: dict[str, Any]) -> Any:
    from cli_real import TaskFailure

    raise TaskFailure("MAILBOX_FULL", "the mailbox is full", retryable=False)


@pytest.fixture(scope="module")
def orbit(server: ServerProcess) -> Orbit:
    return Orbit(f"http://{server.addr}")


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> Http:
    return server.http()


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sources")
    (root / "reminder.orbit").write_text(REMINDER)
    (root / "reminder-v2.orbit").write_text(REMINDER.replace("sleep 1s", "sleep 10s"))
    (root / "inbox.orbit").write_text(INBOX)
    return root


def _in_run(run: int, state: dict[str, Any]) -> bool:
    return bool(state.get("run", 1) == run)


def wait_until(api: Http, execution: str, done: Callable[[dict[str, Any]], bool]) -> None:
    deadline = time.monotonic() + 30
    while True:
        reply = api.get(f"/v1/executions/{execution}")
        if reply.status == 200 and done(reply.body):
            return
        assert time.monotonic() < deadline, reply
        time.sleep(0.02)


def waits_for(step: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: s["units"].get(step, {}).get("status") == "WAITING"


def finished(state: dict[str, Any]) -> bool:
    return state["status"] not in ("RUNNING", "COMPENSATING")


@pytest.fixture(scope="module")
def reminder(orbit: Orbit, api: Http, sources: Path) -> str:
    """rem-1, run as the chapter shows: the ack a second after the timer."""
    orbit.ok(
        "run",
        str(sources / "reminder.orbit"),
        "--id",
        "rem-1",
        "--input",
        '{"name":"Ada"}',
        "--no-wait",
    )
    wait_until(api, "rem-1", waits_for("confirm"))
    orbit.ok("signal", "rem-1", "ack", "--data", '{"ok":true}')
    wait_until(api, "rem-1", finished)
    return "rem-1"


def test_a_recorded_history_is_consistent(orbit: Orbit, reminder: str) -> None:
    result = orbit("replay", reminder)
    assert result.exit_code == 0, result.output
    same(
        result.stdout,
        """\
        replayed 9 events of rem-1 against Reminder@1.0.0 with the current decider
          6 decided, 3 external
        consistent: every recorded decision is reproduced
        """,
    )


def test_time_travel(orbit: Orbit, reminder: str) -> None:
    result = orbit("replay", reminder, "--at", "6")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "replayed 6 events of rem-1 against Reminder@1.0.0 with the current decider",
        "  4 decided, 2 external",
        "",
    ]
    assert lines[3].startswith("state after #6 SignalAwaitStarted (+")
    body = "\n".join(lines[4:])
    assert "RUNNING rem-1  Reminder@1.0.0" in body
    assert '  step outputs:\n    greet: {"text":"hello Ada"}\n    wait: {}' in body
    rows = {
        line.split()[0]: line.split()[1]
        for line in lines
        if line.startswith("  ") and line.split()[0] in ("greet", "confirm", "wait")
    }
    assert rows == {"greet": "SUCCEEDED", "confirm": "WAITING", "wait": "SUCCEEDED"}


def test_a_divergence_against_edited_source(orbit: Orbit, reminder: str, sources: Path) -> None:
    result = orbit("replay", reminder, "--definition", str(sources / "reminder-v2.orbit"))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "replayed 9 events of rem-1 against Reminder@1.0.0 with the current decider",
        "  5 decided, 3 external, 1 divergent",
    ]
    assert lines[2].startswith("  note: the history was recorded with definition sha256:")
    assert lines[3:5] == ["", "divergence at #4: the runtime recorded"]
    recorded = json.loads(lines[5])
    assert lines[6] == "  but the current decider would record"
    decided = json.loads(lines[7])
    assert recorded["type"] == decided["type"] == "TimerStarted"
    assert decided["fire_at_ms"] - recorded["fire_at_ms"] == 9000
    assert len(lines) == 8


def test_a_saved_history_replays_offline_as_json(
    orbit: Orbit, api: Http, reminder: str, sources: Path, tmp_path: Path
) -> None:
    history = tmp_path / "rem-1.json"
    history.write_text(json.dumps(api.get("/v1/executions/rem-1/history").body))
    result = orbit(
        "replay",
        "--history",
        str(history),
        "--definition",
        str(sources / "reminder.orbit"),
        "--json",
        env={"ORBIT_SERVER": "http://127.0.0.1:9"},
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == [
        "execution_id",
        "events",
        "external",
        "decided",
        "divergences",
        "origins",
        "pending",
        "state",
    ]
    assert (report["execution_id"], report["events"], report["external"], report["decided"]) == (
        "rem-1",
        9,
        3,
        6,
    )
    assert report["divergences"] == [] and report["pending"] == []
    assert [o["origin"] for o in report["origins"]] == [
        "external",
        "external",
        "decided",
        "decided",
        "decided",
        "decided",
        "external",
        "decided",
        "decided",
    ]
    assert report["state"]["status"] == "COMPLETED"
    # A bare array of events replays too; the id is read from the history.
    bare = tmp_path / "events.json"
    bare.write_text(json.dumps(api.get("/v1/executions/rem-1/history").body["events"]))
    again = orbit(
        "replay", "--history", str(bare), "--definition", str(sources / "reminder.orbit"), "--json"
    )
    assert json.loads(again.stdout)["origins"] == report["origins"]


def test_the_divergence_in_json(orbit: Orbit, reminder: str, sources: Path) -> None:
    result = orbit("replay", reminder, "--definition", str(sources / "reminder-v2.orbit"), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    (divergence,) = report["divergences"]
    assert divergence["seq"] == 4
    assert divergence["recorded"]["type"] == "TimerStarted"
    assert [e["type"] for e in divergence["decider"]] == ["TimerStarted"]
    assert report["definition_mismatch"][0] != report["definition_mismatch"][1]
    assert report["origins"][3] == {"seq": 4, "origin": "divergent"}


def test_worker_results_and_a_compensation(orbit: Orbit, api: Http) -> None:
    # The notification fails, so the charge is refunded: results of tasks
    # are external, everything the runtime decided around them is decided.
    orbit.ok(
        "run",
        str(APPROVAL),
        "--id",
        "order-R1",
        "--input",
        '{"order_id":"R1","customer_id":"c-1","amount":20.0}',
        "--no-wait",
    )
    wait_until(api, "order-R1", finished)
    result = orbit("replay", "order-R1", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["divergences"] == []
    assert report["state"]["status"] == "FAILED"
    events = api.get("/v1/executions/order-R1/history").body["events"]
    origins = {o["seq"]: o["origin"] for o in report["origins"]}
    kinds = {e["seq"]: e["type"] for e in events}
    for seq, origin in origins.items():
        if kinds[seq] in ("StepDispatched", "WorkflowCreated", "WorkflowStarted"):
            assert origin == "external"
        if kinds[seq] in ("CompensationStarted", "StepScheduled", "WorkflowFailed"):
            assert origin == "decided"
    assert "external" in {origins[s] for s, k in kinds.items() if k == "StepSucceeded"}


def test_every_run_after_continue_as_new(orbit: Orbit, api: Http, sources: Path) -> None:
    orbit.ok("run", str(sources / "inbox.orbit"), "--id", "inbox-1", "--no-wait")
    for text in ("a", "b", "stop"):
        wait_until(api, "inbox-1", waits_for("take"))
        orbit.ok("signal", "inbox-1", "message", "--data", json.dumps({"text": text}))
        if text != "stop":
            wait_until(api, "inbox-1", functools.partial(_in_run, {"a": 2, "b": 3}[text]))
    wait_until(api, "inbox-1", finished)
    latest = orbit("replay", "inbox-1")
    assert latest.exit_code == 0, latest.output
    assert "consistent: every recorded decision is reproduced" in latest.stdout
    for run in ("1", "2", "3"):
        result = orbit("replay", "inbox-1", "--run", run, "--json")
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["divergences"] == []
        expected = "COMPLETED" if run == "3" else "CONTINUED_AS_NEW"
        assert report["state"]["status"] == expected
    missing = orbit("replay", "inbox-1", "--run", "9")
    assert missing.exit_code == 1
    assert one_error_line(missing).startswith("error: RUN_NOT_FOUND (404)")


def test_an_unknown_execution(orbit: Orbit) -> None:
    result = orbit("replay", "no-such-execution")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: NOT_FOUND (404): ")
