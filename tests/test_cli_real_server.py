"""The runtime commands of the real CLI against a real `orbit server` with
authentication, compared with the book's transcripts: chapter 20's approval
(`run --no-wait`, `status`, `query`, `signal`, `logs`, `cancel`) and Batch
(signals buffered before their await), chapter 25's Inbox (`logs --run N`
after continue-as-new), `run` by name with `--id` and `--input-file`, `deploy`,
`ps` and `workers list`, and every error path printing one clear line and
exiting non-zero. The server's admin and worker tokens are made with `orbit token`.
Workers are raw-protocol threads (no SDK)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from cli_real import REPO, Handler, Orbit, TaskWorker, golden, one_error_line, same_run
from click.testing import Result
from e2e.e2e_transcripts import same
from server_harness import Http, ServerProcess

pytestmark = pytest.mark.timeout(120)

APPROVAL = REPO / "tests" / "book" / "support" / "approval.orbit"

# Chapter 25's Inbox, with a shorter sleep (durations are masked anyway).
INBOX = """\
workflow Inbox {
    version "1.0.0"
    input { seen: Int = 0 }
    output { seen: Int }
    signal message { text: String }
    step take { await message timeout 1d }
    step pause { sleep 1s after take }
    continue_as_new when take.text != "stop" with { seen: input.seen + 1 }
    return { seen: input.seen + 1 }
}
"""

# Chapter 20's Batch, likewise.
BATCH = """\
workflow Batch {
    version "1.0.0"
    timeout 1h
    signal item { sku: String, quantity: Int = 1 }
    step pause { sleep 1s }
    step first { await item after pause }
    step second { await item after first }
    return { skus: [first.sku, second.sku], total: first.quantity + second.quantity }
}
"""


def charge(task: dict[str, Any]) -> Any:
    return {"transaction_id": f"tx-{task['input']['order_id']}", "status": "captured"}


def refund(task: dict[str, Any]) -> Any:
    return {"refunded": True}


def send(task: dict[str, Any]) -> Any:
    return {"delivered": True}


@attrs.frozen
class Credentials:
    """The server's admin and worker tokens, both made by `orbit token`."""

    admin: str
    worker: str


def made_token(*args: str) -> str:
    result = Orbit("").ok("token", *args)
    token = result.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", token), result.output
    digest = re.search(r'token_sha256 = "([0-9a-f]{64})"', result.stderr)
    assert digest and digest[1] == hashlib.sha256(token.encode()).hexdigest(), result.stderr
    return token


@pytest.fixture(scope="module")
def credentials() -> Credentials:
    return Credentials(made_token("--client", "ops"), made_token("--worker", "orders"))


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, credentials: Credentials
) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("cli-real") / "orbit.db"
    tokens = ("--token", credentials.admin, "--worker-token", credentials.worker)
    with ServerProcess(db, *tokens) as proc:
        python: dict[str, Handler] = {"payments.charge": charge, "payments.refund": refund}
        typescript: dict[str, Handler] = {"notifications.send": send}
        workers = [
            TaskWorker(proc, "orders-python", "python", python, credentials.worker),
            TaskWorker(proc, "orders-typescript", "typescript", typescript, credentials.worker),
        ]
        for worker in workers:
            worker.start()
        try:
            yield proc
        finally:
            for worker in workers:
                worker.stop()


@pytest.fixture
def orbit(server: ServerProcess, credentials: Credentials) -> Orbit:
    return Orbit(f"http://{server.addr}", credentials.admin)


@pytest.fixture
def api(server: ServerProcess, credentials: Credentials) -> Http:
    return server.http(credentials.admin)


def state_of(api: Http, execution: str) -> dict[str, Any]:
    reply = api.get(f"/v1/executions/{execution}")
    assert reply.status == 200, reply
    return dict(reply.body)


def wait_until(api: Http, execution: str, done: Callable[[dict[str, Any]], bool]) -> None:
    deadline = time.monotonic() + 30
    while not done(state_of(api, execution)):
        assert time.monotonic() < deadline, state_of(api, execution)
        time.sleep(0.02)


def finished(api: Http, execution: str) -> dict[str, Any]:
    reply = api.get(f"/v1/executions/{execution}/wait?timeout_ms=30000")
    assert reply.status == 200 and reply.body["status"] != "RUNNING", reply
    return dict(reply.body)


