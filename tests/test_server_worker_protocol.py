"""Chapter 68 end to end, as a raw HTTP client: no SDK, only the wire."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import server_ir
from server_harness import Http, RawWorker, ServerProcess, wait_until

ADMIN, WORKER = "admin-secret", "worker-secret"
GREETING = [("greeting.compose", "1.0.0")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("protocol") / "orbit.db"
    with ServerProcess(db, "--token", ADMIN, "--worker-token", WORKER) as proc:
        api = proc.http(ADMIN)
        assert api.post("/v1/workflows", server_ir.greet()).status == 201
        assert api.post("/v1/workflows", server_ir.greet(timeout_ms=300, version="2.0.0")).status
        assert api.post("/v1/workflows", server_ir.chain()).status == 201
        yield proc


@pytest.fixture
def api(server: ServerProcess) -> Http:
    return server.http(ADMIN)


def _ruby(server: ServerProcess, worker_id: str = "ruby-1") -> RawWorker:
    worker = RawWorker(server.http(WORKER), worker_id, GREETING, runtime="ruby")
    assert worker.register().status == 200
    return worker


def _start(api: Http, eid: str, name: str, version: str = "1.0.0") -> None:
    body = {"workflow": "Greet", "version": version, "input": {"name": name}, "execution_id": eid}
    assert api.post("/v1/executions", body).status == 201


def _greeting_taken(
    proc: ServerProcess, worker_id: str, eid: str
) -> tuple[Http, RawWorker, dict[str, Any]]:
    """On a fresh server: Greet deployed and started, its task taken by a
    ruby worker."""
    api = proc.http()
    assert api.post("/v1/workflows", server_ir.greet()).status == 201
    worker = RawWorker(proc.http(), worker_id, GREETING, runtime="ruby")
    worker.register()
    _start(api, eid, "Ri")
    return api, worker, worker.task()


def _wait(api: Http, eid: str) -> dict[str, Any]:
    state: dict[str, Any] = api.get(f"/v1/executions/{eid}/wait?timeout_ms=10000").body
    return state


def _types(api: Http, eid: str) -> list[str]:
    return [e["type"] for e in api.get(f"/v1/executions/{eid}/history").body["events"]]


def test_register_answers_the_session_and_its_timing(server: ServerProcess) -> None:
    worker = RawWorker(server.http(WORKER), "ruby-1", GREETING, runtime="ruby")
    reply = worker.register()
    assert reply.status == 200
    assert reply.body == {
        "accepted": True,
        "worker_session_id": worker.session,
        "heartbeat_interval_ms": 5000,
        "session_timeout_ms": 30000,
        "warnings": [],
    }
    unused = RawWorker(server.http(WORKER), "old-1", [("greeting.compose", "0.9.0")]).register()
    assert unused.body["warnings"] == [
        "`greeting.compose` is announced at version 0.9.0 but registered workflows use 1.0.0; "
        "this worker will not receive those tasks"
    ]


def test_register_refusals(server: ServerProcess) -> None:
    http = server.http(WORKER)
    good = {
        "worker_id": "w",
        "runtime": "ruby",
        "contracts": [{"task_name": "a.b", "contract_version": "1"}],
    }
    cases = [
        ({**good, "worker_id": " "}, 400, "INVALID_REQUEST"),
        ({**good, "contracts": []}, 400, "INVALID_REQUEST"),
        (
            {**good, "contracts": [{"task_name": "orbit.http.request", "contract_version": "1"}]},
            400,
            "RESERVED_TASK",
        ),
        (
            {**good, "contracts": [{"task_name": "workflow:Greet", "contract_version": "1"}]},
            400,
            "RESERVED_TASK",
        ),
    ]
    for body, status, code in cases:
        reply = http.post("/v1/workers/register", body)
        assert (reply.status, reply.body["error"]["code"]) == (status, code), body
    reserved = http.post(
        "/v1/workers/register",
        {**good, "contracts": [{"task_name": "orbit.http.request", "contract_version": "1"}]},
    )
    assert reserved.raw == (
        b'{"error":{"code":"RESERVED_TASK","message":"`orbit.http.request` is a built-in task"}}'
    )
    for missing in ("worker_id", "runtime", "contracts"):
        body = {k: v for k, v in good.items() if k != missing}
        reply = http.post("/v1/workers/register", body)
        assert (reply.status, reply.text) == (
            422,
            f"Failed to deserialize the JSON body into the target type: missing field `{missing}`",
        )
    no_type = http.post("/v1/workers/register", raw=b"{}")
    assert no_type.status == 415
    assert no_type.headers["x-orbit-api-version"] == "orbit-api/1"
    assert http.post("/v1/workers/heartbeat", raw=b"", headers=_JSON).status == 400


_JSON = {"content-type": "application/json"}


def test_the_curl_transcript(server: ServerProcess, api: Http) -> None:
    """Chapter 68's transcript: poll, heartbeat, retryable failure, stale
    failure, completion, an idle poll."""
    worker = _ruby(server)
    forbidden = worker.http.get("/v1/executions")
    assert forbidden.status == 403
    assert forbidden.headers["content-type"] == "application/json"

    _start(api, "greet-ada", "Ada")
    first = worker.task()
    assert first["deadline_ms"] - first["timeout_ms"] > 1_700_000_000_000
    assert {k: v for k, v in first.items() if k not in ("token", "deadline_ms")} == {
        "execution_id": "greet-ada",
        "workflow": "Greet",
        "workflow_version": "1.0.0",
        "step_id": "compose",
        "task_name": "greeting.compose",
        "contract_version": "1.0.0",
        "input": {"name": "Ada"},
        "idempotency_key": "greet-ada/compose",
        "attempt": 1,
        "redelivery": False,
        "timeout_ms": 30000,
    }
    assert worker.heartbeat().raw == b'{"accepted":true,"cancel":[]}'
    failed = worker.fail(
        first["token"],
        "GREETER_BUSY",
        error_message="try again later",
        retryable=True,
        details={"queue_depth": 42},
    )
    assert failed.raw == b'{"accepted":true}'
    second = worker.task()
    assert (second["attempt"], second["idempotency_key"]) == (2, "greet-ada/compose")
    assert second["token"] != first["token"]
    stale = worker.fail(first["token"], "X")
    assert stale.raw == b'{"accepted":false,"reason":"stale attempt"}'
    done = worker.complete(second["token"], {"message": "Hello, Ada"})
    assert done.raw == b'{"accepted":true}'
    state = _wait(api, "greet-ada")
    assert (state["status"], state["output"]) == ("COMPLETED", {"message": "Hello, Ada"})

    began = time.monotonic()
    idle = worker.poll(wait_ms=1000)
    assert 0.9 <= time.monotonic() - began < 5
    assert (idle.status, idle.raw) == (204, b"")
    assert idle.headers["x-orbit-api-version"] == "orbit-api/1"

    finished = worker.complete(first["token"], {"message": "late"})
    assert finished.body == {
        "accepted": False,
        "reason": "unknown token (execution finished or token invalid)",
    }


def test_non_retryable_codes_and_contract_violations(server: ServerProcess, api: Http) -> None:
    worker = _ruby(server)
    _start(api, "greet-blank", "")
    task = worker.task()
    assert worker.fail(task["token"], "INVALID_NAME", error_message="name is blank").body == {
        "accepted": True
    }
    state = _wait(api, "greet-blank")
    assert state["status"] == "FAILED"
    assert state["error"]["code"] == "INVALID_NAME"
    assert state["error"]["message"] == "step `compose` failed: name is blank"
    assert state["units"]["compose"]["attempt"] == 1

    _start(api, "greet-bad", "Bo")
    task = worker.task()
    violation = worker.complete(task["token"], {"msg": 1})
    assert violation.raw == b'{"accepted":false,"reason":"output violates the task contract"}'
    state = _wait(api, "greet-bad")
    assert state["error"]["code"] == "OUTPUT_CONTRACT_VIOLATION"
    assert state["error"]["message"].endswith(
        "worker output for `greeting.compose` does not match its contract at $.message: "
        "missing required field `message` of type String"
    )


def test_duplicate_results_are_recorded_and_refused(server: ServerProcess, api: Http) -> None:
    worker = RawWorker(server.http(WORKER), "chain-1", [("bench.step", "1.0.0")])
    worker.register()
    assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "dup-1"}).status == 201
    task = worker.task()
    assert worker.complete(task["token"], {"i": 1}).body == {"accepted": True}
    duplicate = worker.complete(task["token"], {"i": 2})
    assert duplicate.body == {
        "accepted": False,
        "reason": "duplicate result; step already resolved",
    }
    events = api.get("/v1/executions/dup-1/history").body["events"]
    stale = [e for e in events if e["type"] == "StaleResultIgnored"]
    assert [(e["step"], e["outcome"]) for e in stale] == [("s0", "duplicate")]
    api.post("/v1/executions/dup-1/cancel")


def test_a_token_that_reported_a_failure_cannot_report_a_success(
    server: ServerProcess, api: Http
) -> None:
    """Issue 36: a token reports once; a success after its accepted
    failure is a stale attempt's, and the retry goes on."""
    worker = _ruby(server)
    _start(api, "greet-twice", "Tw")
    task = worker.task()
    assert worker.fail(task["token"], "GREETER_BUSY").body == {"accepted": True}
    late = worker.complete(task["token"], {"message": "too late"})
    assert late.raw == b'{"accepted":false,"reason":"stale attempt"}'
    second = worker.task()
    assert second["attempt"] == 2
    assert worker.complete(second["token"], {"message": "Hello, Tw"}).body == {"accepted": True}
    state = _wait(api, "greet-twice")
    assert (state["status"], state["output"]) == ("COMPLETED", {"message": "Hello, Tw"})
    events = api.get("/v1/executions/greet-twice/history").body["events"]
    stale = [e for e in events if e["type"] == "StaleResultIgnored"]
    assert [(e["token"], e["outcome"]) for e in stale] == [(task["token"], "failure")]


