"""The worker protocol conformance suite (README.md): every scenario runs
against every program in conftest.PROGRAMS, each with a real `orbit server`.

Scenarios that stop, freeze or restart a process start their own worker
(and, for the outage, their own runtime); the others share the module's.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from conformance_kit import SESSION_TIMEOUT_S, Conformance, new_server
from e2e_processes import Server, Stack, Worker
from server_harness import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CONTRACT_NAMES = {
    "conf.echo",
    "conf.flaky",
    "conf.fail_permanent",
    "conf.bad_output",
    "conf.sleep",
    "conf.sleep_until_cancelled",
}


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def worker_row(server: Server, worker_id: str) -> dict[str, Any]:
    status, body = server.api("GET", "/v1/workers")
    assert status == 200, body
    return next(row for row in body["workers"] if row["worker_id"] == worker_id)


def event_line(worker: Worker, name: str, execution_id: str, timeout: float = 30) -> None:
    worker.wait_for_log(rf"CONF {name} {execution_id} ", timeout)


def test_register(conf: Conformance, conf_worker: Worker) -> None:
    row = worker_row(conf.server, conf_worker.worker_id)
    assert row["runtime"] == conf.program.runtime
    assert row["online"] is True
    assert row["sessions"] == 1
    assert row["sdk"]
    announced = {f"{c['task_name']}@{c['contract_version']}" for c in row["contracts"]}
    assert announced == {f"{name}@1.0.0" for name in CONTRACT_NAMES}


def test_long_poll_hands_over_a_task_at_once(conf: Conformance, conf_worker: Worker) -> None:
    # The worker has been idle: its poll is parked on the runtime and must
    # return the task as it arrives, not when its wait (5 s) ends.
    execution = conf.start("ConfEcho", "long-poll", {"text": "hello"})
    state = conf.server.wait_for_status(execution, {"COMPLETED", "FAILED"}, timeout=30)
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"text": "hello"}
    events = conf.server.events(execution)
    scheduled = of_type(events, "StepScheduled")[0]["timestamp_ms"]
    dispatched = of_type(events, "StepDispatched")[0]
    assert dispatched["worker_id"] == conf_worker.worker_id
    assert dispatched["timestamp_ms"] - scheduled < 2000


def test_heartbeats_keep_a_session_holding_a_long_task(
    conf: Conformance, conf_worker: Worker
) -> None:
    ms = (SESSION_TIMEOUT_S + 2) * 1000
    execution = conf.start("ConfSleep", "heartbeat", {"ms": ms})
    state = conf.server.wait_for_status(execution, {"COMPLETED", "FAILED"}, timeout=60)
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"slept": ms}
    events = conf.server.events(execution)
    assert not of_type(events, "StepAttemptUncertain")
    assert len(of_type(events, "StepDispatched")) == 1
    assert conf_worker.registrations() == 1


def test_cancellation_through_the_heartbeat(conf: Conformance, conf_worker: Worker) -> None:
    execution = conf.start("ConfWait", "cancel", {"seconds": 60})
    event_line(conf_worker, "start", execution)
    asked = time.monotonic()
    status, body = conf.server.api(
        "POST", f"/v1/executions/{execution}/cancel", {"reason": "conformance"}
    )
    assert status == 200, body
    event_line(conf_worker, "cancelled", execution, timeout=15)
    assert time.monotonic() - asked < 10
    state = conf.server.wait_for_status(execution, {"CANCELLED"}, timeout=30)
    assert state["units"]["wait"]["status"] != "SUCCEEDED"
    failures = of_type(conf.server.events(execution), "StepAttemptFailed")
    assert [f["error"]["code"] for f in failures] == ["CANCELLED"]
    assert failures[0]["error"]["retryable"] is False


def test_local_deadline_stops_the_handler(conf: Conformance, conf_worker: Worker) -> None:
    execution = conf.start("ConfDeadline", "deadline", {"seconds": 60})
    event_line(conf_worker, "start", execution)
    # The SDK's deadline or the runtime's cancellation, whichever comes first.
    conf_worker.wait_for_log(rf"CONF (deadline|cancelled) {execution} ", timeout=15)
    state = conf.server.wait_for_status(execution, {"FAILED"}, timeout=30)
    codes = {
        f["error"]["code"] for f in of_type(conf.server.events(execution), "StepAttemptFailed")
    }
    assert codes <= {"TIMEOUT", "CONF_DEADLINE", "CANCELLED"}, codes
    assert state["status"] == "FAILED"
    # The one poll slot is free again.
    after = conf.start("ConfEcho", "after-deadline", {"text": "free"})
    assert conf.server.wait_for_status(after, {"COMPLETED"}, timeout=30)["output"] == {
        "text": "free"
    }


def test_permanent_failure(conf: Conformance, conf_worker: Worker) -> None:
    execution = conf.start("ConfPermanent", "permanent")
    state = conf.server.wait_for_status(execution, {"COMPLETED", "FAILED"}, timeout=30)
    assert state["status"] == "FAILED"
    failures = of_type(conf.server.events(execution), "StepAttemptFailed")
    assert len(failures) == 1
    error = failures[0]["error"]
    assert error["code"] == "CONF_PERMANENT"
    assert error["message"] == "permanent failure"
    assert error["retryable"] is False
    assert error["details"] == {"source": "conformance"}


def test_retryable_failure_is_retried(conf: Conformance, conf_worker: Worker) -> None:
    execution = conf.start("ConfFlaky", "retryable", {"succeed_on": 2})
    state = conf.server.wait_for_status(execution, {"COMPLETED", "FAILED"}, timeout=30)
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"attempt": 2}
    failures = of_type(conf.server.events(execution), "StepAttemptFailed")
    assert [(f["attempt"], f["error"]["code"], f["error"]["retryable"]) for f in failures] == [
        (1, "CONF_RETRYABLE", True)
    ]


def test_output_contract_violation(conf: Conformance, conf_worker: Worker) -> None:
    execution = conf.start("ConfBadOutput", "bad-output")
    state = conf.server.wait_for_status(execution, {"COMPLETED", "FAILED"}, timeout=30)
    assert state["status"] == "FAILED"
    failures = of_type(conf.server.events(execution), "StepAttemptFailed")
    assert [f["error"]["code"] for f in failures] == ["OUTPUT_CONTRACT_VIOLATION"]


def test_result_delivered_through_a_runtime_outage(conf: Conformance, own_stack: Stack) -> None:
    # A runtime of its own: it is stopped and started again on its port.
    server = new_server(
        own_stack, "outage-server", session_timeout_s=10, extensions=conf.extensions
    )
    worker = conf.worker(server)
    execution = conf.start("ConfSleep", "outage", {"ms": 1500}, server=server)
    event_line(worker, "start", execution)
    # Killed, so no request of the worker can slip in during a graceful stop.
    server.kill()
    event_line(worker, "done", execution)  # finished while the runtime is down
    restarted_ms = time.time() * 1000
    server.start()
    state = server.wait_for_status(execution, {"COMPLETED", "FAILED"}, timeout=60)
    assert state["status"] == "COMPLETED"
    events = server.events(execution)
    succeeded = of_type(events, "StepSucceeded")
    assert len(succeeded) == 1
    assert succeeded[0]["timestamp_ms"] >= restarted_ms
    assert not of_type(events, "StepAttemptFailed")
    # And the worker goes on: it registered again and serves new tasks.
    worker.wait_registered()
    after = conf.start("ConfEcho", "after-outage", {"text": "back"}, server=server)
    assert server.wait_for_status(after, {"COMPLETED"}, timeout=30)["output"] == {"text": "back"}


def test_session_expiry_and_registration_again(conf: Conformance, own_stack: Stack) -> None:
    # The runtime loses a session silent for a session timeout (its attempts
    # would be redelivered) and forgets it after four; a worker that comes
    # back then is told UNKNOWN_SESSION and must register again.
    timeout_s = 1
    server = new_server(
        own_stack, "expiry-server", session_timeout_s=timeout_s, extensions=conf.extensions
    )
    worker = conf.worker(server)
    worker.send(signal.SIGSTOP)  # a frozen process sends nothing
    try:
        wait_until(
            lambda: not worker_row(server, worker.worker_id)["online"],
            timeout_s * 10,
            f"{worker.worker_id} to go offline",
            every=0.1,
        )
        # Forgetting is not visible in the API: wait past its time.
        frozen_until = time.monotonic() + 4 * timeout_s + 1.5
        wait_until(lambda: time.monotonic() > frozen_until, 10, "the session to be forgotten")
    finally:
        worker.send(signal.SIGCONT)
    worker.wait_for_log(rf"worker {worker.worker_id} registered", timeout=30, count=2)
    execution = conf.start("ConfEcho", "after-expiry", {"text": "again"}, server=server)
    state = server.wait_for_status(execution, {"COMPLETED"}, timeout=30)
    assert state["output"] == {"text": "again"}
    assert worker_row(server, worker.worker_id)["online"] is True


def test_graceful_shutdown_finishes_running_attempts(conf: Conformance, own_stack: Stack) -> None:
    server = new_server(own_stack, "shutdown-server", extensions=conf.extensions)
    worker = conf.worker(server)
    execution = conf.start("ConfSleep", "shutdown", {"ms": 1500}, server=server)
    event_line(worker, "start", execution)
    worker.send(signal.SIGTERM)
    assert worker.proc is not None
    returncode = worker.proc.wait(60)
    assert returncode == 0, worker.log()
    state = server.wait_for_status(execution, {"COMPLETED", "FAILED"}, timeout=30)
    assert state["status"] == "COMPLETED"
    assert state["output"] == {"slept": 1500}
    events = server.events(execution)
    assert not of_type(events, "StepAttemptUncertain")
    assert len(of_type(events, "StepDispatched")) == 1
    # It unregistered: no session is left.
    assert worker_row(server, worker.worker_id)["sessions"] == 0