def waiting_for_review(state: dict[str, Any]) -> bool:
    return bool(state["units"].get("decision", {}).get("status") == "WAITING")


def start_big_order(orbit: Orbit, api: Http, execution: str) -> Result:
    order = {"order_id": execution.removeprefix("order-"), "customer_id": "c-7", "amount": 2500.0}
    result = orbit.ok(
        "run", str(APPROVAL), "--id", execution, "--input", json.dumps(order), "--no-wait"
    )
    wait_until(api, execution, waiting_for_review)
    return result


def test_the_approval_of_chapter_20(orbit: Orbit, api: Http, tmp_path: Path) -> None:
    started = start_big_order(orbit, api, "order-A-100")
    assert started.stdout == "order-A-100\n"
    same(
        started.output,
        """\
        deployed OrderApproval@1.0.0 (sha256:939fd564b818)
        started execution order-A-100
        order-A-100
        """,
    )
    # assess and decision change in the same millisecond, so they are listed by key.
    same(orbit.ok("status", "order-A-100").stdout, golden("status_order_A_100_waiting"))
    same(orbit.ok("query", "order-A-100", "status").stdout, golden("query_order_A_100"))

    refusals = {
        "signal_invalid_payload": ("signal", "review", '{"approved": "yes", "reviewer": "dana"}'),
        "signal_unknown": ("signal", "reveiw", "{}"),
        "signal_bad_json": ("signal", "review", "x"),
    }
    for name, (command, signal, data) in refusals.items():
        same(one_error_line(orbit(command, "order-A-100", signal, "--data", data)), golden(name))
    same(one_error_line(orbit("query", "order-A-100", "stat")), golden("query_unknown"))

    data = '{"approved": true, "reviewer": "dana", "comment": "verified by phone"}'
    sent = orbit.ok("signal", "order-A-100", "review", "--data", data)
    assert sent.stdout == "5\n"
    same(sent.stderr, golden("signal_review"))

    finished(api, "order-A-100")
    same(orbit.ok("status", "order-A-100").stdout, golden("status_order_A_100"))
    same(orbit.ok("logs", "order-A-100").stdout, golden("logs_order_A_100"))
    raw = orbit.ok("logs", "order-A-100", "--json").stdout.splitlines()
    assert [json.loads(line)["seq"] for line in raw] == list(range(1, 14))
    signals = "\n".join(line for line in raw if "Signal" in line)
    same(signals, golden("logs_order_A_100_json_signals"))
    assert json.loads(orbit.ok("query", "order-A-100", "status").stdout) == {
        "needs_approval": True,
        "approved": True,
        "reviewer": "dana",
        "charged": True,
    }

    review = tmp_path / "review.json"
    review.write_text('{"approved": true, "reviewer": "dana"}', encoding="utf-8")
    late = orbit("signal", "order-A-100", "review", "--data", f"@{review}")
    same(one_error_line(late), golden("signal_finished"))


def test_cancel_with_a_reason(orbit: Orbit, api: Http) -> None:
    start_big_order(orbit, api, "order-A-103")
    cancelled = orbit.ok("cancel", "order-A-103", "--reason", "order withdrawn")
    same(cancelled.stdout, golden("cancel"))
    tail = orbit.ok("logs", "order-A-103").stdout.splitlines()[-5:]
    same(
        "\n".join(tail),
        """\
        +   312ms   #5  CancelRequested           reason=order withdrawn
        +   313ms   #6  StepCancelled             step=decision
        +   313ms   #7  StepCancelled             step=charge
        +   313ms   #8  StepCancelled             step=notify
        +   313ms   #9  WorkflowCancelled
        """,
    )
    same(one_error_line(orbit("cancel", "order-A-103")), golden("cancel_finished"))


def test_a_rejection_skips_the_charge(orbit: Orbit, api: Http) -> None:
    start_big_order(orbit, api, "order-A-101")
    data = '{"approved": false, "reviewer": "lee", "comment": "customer could not be reached"}'
    orbit.ok("signal", "order-A-101", "review", "--data", data)
    finished(api, "order-A-101")
    # decision and charge change in one commit, charge last; the book lists them by key.
    same(
        orbit.ok("status", "order-A-101").stdout,
        """\
        COMPLETED order-A-101  OrderApproval@1.0.0
          elapsed: 328ms

          STEP                         STATUS       ATTEMPT     TIME  DETAIL
          assess                       SUCCEEDED          1
          charge                       SKIPPED            0
          decision                     SUCCEEDED          1    315ms
          notify                       SUCCEEDED          1      5ms  worker orders-typescript

          output: {"status":"rejected","transaction_id":null}
        """,
    )