def test_result_refusals(server: ServerProcess) -> None:
    http = server.http(WORKER)
    assert http.post("/v1/tasks/complete", {"output": {}}).status == 422
    empty = http.post("/v1/tasks/complete", {"token": ""})
    assert (empty.status, empty.body["error"]["code"]) == (400, "INVALID_REQUEST")
    assert http.post("/v1/tasks/fail", {"token": "t"}).status == 422
    no_code = http.post("/v1/tasks/fail", {"token": "t", "error_code": ""})
    assert (no_code.status, no_code.body["error"]["code"]) == (400, "INVALID_REQUEST")
    assert (
        http.post("/v1/tasks/fail", {"token": "t", "error_code": "X", "retryable": "no"}).status
        == 422
    )


def test_cancellation_reaches_the_heartbeat(server: ServerProcess, api: Http) -> None:
    worker = _ruby(server)
    _start(api, "greet-cancel", "Cy")
    task = worker.task()
    cancelled = api.post("/v1/executions/greet-cancel/cancel", {"reason": "customer withdrew"})
    assert cancelled.body["status"] == "RUNNING"
    assert worker.heartbeat().body == {"accepted": True, "cancel": [task["token"]]}
    assert worker.heartbeat().body == {"accepted": True, "cancel": []}
    assert worker.complete(task["token"], {"message": "late"}).body == {"accepted": True}
    assert _wait(api, "greet-cancel")["status"] == "CANCELLED"


