"""Hostile payloads against a real `orbit server` (issue 11, items 2 and 3):
values nested too deeply or holding integers outside the 64-bit range are
refused with the route's error in the JSON envelope when they arrive, nothing
is recorded, and other clients' requests in the same commit groups succeed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import server_ir
from payload_ir import nested, sink
from server_harness import Http, RawWorker, Response, ServerProcess

ADMIN, WORKER = "admin-secret", "worker-secret"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("payloads") / "orbit.db"
    with ServerProcess(db, "--token", ADMIN, "--worker-token", WORKER) as proc:
        for document in (sink(), sink("Out", "out.keep")):
            assert proc.http(ADMIN).post("/v1/workflows", document).status == 201
        yield proc


@pytest.fixture
def api(server: ServerProcess) -> Http:
    return server.http(ADMIN)


def _raw(api: Http, path: str, data: bytes, token: str | None = None) -> Response:
    return api.post(path, raw=data, headers={"content-type": "application/json"}, token=token)


def _deep(depth: int) -> bytes:
    """A JSON text nested `depth` levels deep, without a recursive encoder."""
    return b'{"a":' * depth + b"0" + b"}" * depth


def _error(reply: Response) -> tuple[int, str, str]:
    assert reply.headers["content-type"] == "application/json", reply
    error = reply.body["error"]
    assert set(error) == {"code", "message"}
    return reply.status, error["code"], error["message"]


def _start(api: Http, execution_id: str, data: Any = 1) -> None:
    reply = api.post(
        "/v1/executions",
        {"workflow": "Sink", "execution_id": execution_id, "input": {"data": data}},
    )
    assert reply.status == 201, reply


def test_an_input_nested_too_deeply_is_invalid_input(api: Http) -> None:
    body = b'{"workflow":"Sink","execution_id":"deep-1","input":{"data":' + _deep(300) + b"}}"
    status, code, message = _error(_raw(api, "/v1/executions", body))
    assert (status, code) == (400, "INVALID_INPUT")
    assert message == (
        "workflow input is invalid at $.data" + ".a" * 127 + ": nested deeper than 128 levels"
    )
    assert api.get("/v1/executions/deep-1").status == 404
    ok = b'{"workflow":"Sink","execution_id":"deep-2","input":{"data":' + _deep(127) + b"}}"
    assert _raw(api, "/v1/executions", ok).status == 201


# Beyond these, a JSON parser reads an integer as a float (as serde_json and
# orjson do), which the Int field refuses and a JSON field keeps as a number.
@pytest.mark.parametrize("number", [2**63, 2**64 - 1])
@pytest.mark.parametrize("field", ["data", "n"])
def test_an_input_integer_outside_64_bits_is_invalid_input(
    api: Http, field: str, number: int
) -> None:
    body = {"workflow": "Sink", "execution_id": "big-1", "input": {"data": 1, field: number}}
    status, code, message = _error(api.post("/v1/executions", body))
    assert (status, code) == (400, "INVALID_INPUT")
    assert message.startswith(f"workflow input is invalid at $.{field}: ")
    assert message.endswith("an integer outside the 64-bit range")


def test_a_signal_nested_too_deeply_is_refused_and_not_recorded(api: Http) -> None:
    _start(api, "sig-1")
    reply = _raw(api, "/v1/executions/sig-1/signals/note", b'{"data":' + _deep(300) + b"}")
    status, code, message = _error(reply)
    assert (status, code) == (422, "SIGNAL_PAYLOAD_INVALID")
    assert message.startswith("payload for signal `note` is invalid at $.data.a.a")
    assert message.endswith(": nested deeper than 128 levels")
    reply = api.post("/v1/executions/sig-1/signals/note", {"data": 2**63})
    assert _error(reply)[:2] == (422, "SIGNAL_PAYLOAD_INVALID")
    events = api.get("/v1/executions/sig-1/history").body["events"]
    assert "SignalReceived" not in [event["type"] for event in events]


def test_a_task_output_or_failure_refused_leaves_the_attempt_in_flight(
    server: ServerProcess,
) -> None:
    api = server.http(ADMIN)
    body = {"workflow": "Out", "execution_id": "out-1", "input": {"data": 1}}
    assert api.post("/v1/executions", body).status == 201
    worker = RawWorker(server.http(WORKER), "payload-worker", [("out.keep", "1.0.0")])
    assert worker.register().status == 200
    token = worker.task()["token"]

    body = b'{"token":"' + token.encode() + b'","output":{"data":' + _deep(300) + b"}}"
    status, code, message = _error(_raw(worker.http, "/v1/tasks/complete", body))
    assert (status, code) == (400, "INVALID_REQUEST")
    assert message.startswith("task output is invalid at $.data.a.a")
    details = b'{"token":"' + token.encode() + b'","error_code":"E","details":' + _deep(300) + b"}"
    status, code, message = _error(_raw(worker.http, "/v1/tasks/fail", details))
    assert (status, code) == (400, "INVALID_REQUEST")
    assert message.startswith("`details` is invalid at $.a.a")

    assert worker.complete(token, {"data": nested(127)}).body == {"accepted": True}
    state = api.get("/v1/executions/out-1").body
    keep = state["units"]["keep"]
    assert (keep["status"], keep["attempt"]) == ("SUCCEEDED", 1), keep
    worker.unregister()


def _complete_raw(worker: RawWorker, token: str, output: bytes) -> Response:
    """orjson cannot write an integer from 2^64 up: the body is spelled out."""
    body = b'{"token":"' + token.encode() + b'","output":' + output + b"}"
    return _raw(worker.http, "/v1/tasks/complete", body)


# Every integer too large for `Int` gets the same answer, whether the JSON
# parser keeps it as an integer (below 2^64) or reads it as a float (issue 36.11b).
BIG = [2**63, 2**64 - 1, 2**64, 10**30, -(2**63) - 1, -(10**30)]


@pytest.mark.parametrize("number", BIG)
def test_a_task_output_integer_too_big_for_int_violates_the_contract(
    server: ServerProcess, number: int
) -> None:
    api = server.http(ADMIN)
    assert api.post("/v1/workflows", server_ir.chain(1, task="big.int")).status in (200, 201)
    eid = f"big-int-{number}"
    assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": eid}).status == 201
    worker = RawWorker(server.http(WORKER), f"big-int-{number}", [("big.int", "1.0.0")])
    assert worker.register().status == 200
    try:
        token = worker.task()["token"]
        reply = _complete_raw(worker, token, b'{"i":' + str(number).encode() + b"}")
        assert (reply.status, reply.body) == (
            200,
            {"accepted": False, "reason": "output violates the task contract"},
        )
        state = api.get(f"/v1/executions/{eid}").body
        assert state["status"] == "FAILED"
        assert state["error"]["code"] == "OUTPUT_CONTRACT_VIOLATION", state
    finally:
        worker.unregister()


@pytest.mark.parametrize("number", BIG)
def test_a_task_output_integer_too_big_for_int_is_a_float_in_a_json_field(
    server: ServerProcess, number: int
) -> None:
    api = server.http(ADMIN)
    eid = f"big-json-{number}"
    body = {"workflow": "Out", "execution_id": eid, "input": {"data": 1}}
    assert api.post("/v1/executions", body).status == 201
    worker = RawWorker(server.http(WORKER), f"big-json-{number}", [("out.keep", "1.0.0")])
    assert worker.register().status == 200
    try:
        token = worker.task()["token"]
        output = b'{"data":[' + str(number).encode() + b"]}"
        assert _complete_raw(worker, token, output).body == {"accepted": True}
        events = api.get(f"/v1/executions/{eid}/history").body["events"]
        done = [e for e in events if e["type"] == "StepSucceeded"]
        assert [e["output"] for e in done] == [{"data": [float(number)]}], done
    finally:
        worker.unregister()


def test_ir_with_integers_canonical_json_cannot_hold_is_invalid_ir(api: Http) -> None:
    for number in (2**53, 2**63 + 1, -(2**60)):
        document = server_ir.greet(version="9.0.0")
        document["steps"][0]["timeout_ms"] = number
        status, code, message = _error(api.post("/v1/workflows", document))
        assert (status, code) == (400, "INVALID_IR")
        assert message == (
            "$.steps[0].timeout_ms: an integer outside ±9007199254740991, "
            "the range canonical JSON holds exactly "
            "(the IR writes larger integers as strings of digits)"
        )


@pytest.mark.parametrize("depth", [129, 300, 1000])
def test_ir_nested_too_deeply_is_invalid_ir(api: Http, depth: int) -> None:
    document = orjson.dumps(server_ir.greet(version="9.0.1"))[:-1] + b',"extra":'
    status, code, message = _error(_raw(api, "/v1/workflows", document + _deep(depth) + b"}"))
    assert (status, code) == (400, "INVALID_IR")
    assert message == "$.extra" + ".a" * 127 + ": nested deeper than 128 levels"


def test_json_too_deep_to_parse_is_the_plain_400_of_the_http_layer(api: Http) -> None:
    reply = _raw(api, "/v1/workflows", _deep(5000))
    assert reply.status == 400
    assert reply.headers["content-type"].startswith("text/plain")
    assert reply.text.startswith("Failed to parse the request body as JSON: ")


def test_bad_requests_never_fail_other_clients_requests(server: ServerProcess) -> None:
    """Clients sending deep and huge-integer signals share commit groups with
    clients sending good ones; every good signal is recorded."""
    setup = server.http(ADMIN)
    for i in range(3):
        _start(setup, f"crowd-{i}")
    failures: list[str] = []
    barrier = threading.Barrier(6)

    def good(i: int) -> None:
        http = Http(server.addr, ADMIN)
        barrier.wait()
        for n in range(60):
            reply = http.post(f"/v1/executions/crowd-{i}/signals/note", {"data": [n]})
            if reply.status != 200:
                failures.append(f"good {i}/{n}: {reply!r}")
        http.close()

    def bad(i: int) -> None:
        http = Http(server.addr, ADMIN)
        barrier.wait()
        for _ in range(60):
            for body in (b'{"data":' + _deep(300) + b"}", b'{"data":9223372036854775808}'):
                reply = _raw(http, f"/v1/executions/crowd-{i}/signals/note", body)
                if reply.status != 422:
                    failures.append(f"bad {i}: {reply!r}")
        http.close()

    threads = [threading.Thread(target=good, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=bad, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    for i in range(3):
        events = setup.get(f"/v1/executions/crowd-{i}/history").body["events"]
        received = [e["payload"]["data"] for e in events if e["type"] == "SignalReceived"]
        assert received == [[n] for n in range(60)]