def test_run_by_name_with_an_id_and_an_input_file(orbit: Orbit, api: Http, tmp_path: Path) -> None:
    orbit.ok("deploy", str(APPROVAL))
    order = tmp_path / "order.json"
    order.write_text('{"order_id": "A-102", "customer_id": "c-9", "amount": 120.0}')
    run = orbit("run", "OrderApproval", "--id", "order-A-102", "--input-file", str(order))
    assert run.exit_code == 0, run.output
    same_run(
        run.output,
        """\
        started execution order-A-102
          ✓ assess                         succeeded
          ↷ decision                       skipped
          ✓ charge                         succeeded 7ms
          ✓ notify                         succeeded 9ms

        COMPLETED order-A-102  OrderApproval@1.0.0
          elapsed: 22ms
        {
          "status": "charged",
          "transaction_id": "tx-A-102"
        }
        """,
    )
    again = orbit.ok("run", "OrderApproval", "--id", "order-A-102", "--input", "{}")
    assert again.stderr.startswith("attached to existing execution order-A-102\n")
    assert json.loads(again.stdout) == json.loads(run.stdout)
    # --input wins over --input-file.
    bad = orbit("run", "OrderApproval", "--input", "{", "--input-file", str(order))
    assert one_error_line(bad).startswith("error: --input is not valid JSON: ")


def test_deploy_reports_deployed_then_up_to_date(orbit: Orbit, tmp_path: Path) -> None:
    source = tmp_path / "inbox.orbit"
    source.write_text(INBOX.replace('"1.0.0"', '"2.0.0"'), encoding="utf-8")
    first = orbit.ok("deploy", str(source), str(APPROVAL))
    assert first.stdout == ""
    lines = sorted(first.stderr.splitlines())
    assert lines[0].startswith("deployed Inbox@2.0.0 (sha256:"), lines
    assert lines[1].startswith(("deployed OrderApproval@1.0.0", "up to date OrderApproval@1.0.0"))
    again = orbit.ok("deploy", str(APPROVAL), str(source))
    same(
        again.stderr,
        """\
        up to date OrderApproval@1.0.0 (sha256:939fd564b818)
        up to date Inbox@2.0.0 (sha256:066240aa22c4)
        """,
    )


def test_continue_as_new_runs_of_chapter_25(orbit: Orbit, api: Http, tmp_path: Path) -> None:
    source = tmp_path / "inbox.orbit"
    source.write_text(INBOX, encoding="utf-8")
    orbit.ok("run", str(source), "--id", "inbox-1", "--no-wait")
    wait_until(api, "inbox-1", lambda s: "take" in s["units"])
    orbit.ok("signal", "inbox-1", "message", "--data", '{"text": "first"}')
    # The other two arrive while run 1 sleeps, after `take` has its message.
    wait_until(api, "inbox-1", lambda s: s["units"].get("pause", {}).get("status") == "WAITING")
    orbit.ok("signal", "inbox-1", "message", "--data", '{"text": "second"}')
    orbit.ok("signal", "inbox-1", "message", "--data", '{"text": "stop"}')
    assert finished(api, "inbox-1")["status"] == "COMPLETED"

    same(orbit.ok("logs", "inbox-1", "--run", "1").stdout, golden("logs_inbox_1_run_1"))
    same(orbit.ok("logs", "inbox-1", "--run", "2").stdout, golden("logs_inbox_1_run_2"))
    head = orbit.ok("logs", "inbox-1", "--run", "2", "--json").stdout.splitlines()[:4]
    same("\n".join(head), golden("logs_inbox_1_run_2_json_head"))
    same(orbit.ok("status", "inbox-1").stdout, golden("status_inbox_1"))
    missing = orbit("logs", "inbox-1", "--run", "7")
    assert one_error_line(missing) == (
        "error: RUN_NOT_FOUND (404): execution `inbox-1` has runs 1 to 3; there is no run 7"
    )