def test_unregister_redelivers_at_once(server: ServerProcess, api: Http) -> None:
    first = _ruby(server, "ruby-a")
    _start(api, "greet-redeliver", "Di")
    original = first.task()
    assert first.unregister().raw == b'{"accepted":true}'
    second = _ruby(server, "ruby-b")
    again = second.task()
    assert (again["attempt"], again["redelivery"], again["idempotency_key"]) == (
        1,
        True,
        "greet-redeliver/compose",
    )
    assert first.complete(original["token"], {"message": "Hello, Di"}).body == {"accepted": True}
    assert second.heartbeat().body["cancel"] == [again["token"]]
    assert _wait(api, "greet-redeliver")["status"] == "COMPLETED"
    assert _types(api, "greet-redeliver").count("StepSucceeded") == 1

    gone = first.heartbeat()
    assert gone.status == 404
    assert gone.headers["content-type"] == "application/json"
    assert gone.headers["x-orbit-api-version"] == "orbit-api/1"
    assert gone.raw == (
        b'{"error":{"code":"UNKNOWN_SESSION","message":'
        b'"unknown or expired worker session; register again"}}'
    )
    assert first.poll(100).status == 404
    assert first.unregister().body["error"] == {
        "code": "UNKNOWN_SESSION",
        "message": "unknown worker session",
    }


