"""Chapter 68's gRPC binding, as a raw gRPC client against a real `orbit server`.

The client is grpcio with the stub generated from protocol/ (no SDK): it
registers, long-polls, heartbeats, completes and fails tasks, sees
cancellations and session expiry, and sends bad input, which must get the
chapter's statuses (code in the message and in `orbit-error-code`) and
leave the history untouched. Plaintext and mutual TLS.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import server_ir
import trustme
from grpc_client import GrpcWorker, grpc_addr
from grpc_client import value as _value
from server_harness import Http, ServerProcess, run_orbit

from orbit_server.grpc_proto import worker_pb2 as pb

pytestmark = pytest.mark.timeout(120)

ADMIN, WORKER = "admin-secret-0123456789", "worker-secret-0123456789"
MAX_BODY = 16_000
MAX_PAYLOAD = 2_000


def _refusal(call: Any, *args: Any, **kw: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(*args, **kw)
    error: grpc.RpcError = caught.value
    return error


def _error_code(error: grpc.RpcError) -> str | None:
    for key, value in error.trailing_metadata() or ():
        if key == "orbit-error-code":
            return str(value)
    return None


def _start(api: Http, eid: str, name: str = "Ada", workflow: str = "Greet") -> None:
    body: dict[str, Any] = {"workflow": workflow, "execution_id": eid}
    body["input"] = {"name": name} if workflow == "Greet" else {}
    assert api.post("/v1/executions", body).status == 201


def _wait(api: Http, eid: str) -> dict[str, Any]:
    state: dict[str, Any] = api.get(f"/v1/executions/{eid}/wait?timeout_ms=10000").body
    return state


def _events(api: Http, eid: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = api.get(f"/v1/executions/{eid}/history").body["events"]
    return events


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("grpc")
    (root / "workers.toml").write_text(
        "\n".join(
            f'[[worker]]\nid = "{name}"\ntoken_sha256 = "{_sha(name)}"\ntasks = ["greeting.*"]\n'
            for name in ("ruby-a", "ruby-b")
        )
        + f'[[client]]\nid = "app"\ntoken_sha256 = "{_sha("app")}"\nworkflows = ["*"]\n'
        'actions = ["start"]\n'
    )
    args = (
        "--token", ADMIN, "--worker-token", WORKER, "--workers-file", str(root / "workers.toml"),
        "--grpc-addr", "127.0.0.1:0", "--max-body", str(MAX_BODY),
        "--max-payload-bytes", str(MAX_PAYLOAD),
    )  # fmt: skip
    with ServerProcess(root / "orbit.db", *args) as proc:
        api = proc.http(ADMIN)
        assert api.post("/v1/workflows", server_ir.greet()).status == 201
        assert api.post("/v1/workflows", server_ir.chain(steps=1)).status == 201
        yield proc


def _sha(name: str) -> str:
    return hashlib.sha256(f"{name}-token-0123456789".encode()).hexdigest()


@pytest.fixture(scope="module")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(grpc_addr(server)) as opened:
        yield opened


@pytest.fixture
def api(server: ServerProcess) -> Http:
    return server.http(ADMIN)


def _ruby(channel: grpc.Channel, worker_id: str = "ruby-1", token: str = WORKER) -> GrpcWorker:
    worker = GrpcWorker(channel, token, worker_id)
    worker.register()
    return worker


def test_the_start_up_line_comes_before_the_http_one(server: ServerProcess) -> None:
    log = server.log()
    assert re.search(r"gRPC worker protocol listening addr=127\.0\.0\.1:\d+ tls=false", log)
    assert log.index("gRPC worker protocol listening") < log.index("ORBIT runtime listening")
    # grpc core knows the transport experiments the server turns off (it
    # logs through absl, outside our log format, when it does not).
    assert "Unknown experiment" not in log and "absl" not in log


def test_a_task_runs_over_grpc(channel: grpc.Channel, api: Http) -> None:
    worker = GrpcWorker(channel, WORKER, "ruby-1")
    reply = worker.register()
    assert (reply.accepted, reply.heartbeat_interval_ms, reply.session_timeout_ms) == (
        True,
        5000,
        30000,
    )
    assert list(reply.warnings) == []
    _start(api, "g-ada")
    task = worker.task()
    assert (task.execution_id, task.workflow, task.workflow_version, task.step_id) == (
        "g-ada",
        "Greet",
        "1.0.0",
        "compose",
    )
    assert (task.task_name, task.contract_version, task.idempotency_key) == (
        "greeting.compose",
        "1.0.0",
        "g-ada/compose",
    )
    assert (task.attempt, task.redelivery, task.timeout_ms) == (1, False, 30000)
    assert task.HasField("deadline_ms") and task.deadline_ms > time.time() * 1000
    assert dict(task.input.struct_value) == {"name": "Ada"}
    assert list(worker.heartbeat().cancel) == []
    ack = worker.complete(task.token, {"message": "Hello, Ada"})
    assert (ack.accepted, ack.reason) == (True, "")
    state = _wait(api, "g-ada")
    assert (state["status"], state["output"]) == ("COMPLETED", {"message": "Hello, Ada"})
    assert worker.unregister().accepted


def test_a_long_poll_waits_for_a_task_or_answers_an_empty_token(
    channel: grpc.Channel, api: Http
) -> None:
    worker = _ruby(channel)
    began = time.monotonic()
    assert worker.poll(300).token == ""
    assert time.monotonic() - began >= 0.25
    got: list[pb.ExecuteTaskRequest] = []
    polling = threading.Thread(target=lambda: got.append(worker.poll(20_000)))
    polling.start()
    # The poll parks in the engine before the execution starts: the engine
    # lists the waiting session on the execution's document.
    _start(api, "g-long", "Lo")
    polling.join(30)
    assert got and got[0].execution_id == "g-long"
    assert worker.complete(got[0].token, {"message": "hi"}).accepted


def test_a_zero_wait_is_the_default_wait_not_an_instant_answer(
    channel: grpc.Channel, api: Http
) -> None:
    worker = _ruby(channel)
    got: list[pb.ExecuteTaskRequest] = []
    polling = threading.Thread(target=lambda: got.append(worker.poll(0)))
    polling.start()
    polling.join(1.0)
    assert polling.is_alive(), "a wait_ms of 0 answered at once"
    _start(api, "g-zero", "Ze")
    polling.join(30)
    assert got and got[0].execution_id == "g-zero"
    assert worker.complete(got[0].token, {"message": "hi"}).accepted


def test_failures_retry_and_an_unset_retryable_is_false(channel: grpc.Channel, api: Http) -> None:
    worker = _ruby(channel)
    _start(api, "g-fail", "Fa")
    first = worker.task()
    ack = worker.fail(first.token, "GREETER_BUSY", retryable=True, details={"queue_depth": 42})
    assert (ack.accepted, ack.reason) == (True, "")
    second = worker.task()
    assert (second.attempt, second.idempotency_key) == (2, "g-fail/compose")
    stale = worker.fail(first.token, "X", retryable=True)
    assert (stale.accepted, stale.reason) == (False, "stale attempt")
    # Attempts remain, but a failure without `retryable` is not retried.
    assert worker.fail(second.token, "GREETER_BUSY", error_message="still busy").accepted
    state = _wait(api, "g-fail")
    assert state["status"] == "FAILED"
    failed = [e for e in _events(api, "g-fail") if e["type"] == "StepAttemptFailed"]
    assert failed[0]["error"]["details"] == {"queue_depth": 42}
    assert isinstance(failed[0]["error"]["details"]["queue_depth"], int)
    assert [e["error"]["retryable"] for e in failed] == [True, False]


def test_whole_numbers_come_back_as_integers(channel: grpc.Channel, api: Http) -> None:
    worker = GrpcWorker(channel, WORKER, "bench-1", [("bench.step", "1.0.0")], "python")
    worker.register()
    _start(api, "c-int", workflow="Chain")
    task = worker.task()
    assert task.input.struct_value.fields["i"].number_value == 0
    assert worker.complete(task.token, {"i": 2**53}).accepted
    assert _wait(api, "c-int")["status"] == "COMPLETED"
    done = [e for e in _events(api, "c-int") if e["type"] == "StepSucceeded"]
    assert done[0]["output"] == {"i": 2**53}
    assert isinstance(done[0]["output"]["i"], int)


def test_cancellation_reaches_the_heartbeat(channel: grpc.Channel, api: Http) -> None:
    worker = _ruby(channel)
    _start(api, "g-cancel", "Cy")
    task = worker.task()
    assert api.post("/v1/executions/g-cancel/cancel", {"reason": "withdrawn"}).status == 200
    assert list(worker.heartbeat().cancel) == [task.token]
    assert list(worker.heartbeat().cancel) == []
    worker.fail(task.token, "CANCELLED", retryable=False)
    assert _wait(api, "g-cancel")["status"] == "CANCELLED"


def test_errors_are_statuses_with_the_orbit_code(channel: grpc.Channel) -> None:
    worker = GrpcWorker(channel, WORKER)
    worker.session = "no-such-session"
    for call in (worker.heartbeat, worker.poll, worker.unregister):
        error = _refusal(call)
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert (
            error.details() == "UNKNOWN_SESSION: unknown or expired worker session; register again"
            or (error.details().startswith("UNKNOWN_SESSION: "))
        )
        assert _error_code(error) == "UNKNOWN_SESSION"
    blank = _refusal(GrpcWorker(channel, WORKER, "  ").register)
    assert blank.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert blank.details().startswith("INVALID_REQUEST: ")
    assert _error_code(blank) == "INVALID_REQUEST"
    reserved = _refusal(GrpcWorker(channel, WORKER, "r", [("orbit.sleep", "1.0.0")]).register)
    assert reserved.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _error_code(reserved) == "RESERVED_TASK"


def test_an_empty_token_or_code_has_the_code_in_the_message_only(channel: grpc.Channel) -> None:
    worker = _ruby(channel)
    for call, args in (
        (worker.complete, ("",)),
        (worker.fail, ("", "X")),
        (worker.fail, ("t", "")),
    ):
        error = _refusal(call, *args)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert error.details().startswith("INVALID_REQUEST: ")
        assert _error_code(error) is None


def test_credentials_go_in_the_metadata(channel: grpc.Channel) -> None:
    missing = _refusal(GrpcWorker(channel, None).register)
    assert missing.code() is grpc.StatusCode.UNAUTHENTICATED
    assert missing.details() == "UNAUTHENTICATED: missing or invalid credentials"
    assert _error_code(missing) is None
    wrong = _refusal(GrpcWorker(channel, "not-a-token").register)
    assert wrong.code() is grpc.StatusCode.UNAUTHENTICATED
    client = _refusal(GrpcWorker(channel, "app-token-0123456789").register)
    assert client.code() is grpc.StatusCode.PERMISSION_DENIED
    assert client.details() == "FORBIDDEN: client `app` may not use the worker protocol"
    assert _error_code(client) == "FORBIDDEN"
    # The admin token may call the worker protocol, as over HTTP.
    assert GrpcWorker(channel, ADMIN).register().accepted


def test_credentials_are_checked_before_the_message_is_read(channel: grpc.Channel) -> None:
    """A caller without a credential gets UNAUTHENTICATED whatever it sends
    (an oversized or garbage body got a size or parse error: the server read
    it, up to twice --max-body, before looking at the credentials)."""
    raw = channel.unary_unary("/orbit.worker.v1.WorkerService/CompleteTask")
    for body in (b"\x0a\xff\xff", b"x" * (MAX_BODY + 1), b"x" * (4 * MAX_BODY)):
        for metadata in ((), (("authorization", "Bearer not-a-token"),)):
            error = _refusal(raw, body, metadata=metadata, timeout=30)
            assert error.code() is grpc.StatusCode.UNAUTHENTICATED
            assert error.details() == "UNAUTHENTICATED: missing or invalid credentials"
            assert _error_code(error) is None
    client = (("authorization", "Bearer app-token-0123456789"),)
    refused = _refusal(raw, b"x" * (4 * MAX_BODY), metadata=client, timeout=30)
    assert refused.code() is grpc.StatusCode.PERMISSION_DENIED


def test_a_unary_call_with_two_messages_is_refused(channel: grpc.Channel, api: Http) -> None:
    worker = _ruby(channel)
    _start(api, "g-two", "Tw")
    task = worker.task()
    before = _events(api, "g-two")
    request = pb.CompleteTaskRequest(token=task.token)
    request.output.CopyFrom(_value({"message": "twice"}))
    body = request.SerializeToString()
    raw = channel.stream_unary("/orbit.worker.v1.WorkerService/CompleteTask")
    error = _refusal(raw, iter([body, body]), metadata=worker.metadata, timeout=30)
    assert error.code() is grpc.StatusCode.UNIMPLEMENTED
    assert _events(api, "g-two") == before
    assert worker.complete(task.token, {"message": "once"}).accepted
    assert _wait(api, "g-two")["output"] == {"message": "once"}


def test_a_worker_identity_keeps_its_rules(channel: grpc.Channel, api: Http) -> None:
    other = _refusal(GrpcWorker(channel, "ruby-a-token-0123456789", "ruby-b").register)
    assert other.code() is grpc.StatusCode.PERMISSION_DENIED
    assert other.details() == "FORBIDDEN: this credential belongs to worker `ruby-a`, not `ruby-b`"
    a = _ruby(channel, "ruby-a", "ruby-a-token-0123456789")
    b = _ruby(channel, "ruby-b", "ruby-b-token-0123456789")
    _start(api, "g-owned", "Ow")
    task = a.task()
    before = _events(api, "g-owned")
    for call, args in ((b.complete, (task.token, {"message": "x"})), (b.fail, (task.token, "X"))):
        error = _refusal(call, *args)
        assert error.code() is grpc.StatusCode.PERMISSION_DENIED
        assert error.details() == (
            "FORBIDDEN: task token was issued to worker `ruby-a`, not `ruby-b`"
        )
        assert _error_code(error) == "FORBIDDEN"
    stolen = GrpcWorker(channel, "ruby-b-token-0123456789", "ruby-b")
    stolen.session = a.session
    assert _refusal(stolen.heartbeat).code() is grpc.StatusCode.PERMISSION_DENIED
    assert _events(api, "g-owned") == before
    assert a.complete(task.token, {"message": "mine"}).accepted


def test_bad_input_is_refused_and_records_nothing(channel: grpc.Channel, api: Http) -> None:
    worker = _ruby(channel)
    _start(api, "g-bad", "Ba")
    task = worker.task()
    before = _events(api, "g-bad")

    raw = channel.unary_unary("/orbit.worker.v1.WorkerService/CompleteTask")
    malformed = _refusal(raw, b"\x0a\xff\xff", metadata=worker.metadata, timeout=30)
    assert malformed.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert malformed.details().startswith("INVALID_REQUEST: malformed CompleteTaskRequest")
    assert _error_code(malformed) == "INVALID_REQUEST"

    big = _refusal(worker.complete, task.token, {"message": "x" * MAX_PAYLOAD})
    assert big.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert big.details().startswith("PAYLOAD_TOO_LARGE: task result is ")
    assert _error_code(big) == "PAYLOAD_TOO_LARGE"

    huge = _refusal(worker.complete, task.token, {"message": "x" * MAX_BODY})
    assert huge.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert huge.details().startswith("PAYLOAD_TOO_LARGE: CompleteTaskRequest is ")
    assert _error_code(huge) == "PAYLOAD_TOO_LARGE"

    nan = _refusal(worker.complete, task.token, {"message": float("nan")})
    assert nan.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _error_code(nan) == "INVALID_REQUEST"

    assert _events(api, "g-bad") == before
    assert worker.complete(task.token, {"message": "fits"}).accepted
    assert _wait(api, "g-bad")["output"] == {"message": "fits"}


def test_an_expired_session_is_not_found_until_the_worker_registers(tmp_path: Path) -> None:
    with ServerProcess(
        tmp_path / "orbit.db", "--session-timeout", "1", "--grpc-addr", "127.0.0.1:0"
    ) as proc:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.greet()).status == 201
        with grpc.insecure_channel(grpc_addr(proc)) as opened:
            worker = _ruby(opened, token="")
            _start(api, "g-lost", "Lo")
            task = worker.task()
            contact = time.monotonic()
            # Silent past the session timeout: the runtime gives the attempt up.
            deadline = contact + 20
            while "StepAttemptUncertain" not in [e["type"] for e in _events(api, "g-lost")]:
                assert time.monotonic() < deadline, "the session was never lost"
                threading.Event().wait(0.1)
            # An expired session stays unknown (it is forgotten for good
            # after four session timeouts); the worker registers again.
            threading.Event().wait(max(0.0, contact + 4.5 - time.monotonic()))
            error = _refusal(worker.heartbeat)
            assert error.code() is grpc.StatusCode.NOT_FOUND
            assert _error_code(error) == "UNKNOWN_SESSION"
            worker.register()
            again = worker.task()
            assert (again.redelivery, again.attempt) == (True, 1)
            # The first token still counts: the step is not resolved.
            assert worker.complete(task.token, {"message": "late"}).accepted
            assert _wait(api, "g-lost")["output"] == {"message": "late"}


def test_a_busy_grpc_port_stops_the_start(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "a.db", "--grpc-addr", "127.0.0.1:0") as proc:
        taken = grpc_addr(proc)
        result = run_orbit(
            "server", "--db", str(tmp_path / "b.db"), "--addr", "127.0.0.1:0",
            "--grpc-addr", taken,
        )  # fmt: skip
    assert result.returncode == 1
    assert f"cannot listen on {taken}" in result.stderr


# ---- mutual TLS

WORKERS_TLS = """
[[worker]]
id = "ruby-tls"
client_cert = "ruby-tls.workers.internal"
tasks = ["greeting.*"]
runtime = "ruby"
"""


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("grpc-tls")
    ca, workers_ca = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    workers_ca.cert_pem.write_to_path(str(root / "workers-ca.pem"))
    for name, leaf in {
        "server": ca.issue_cert("127.0.0.1", "localhost"),
        "ruby-tls": workers_ca.issue_cert("ruby-tls.workers.internal"),
        "stranger": workers_ca.issue_cert("stranger.workers.internal"),
        "untrusted": trustme.CA().issue_cert("ruby-tls.workers.internal"),
    }.items():
        (root / f"{name}.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(root / f"{name}.key"))
    (root / "workers.toml").write_text(WORKERS_TLS)
    args = (
        "--token", ADMIN, "--worker-token", WORKER, "--workers-file", str(root / "workers.toml"),
        "--tls-cert", str(root / "server.pem"), "--tls-key", str(root / "server.key"),
        "--tls-client-ca", str(root / "workers-ca.pem"), "--grpc-addr", "127.0.0.1:0",
    )  # fmt: skip
    with ServerProcess(root / "orbit.db", *args) as proc:
        _https(proc, root, "POST", "/v1/workflows", server_ir.greet())
        yield proc, root


def _https(proc: ServerProcess, root: Path, method: str, path: str, body: Any = None) -> Any:
    host, port = proc.addr.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(root / "ca.pem"))
    conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
    headers = {"authorization": f"Bearer {ADMIN}", "content-type": "application/json"}
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    assert answer.status < 300, data
    return json.loads(data) if data else None


def _tls_channel(proc: ServerProcess, root: Path, leaf: str | None) -> grpc.Channel:
    keys: dict[str, bytes] = {}
    if leaf is not None:
        keys["private_key"] = (root / f"{leaf}.key").read_bytes()
        keys["certificate_chain"] = (root / f"{leaf}.pem").read_bytes()
    credentials = grpc.ssl_channel_credentials((root / "ca.pem").read_bytes(), **keys)
    return grpc.secure_channel(grpc_addr(proc), credentials)


def test_a_certificate_identifies_its_worker_over_grpc(
    tls_server: tuple[ServerProcess, Path],
) -> None:
    proc, root = tls_server
    assert re.search(r"gRPC worker protocol listening addr=\S+ tls=true", proc.log())
    with _tls_channel(proc, root, "ruby-tls") as channel:
        other = _refusal(GrpcWorker(channel, None, "ruby-other").register)
        assert other.code() is grpc.StatusCode.PERMISSION_DENIED
        assert _error_code(other) == "FORBIDDEN"
        worker = GrpcWorker(channel, None, "ruby-tls")
        assert worker.register().accepted
        _https(proc, root, "POST", "/v1/executions", {
            "workflow": "Greet", "execution_id": "tls-1", "input": {"name": "Tee"},
        })  # fmt: skip
        task = worker.task()
        assert worker.complete(task.token, {"message": "over mTLS"}).accepted
        state = _https(proc, root, "GET", "/v1/executions/tls-1/wait?timeout_ms=10000")
        assert state["output"] == {"message": "over mTLS"}
    with _tls_channel(proc, root, "stranger") as channel:
        stranger = _refusal(GrpcWorker(channel, None, "stranger").register)
        assert stranger.code() is grpc.StatusCode.PERMISSION_DENIED
        assert stranger.details().startswith("FORBIDDEN: the client certificate is valid but")
    with _tls_channel(proc, root, "untrusted") as channel:
        assert _refusal(GrpcWorker(channel, None).register).code() is grpc.StatusCode.UNAVAILABLE
    with grpc.insecure_channel(grpc_addr(proc)) as channel:
        assert _refusal(GrpcWorker(channel, ADMIN).register).code() is grpc.StatusCode.UNAVAILABLE


def test_without_a_certificate_a_worker_authenticates_with_its_token(
    tls_server: tuple[ServerProcess, Path],
) -> None:
    """Chapter 45: client certificates are optional at the TLS layer on
    both ports (the gRPC one refused every handshake without one)."""
    proc, root = tls_server
    with _tls_channel(proc, root, None) as channel:
        missing = _refusal(GrpcWorker(channel, None).register)
        assert missing.code() is grpc.StatusCode.UNAUTHENTICATED
        assert _error_code(missing) is None
        assert GrpcWorker(channel, ADMIN, "ruby-admin").register().accepted
        worker = GrpcWorker(channel, WORKER, "ruby-token")
        assert worker.register().accepted
        _https(proc, root, "POST", "/v1/executions", {
            "workflow": "Greet", "execution_id": "tls-token", "input": {"name": "Tok"},
        })  # fmt: skip
        task = worker.task()
        assert worker.complete(task.token, {"message": "by token"}).accepted
        state = _https(proc, root, "GET", "/v1/executions/tls-token/wait?timeout_ms=10000")
        assert state["output"] == {"message": "by token"}
    # A certificate still names its worker when a token comes with none.
    with _tls_channel(proc, root, "ruby-tls") as channel:
        assert GrpcWorker(channel, None, "ruby-tls").register().accepted