def test_signals_buffered_before_the_await(orbit: Orbit, api: Http, tmp_path: Path) -> None:
    source = tmp_path / "batch.orbit"
    source.write_text(BATCH, encoding="utf-8")
    orbit.ok("run", str(source), "--id", "batch-1", "--no-wait")
    wait_until(api, "batch-1", lambda s: s["units"].get("pause", {}).get("status") == "WAITING")
    first = orbit.ok("signal", "batch-1", "item", "--data", '{"sku": "A-1"}')
    second = orbit.ok("signal", "batch-1", "item", "--data", '{"sku": "B-2", "quantity": 3}')
    same(
        first.stderr + second.stderr,
        """\
        signal `item` recorded for batch-1 (history #4); the next `await item` step takes it
        signal `item` recorded for batch-1 (history #5); the next `await item` step takes it
        """,
    )
    assert finished(api, "batch-1")["status"] == "COMPLETED"
    # pause, first and second all change in the commit of the timer: by key.
    same(orbit.ok("status", "batch-1").stdout, golden("status_batch_1"))
    same(orbit.ok("logs", "batch-1").stdout, golden("logs_batch_1"))


def test_ps_filters_and_limit(orbit: Orbit, api: Http) -> None:
    for execution in ("order-P-1", "order-P-2"):
        start_big_order(orbit, api, execution)
    rows = orbit.ok("ps", "--status", "running", "--workflow", "OrderApproval", "--limit", "2")
    listed = [line.split() for line in rows.stdout.splitlines()]
    assert listed[0] == ["EXECUTION", "WORKFLOW", "VERSION", "STATUS", "AGE"]
    assert [row[:4] for row in listed[1:]] == [
        ["order-P-2", "OrderApproval", "1.0.0", "RUNNING"],
        ["order-P-1", "OrderApproval", "1.0.0", "RUNNING"],
    ]
    one = orbit.ok("ps", "--workflow", "OrderApproval", "--limit", "1").stdout.splitlines()
    assert len(one) == 2 and one[1].startswith("order-P-2 ")
    for execution in ("order-P-1", "order-P-2"):
        orbit.ok("cancel", execution)


def test_workers_list(orbit: Orbit) -> None:
    same(
        orbit.ok("workers", "list").stdout,
        """\
        WORKER                       RUNTIME      STATE    INFLIGHT  TASKS
        orders-python                python       online   0  payments.charge@1.0.0, payments.refund@1.0.0
        orders-typescript            typescript   online   0  notifications.send@1.0.0
        """,
    )


def test_unknown_executions_and_workflows(orbit: Orbit) -> None:
    for args in (
        ("status", "nope"),
        ("logs", "nope"),
        ("inspect", "nope"),
        ("cancel", "nope"),
        ("query", "nope", "status"),
        ("signal", "nope", "review"),
    ):
        line = one_error_line(orbit(*args))
        assert line == "error: NOT_FOUND (404): execution `nope` not found", args
    unknown = one_error_line(orbit("run", "Nope"))
    same(unknown, "error: WORKFLOW_NOT_FOUND (404): workflow Nope is not registered")


def test_bad_json_input(orbit: Orbit) -> None:
    line = one_error_line(orbit("run", "OrderApproval", "--input", "{"))
    assert line.startswith("error: --input is not valid JSON: ")
    line = one_error_line(orbit("signal", "order-A-100", "review", "--data", "[1,"))
    assert line.startswith("error: --data is not valid JSON: ")


def test_credentials_are_checked(orbit: Orbit, credentials: Credentials) -> None:
    for token in ("wrong", ""):
        line = one_error_line(orbit("ps", env={"ORBIT_TOKEN": token}))
        same(line, "error: UNAUTHENTICATED (401): missing or invalid credentials")
    worker = one_error_line(orbit("ps", env={"ORBIT_TOKEN": credentials.worker}))
    same(
        worker,
        "error: FORBIDDEN (403): worker credentials may only call /v1/workers/* and /v1/tasks/*",
    )


def test_an_unreachable_server(orbit: Orbit) -> None:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    result = orbit("status", "order-A-100", env={"ORBIT_SERVER": url})
    assert result.exit_code == 1 and result.stdout == ""
    same(
        result.stderr.replace(url, "http://127.0.0.1:7233"),
        """\
        error: cannot reach the ORBIT runtime at http://127.0.0.1:7233: io: Connection refused (os error 111)
          hint: start it with `orbit server` or set --server / ORBIT_SERVER
        """,
    )