def test_routing_by_runtime_and_age(server: ServerProcess, api: Http) -> None:
    python = RawWorker(server.http(WORKER), "py-1", GREETING, runtime="python")
    python.register()
    _start(api, "greet-old", "Old")
    _start(api, "greet-new", "New")
    assert python.poll(wait_ms=300).status == 204
    shouting = RawWorker(server.http(WORKER), "ruby-up", GREETING, runtime="RUBY")
    shouting.register()
    oldest = shouting.task()
    assert oldest["execution_id"] == "greet-old"
    newer = shouting.task()
    for task in (oldest, newer):
        shouting.complete(task["token"], {"message": "hi"})


def test_a_timed_out_attempt_is_cancelled_and_its_late_success_counts(
    server: ServerProcess, api: Http
) -> None:
    worker = _ruby(server)
    _start(api, "greet-slow", "Ed", version="2.0.0")
    task = worker.task()
    assert task["timeout_ms"] == 300
    deadline = time.monotonic() + 10
    cancel: list[str] = []
    while not cancel and time.monotonic() < deadline:
        time.sleep(0.1)
        cancel = worker.heartbeat().body["cancel"]
    assert cancel == [task["token"]]
    assert worker.complete(task["token"], {"message": "late but real"}).body == {"accepted": True}
    state = _wait(api, "greet-slow")
    assert (state["status"], state["output"]) == ("COMPLETED", {"message": "late but real"})
    events = api.get("/v1/executions/greet-slow/history").body["events"]
    timeout = next(e for e in events if e["type"] == "StepAttemptFailed")
    assert timeout["error"]["code"] == "TIMEOUT"


def test_silent_sessions_are_lost_then_forgotten(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db", "--session-timeout", "1") as proc:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.greet()).status == 201
        flaky = RawWorker(proc.http(), "flaky-1", GREETING, runtime="ruby")
        assert flaky.register().body["heartbeat_interval_ms"] == 500
        _start(api, "u-1", "Flo")
        original = flaky.task()
        backup = RawWorker(proc.http(), "flaky-2", GREETING, runtime="ruby")
        backup.register()
        # Short polls keep the backup in contact (a poll is contact only when
        # it starts) while flaky-1 stays silent past the session timeout.
        reply = backup.poll(wait_ms=400)
        deadline = time.monotonic() + 10
        while reply.status == 204 and time.monotonic() < deadline:
            reply = backup.poll(wait_ms=400)
        redelivered = reply.body
        assert (redelivered["attempt"], redelivered["redelivery"]) == (1, True)
        events = api.get("/v1/executions/u-1/history").body["events"]
        uncertain = next(e for e in events if e["type"] == "StepAttemptUncertain")
        assert uncertain["reason"] == "worker `flaky-1` stopped responding"
        # The lost worker comes back: its success still counts.
        assert flaky.complete(original["token"], {"message": "hi"}).body == {"accepted": True}
        assert backup.heartbeat().body["cancel"] == [redelivered["token"]]
        assert _wait(api, "u-1")["status"] == "COMPLETED"
        # Silent for four session timeouts: forgotten; a live session is kept.
        until = time.monotonic() + 4.5
        while time.monotonic() < until:
            assert backup.heartbeat().status == 200
            time.sleep(0.25)
        assert flaky.heartbeat().body["error"]["code"] == "UNKNOWN_SESSION"


def test_an_expired_session_is_handed_no_task(tmp_path: Path) -> None:
    """Issue 36: once its session expired, a worker's poll is answered
    UNKNOWN_SESSION, not with a task."""
    with ServerProcess(tmp_path / "orbit.db", "--session-timeout", "1") as proc:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.greet()).status == 201
        gone = RawWorker(proc.http(), "gone-1", GREETING, runtime="ruby")
        gone.register()

        def expired() -> bool:
            workers = api.get("/v1/workers").body["workers"]
            return any(w["worker_id"] == "gone-1" and w["sessions"] == 0 for w in workers)

        wait_until(expired, 10, "the silent session to expire", proc)
        _start(api, "greet-expired", "Ex")
        reply = gone.poll(wait_ms=100)
        assert reply.status == 404
        assert reply.body["error"]["code"] == "UNKNOWN_SESSION"
        assert gone.register().status == 200
        assert gone.task()["execution_id"] == "greet-expired"


