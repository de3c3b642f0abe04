"""Chapter 42, delivery guarantees, with real processes: a worker killed while
it holds a task (the attempt goes uncertain and is redelivered to another
worker), cancellation reaching running handlers in both SDKs through the
heartbeat's cancel list, and the runtime killed with SIGKILL while a payment
is being charged (the execution completes with one recorded success)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from e2e_processes import REPO, Server, Stack
from e2e_transcripts import same

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PROJECTS = Path(__file__).resolve().parent / "projects" / "delivery"
ORDERS = str(REPO / "tests" / "book" / "support" / "order_processing.orbit")
SESSION_TIMEOUT = "5"


@pytest.fixture(scope="module")
def server(module_stack: Stack) -> Server:
    return module_stack.server("--session-timeout", SESSION_TIMEOUT)


def dispatched_to(server: Server, execution_id: str, step: str, worker_id: str) -> None:
    server.wait_for_event(
        execution_id,
        lambda e: (
            e["type"] == "StepDispatched" and e["step"] == step and e["worker_id"] == worker_id
        ),
    )


def test_a_silent_worker_s_attempt_is_redelivered(module_stack: Stack, server: Server) -> None:
    workers = module_stack.workers_dir()
    script = workers / "delivery_worker.py"
    flaky1 = module_stack.python_worker(
        "flaky-1", script, server, env={"E2E_WORKER_ID": "flaky-1", "E2E_HANG": "1"}
    )
    cli = module_stack.cli(server)
    cli.ok("run", str(PROJECTS / "plain.orbit"), "--id", "u-1", "--no-wait", "--input", '{"n": 1}')
    dispatched_to(server, "u-1", "work", "flaky-1")
    flaky1.wait_for_log("working on n=1")
    flaky1.kill()
    killed_ms = time.time() * 1000
    flaky2 = module_stack.typescript_worker(
        "flaky-2", workers / "delivery_worker.ts", server, env={"E2E_WORKER_ID": "flaky-2"}
    )
    state = server.wait_for_status("u-1", {"COMPLETED", "FAILED"}, timeout=30)
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"n": 1}
    same(
        cli.ok("logs", "u-1").stdout,
        """\
        +     0ms   #1  WorkflowCreated
        +     0ms   #2  WorkflowStarted
        +     1ms   #3  StepScheduled             step=work attempt=1
        +    39ms   #4  StepDispatched            step=work attempt=1 worker_id=flaky-1
        +    5.1s   #5  StepAttemptUncertain      step=work attempt=1 reason=worker `flaky-1` stopped responding
        +    5.1s   #6  StepScheduled             step=work attempt=1 redelivery=true
        +    6.6s   #7  StepDispatched            step=work attempt=1 worker_id=flaky-2
        +    6.7s   #8  StepSucceeded             step=work attempt=1
        +    6.7s   #9  WorkflowCompleted
        """,
    )
    events = server.events("u-1")
    # flaky-1 was last heard from at most one heartbeat (a sixth of the
    # session timeout) before it was killed.
    silent_for = events[4]["timestamp_ms"] - killed_ms
    assert 5000 - 1000 <= silent_for < 5000 + 3000
    assert events[5]["idempotency_key"] == events[2]["idempotency_key"] == "u-1/work"
    assert events[5]["input"] == events[2]["input"] == {"n": 1}
    executing = next(
        json.loads(line) for line in flaky2.log().splitlines() if '"message":"working"' in line
    )
    assert executing["execution_id"] == "u-1"
    assert executing["redelivery"] is True
    assert executing["attempt"] == 1
    flaky2.discard()


def test_cancellation_reaches_running_handlers_in_both_sdks(
    module_stack: Stack, server: Server
) -> None:
    workers = module_stack.workers_dir()
    python = module_stack.python_worker(
        "wait-python", workers / "delivery_worker.py", server, env={"E2E_WORKER_ID": "wait-python"}
    )
    typescript = module_stack.typescript_worker(
        "wait-typescript",
        workers / "delivery_worker.ts",
        server,
        env={"E2E_WORKER_ID": "wait-typescript"},
    )
    cli = module_stack.cli(server)
    cli.ok("run", str(PROJECTS / "waiting.orbit"), "--id", "wait-1", "--no-wait")
    dispatched_to(server, "wait-1", "python_side", "wait-python")
    dispatched_to(server, "wait-1", "typescript_side", "wait-typescript")
    python.wait_for_log("waiting for the runtime to cancel")
    typescript.wait_for_log("waiting for the runtime to cancel")

    asked = time.monotonic()
    cancel = cli.ok("cancel", "wait-1")
    assert "cancellation requested" in cancel.stdout + cancel.stderr
    state = server.wait_for_status("wait-1", {"CANCELLED"}, timeout=20)
    # A heartbeat comes every sixth of the session timeout, well within this.
    assert time.monotonic() - asked < 10
    python.wait_for_log("cancelled by the runtime")
    typescript.wait_for_log("cancelled by the runtime")

    failures = {
        e["step"]: e["error"] for e in server.events("wait-1") if e["type"] == "StepAttemptFailed"
    }
    assert failures["python_side"]["code"] == failures["typescript_side"]["code"] == "CANCELLED"
    assert failures["python_side"]["message"] == "stopped by the runtime"
    assert failures["python_side"]["retryable"] is failures["typescript_side"]["retryable"] is False
    assert state["units"]["python_side"]["status"] != "SUCCEEDED"
    assert state["units"]["typescript_side"]["status"] != "SUCCEEDED"


def test_z_crash_recovery(stack: Stack) -> None:
    """SIGKILL the runtime while a payment is being charged, start it again on
    the same database and port: the charge is recorded once, and the order
    completes."""
    server = stack.server("--session-timeout", SESSION_TIMEOUT)
    workers = stack.workers_dir()
    python = stack.python_worker("orders-python", workers / "order_workers.py", server)
    stack.typescript_worker("orders-typescript", workers / "order_workers.ts", server)
    cli = stack.cli(server)
    order = {
        "order_id": "Z-1",
        "customer_id": "c-42",
        "amount": 4242,
        "items": [{"sku": "BOOK-1", "quantity": 1}],
    }
    cli.ok("run", ORDERS, "--id", "crash-1", "--no-wait", "--input", json.dumps(order))
    dispatched_to(server, "crash-1", "process_payment", "orders-python")
    python.wait_for_log(r'"step": "process_payment", "attempt": 1, "task": "payments.charge"')

    server.kill()
    restarted_ms = time.time() * 1000
    server.start()
    state = server.wait_for_status("crash-1", {"COMPLETED", "FAILED"}, timeout=60)
    assert state["status"] == "COMPLETED"
    assert state["output"]["transaction_id"] == "tx-Z-1"
    events = server.events("crash-1")
    charges = [e for e in events if e.get("step") == "process_payment"]
    succeeded = [e for e in charges if e["type"] == "StepSucceeded"]
    assert len(succeeded) == 1
    # The charge finished while the runtime was down, and was reported after.
    assert succeeded[0]["timestamp_ms"] >= restarted_ms
    assert not [e for e in charges if e["type"] in ("StepAttemptUncertain", "StepAttemptFailed")]
    assert python.log().count("charged 4242 USD as tx-Z-1") == 1
    assert "recovered active executions from history executions=1" in server.log()
    assert python.registrations() >= 2


def test_a_task_is_not_handed_to_a_poll_whose_worker_hung_up(
    module_stack: Stack, server: Server
) -> None:
    register = {
        "worker_id": "gone",
        "runtime": "python",
        "contracts": [{"task_name": "demo.work", "contract_version": "1.0.0"}],
    }
    session = server.api("POST", "/v1/workers/register", register)[1]["worker_session_id"]
    body = json.dumps({"worker_session_id": session, "wait_ms": 8000}).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as poll:
        poll.sendall(
            b"POST /v1/workers/poll HTTP/1.1\r\nHost: orbit\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(0.5)
    # The worker is gone (its connection is closed); another one is polling.
    module_stack.python_worker(
        "alive",
        module_stack.workers_dir() / "delivery_worker.py",
        server,
        env={"E2E_WORKER_ID": "alive"},
    )
    cli = module_stack.cli(server)
    cli.ok("run", str(PROJECTS / "plain.orbit"), "--id", "u-2", "--no-wait", "--input", '{"n": 2}')
    state = server.wait_for_status("u-2", {"COMPLETED"}, timeout=3 * int(SESSION_TIMEOUT))
    events = server.events("u-2")
    assert state["status"] == "COMPLETED"
    # Earlier tests of this module may leave their own workers polling for
    # demo.work, so any live worker may take the task; the one that hung up
    # must not, and nothing may need redelivering.
    dispatched = [e["worker_id"] for e in events if e["type"] == "StepDispatched"]
    assert len(dispatched) == 1
    assert dispatched != ["gone"]