def test_run_says_when_no_worker_serves_a_step(
    orbit: Orbit, api: Http, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A misspelled `using` leaves the task queued: `orbit run` says nothing
    polls for it and who is connected for that task; status and the API agree."""
    from orbit_cli import execution

    monkeypatch.setattr(execution, "WAIT_NOTICE_S", 0.3)
    (tmp_path / "contracts.orbit").write_text(
        (APPROVAL.parent / "contracts.orbit").read_text(encoding="utf-8"), encoding="utf-8"
    )
    source = tmp_path / "typo.orbit"
    source.write_text(
        'import "contracts.orbit"\n'
        "workflow Typo {\n"
        '    version "1.0.0"\n'
        "    timeout 3s\n"
        "    step notify {\n"
        '        worker "notifications.send"\n'
        "        using typscript\n"
        '        with { customer_id: "c-1", message: "hi" }\n'
        "    }\n"
        "}\n",
        encoding="utf-8",
    )
    orbit.ok("run", str(source), "--id", "typo-1", "--no-wait")
    (entry,) = state_of(api, "typo-1")["waiting_for"]
    assert entry["units"] == ["notify"] and entry["serving"] == 0
    assert entry["runtime"] == "typscript"
    status = orbit.ok("status", "typo-1").stdout
    assert (
        "SCHEDULED          1           no worker is polling for "
        "notifications.send@1.0.0 on runtime typscript\n"
    ) in status
    result = orbit("run", str(source), "--id", "typo-1")
    assert result.exit_code == 1, result.output
    assert (
        "  … notify                         no worker is polling for "
        "notifications.send@1.0.0 on runtime typscript\n"
        "    connected for notifications.send: orders-typescript (typescript, 1.0.0)\n"
    ) in result.stderr


def test_ctrl_c_on_run_leaves_the_execution_running(
    server: ServerProcess, credentials: Credentials, api: Http, tmp_path: Path
) -> None:
    """`orbit run` as a real process, interrupted while it follows: it says
    the execution keeps running and how to find it again."""
    import os
    import signal
    import subprocess

    from server_harness import ORBIT

    (tmp_path / "contracts.orbit").write_text(
        (APPROVAL.parent / "contracts.orbit").read_text(encoding="utf-8"), encoding="utf-8"
    )
    source = tmp_path / "idle.orbit"
    source.write_text(
        'import "contracts.orbit"\n'
        "workflow Idle {\n"
        '    version "1.0.0"\n'
        "    step notify {\n"
        '        worker "notifications.send"\n'
        "        using nobody\n"
        '        with { customer_id: "c-1", message: "hi" }\n'
        "    }\n"
        "}\n",
        encoding="utf-8",
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")},
        "ORBIT_SERVER": f"http://{server.addr}",
        "ORBIT_TOKEN": credentials.admin,
        "NO_COLOR": "1",
        # A SIGABRT prints every thread's stack: what a hang waits for.
        "PYTHONFAULTHANDLER": "1",
    }
    # A shell's background job (`scripts/test &`) ignores SIGINT, and so
    # would this child: started with Python's own handler, it gets the default.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [ORBIT, "run", str(source), "--id", "idle-1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    lines: list[str] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while "started execution idle-1\n" not in lines:
            assert time.monotonic() < deadline, lines
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            # A hang shows where it waits.
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=10)
            reader.join(10)
            pytest.fail("orbit run did not stop on Ctrl-C:\n" + "".join(lines))
        reader.join(10)
        stdout = proc.stdout.read() if proc.stdout else ""
        stderr = "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == 130, stderr
    assert stdout == ""
    assert "Traceback" not in stderr
    assert stderr.endswith(
        "\nstopped following; execution idle-1 keeps running on the server\n"
        "  where it stands:  orbit status idle-1   (its history: orbit logs idle-1)\n"
        "  follow it again:  orbit run Idle --id idle-1\n"
        "  stop it:          orbit cancel idle-1\n"
    ), stderr
    assert state_of(api, "idle-1")["status"] == "RUNNING"
    api.post("/v1/executions/idle-1/cancel", {})