def test_a_worker_waiting_in_a_long_poll_is_not_silent(tmp_path: Path) -> None:
    """A poll parked for longer than four session timeouts, with no
    heartbeat meanwhile: the session and the attempt it holds live on."""
    with ServerProcess(tmp_path / "orbit.db", "--session-timeout", "1") as proc:
        api, worker, held = _greeting_taken(proc, "patient-1", "p-1")
        started = time.monotonic()
        assert worker.poll(wait_ms=4500).status == 204
        assert time.monotonic() - started >= 4.4
        assert worker.complete(held["token"], {"message": "hi"}).body == {"accepted": True}
        assert worker.heartbeat().status == 200
        assert _wait(api, "p-1")["status"] == "COMPLETED"
        assert "StepAttemptUncertain" not in _types(api, "p-1")
        (row,) = api.get("/v1/workers").body["workers"]
        assert (row["online"], row["sessions"], row["inflight"]) == (True, 1, 0)


def test_a_task_whose_poller_hung_up_is_redelivered_at_once(tmp_path: Path) -> None:
    """The worker closes its connection right after sending the poll: the
    task it was handed cannot reach it, and is redelivered without waiting
    for the (default, 30 s) session timeout."""
    with ServerProcess(tmp_path / "orbit.db") as proc:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.greet()).status == 201
        dropper = RawWorker(proc.http(), "dropper-1", GREETING, runtime="ruby")
        dropper.register()
        _start(api, "drop-1", "Dee")
        body = json.dumps({"worker_session_id": dropper.session, "wait_ms": 1000}).encode()
        host, port = proc.addr.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as poll:
            poll.sendall(
                b"POST /v1/workers/poll HTTP/1.1\r\nHost: orbit\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        started = time.monotonic()
        backup = RawWorker(proc.http(), "backup-1", GREETING, runtime="ruby")
        backup.register()
        again = backup.task(wait_ms=5000)
        assert time.monotonic() - started < 5
        assert (again["execution_id"], again["attempt"], again["redelivery"]) == ("drop-1", 1, True)
        events = api.get("/v1/executions/drop-1/history").body["events"]
        uncertain = next(e for e in events if e["type"] == "StepAttemptUncertain")
        assert uncertain["reason"] == "worker `dropper-1` never received the task"
        assert backup.complete(again["token"], {"message": "Hello, Dee"}).body == {"accepted": True}
        assert _wait(api, "drop-1")["status"] == "COMPLETED"
        assert "task not delivered: the worker hung up" in proc.wait_for_log("task not delivered")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_result_survives_a_restart(tmp_path: Path, stop: int) -> None:
    proc = ServerProcess(tmp_path / "orbit.db").start()
    api, worker, task = _greeting_taken(proc, "ruby-1", "greet-restart")
    assert proc.stop(stop) == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
    proc.start()
    try:
        assert "recovered active executions from history executions=1 in_flight=1" in proc.log()
        worker.http = proc.http()
        api = proc.http()
        gone = worker.heartbeat()
        assert (gone.status, gone.body["error"]["code"]) == (404, "UNKNOWN_SESSION")
        assert worker.complete(task["token"], {"message": "Hello, Ri"}).body == {"accepted": True}
        assert worker.register().status == 200
        assert worker.heartbeat().status == 200
        state = _wait(api, "greet-restart")
        assert (state["status"], state["output"]) == ("COMPLETED", {"message": "Hello, Ri"})
    finally:
        proc.stop()
