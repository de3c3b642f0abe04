"""Chapter 39's resource limits, with its curl examples replayed verbatim
against a real `orbit server`."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import server_ir
from server_harness import Http, RawWorker, ServerProcess

TOKEN = "admin-secret"


def _deployed(tmp: Path, *flags: str) -> ServerProcess:
    proc = ServerProcess(tmp / "orbit.db", "--token", TOKEN, *flags).start()
    api = proc.http(TOKEN)
    statuses = [
        api.post("/v1/workflows", d).status for d in (server_ir.review(), server_ir.print_labels())
    ]
    if statuses != [201, 201]:
        proc.stop()
        raise AssertionError(f"deploying answered {statuses}")
    return proc


def _curl(api: Http, path: str, data: bytes) -> str:
    """What `curl -s -H ... -d DATA -w ' %{http_code}\\n' URL` prints."""
    reply = api.post(path, raw=data, headers={"content-type": "application/json"})
    return f"{reply.text} {reply.status}"


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


def test_active_executions(tmp: Path) -> None:
    proc = _deployed(tmp, "--max-active-executions", "2")
    try:
        api = proc.http(TOKEN)
        for eid in ("review-1", "review-0"):
            body = {"workflow": "Review", "execution_id": eid, "input": {"order_id": "1"}}
            assert api.post("/v1/executions", body).status == 201
        assert _curl(
            api,
            "/v1/executions",
            b'{"workflow":"Review","execution_id":"review-2","input":{"order_id":"2"}}',
        ) == (
            '{"error":{"code":"RESOURCE_EXHAUSTED","message":'
            '"2 executions are already running (--max-active-executions)"}} 429'
        )
        assert (
            _curl(
                api,
                "/v1/executions",
                b'{"workflow":"Review","execution_id":"review-1","input":{"order_id":"1"}}',
            )
            == '{"execution_id":"review-1","created":false} 200'
        )
        assert api.get("/v1/executions/review-2").status == 404
    finally:
        proc.stop()


def _sized(prefix: bytes, size: int) -> bytes:
    """`prefix` + filler + `"}`: a compact JSON object of exactly `size` bytes."""
    body = prefix + b"x" * (size - len(prefix) - 2) + b'"}'
    assert len(orjson.dumps(orjson.loads(body))) == size
    return body


def test_payload_size_and_body_limit(tmp: Path) -> None:
    proc = _deployed(tmp, "--max-payload-bytes", "200", "--max-body", "4096")
    try:
        api = proc.http(TOKEN)
        input_414 = _sized(b'{"order_id":"', 414)
        start = b'{"workflow":"Review","execution_id":"review-9","input":' + input_414 + b"}"
        assert _curl(api, "/v1/executions", start) == (
            '{"error":{"code":"PAYLOAD_TOO_LARGE","message":"execution input is 414 bytes; '
            "the limit is 200 (--max-payload-bytes or the workflow's `limits`)\"}} 413"
        )
        assert api.get("/v1/executions/review-9").status == 404

        small = {"workflow": "Review", "execution_id": "review-1", "input": {"order_id": "1"}}
        assert api.post("/v1/executions", small).status == 201
        signal_277 = _sized(b'{"approved":true,"note":"', 277)
        assert _curl(api, "/v1/executions/review-1/signals/decision", signal_277) == (
            '{"error":{"code":"PAYLOAD_TOO_LARGE","message":"signal payload is 277 bytes; '
            "the limit is 200 (--max-payload-bytes or the workflow's `limits`)\"}} 413"
        )
        assert "signals" not in api.get("/v1/executions/review-1").body
        assert (
            api.post("/v1/executions/review-1/signals/decision", {"approved": True}).status == 200
        )

        worker = RawWorker(proc.http(TOKEN), "reviewer", [("reviews.record", "1.0.0")])
        worker.register()
        task = worker.task()
        result_312 = _sized(b'{"receipt":"', 312)
        body = b'{"token":"' + task["token"].encode() + b'","output":' + result_312 + b"}"
        assert _curl(api, "/v1/tasks/complete", body) == (
            '{"error":{"code":"PAYLOAD_TOO_LARGE","message":"task result is 312 bytes; '
            "the limit is 200 (--max-payload-bytes or the workflow's `limits`)\"}} 413"
        )
        unit = api.get("/v1/executions/review-1").body["units"]["record"]
        assert (unit["status"], unit["token"]) == ("DISPATCHED", task["token"])
        assert worker.complete(task["token"], {"receipt": "r-1"}).body == {"accepted": True}
        assert api.get("/v1/executions/review-1/wait").body["status"] == "COMPLETED"

        # --max-body: refused before the body is read, in plain text.
        huge = api.post("/v1/executions", raw=b"{" + b" " * 5000 + b"}", headers=_JSON)
        assert (huge.status, huge.text) == (
            413,
            "Failed to buffer the request body: length limit exceeded",
        )
        assert huge.headers["content-type"].startswith("text/plain")
        assert _chunked(proc.addr, b"[" + b"1," * 3000 + b"1]") == 413
    finally:
        proc.stop()


_JSON = {"content-type": "application/json"}


def _chunked(addr: str, body: bytes) -> int:
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(
            "POST",
            "/v1/executions",
            body=iter([body[:500], body[500:]]),
            headers={**_JSON, "authorization": f"Bearer {TOKEN}"},
            encode_chunked=True,
        )
        return conn.getresponse().status
    finally:
        conn.close()


def _timeline(api: Http, eid: str) -> list[str]:
    """History as `orbit logs` shows it: type, step and error code."""
    out = []
    for event in api.get(f"/v1/executions/{eid}/history").body["events"]:
        parts = [event["type"]]
        if "step" in event:
            parts.append(f"step={event['step']}")
        if "limit" in event:
            parts.append(f"limit={event['limit']}")
        error = event.get("error")
        if error:
            parts.append(f"error={error['code']} {error['message']}")
        out.append(" ".join(parts))
    return out


@pytest.fixture
def labels_server(tmp: Path) -> Iterator[ServerProcess]:
    proc = _deployed(tmp, "--max-fan-out", "3", "--max-history-events", "10")
    yield proc
    proc.stop()


def test_fan_out_limit(labels_server: ServerProcess) -> None:
    api = labels_server.http(TOKEN)
    body = {"workflow": "PrintLabels", "execution_id": "labels-2", "input": {"skus": list("abcd")}}
    assert api.post("/v1/executions", body).status == 201
    assert api.get("/v1/executions/labels-2/wait").body["status"] == "FAILED"
    limit = (
        "`for` over 4 elements exceeds the fan-out limit of 3 "
        "(--max-fan-out or the workflow's `limits`)"
    )
    assert _timeline(api, "labels-2") == [
        "WorkflowCreated",
        "WorkflowStarted",
        f"StepFailed step=print error=LIMIT_EXCEEDED {limit}",
        "HandlersStarted",
        "StepSucceeded step=on_failure:alert",
        f"WorkflowFailed error=LIMIT_EXCEEDED step `print` failed: {limit}",
    ]


def test_history_limit(labels_server: ServerProcess) -> None:
    api = labels_server.http(TOKEN)
    body = {"workflow": "PrintLabels", "execution_id": "labels-3", "input": {"skus": list("abc")}}
    assert api.post("/v1/executions", body).status == 201
    printer = RawWorker(labels_server.http(TOKEN), "printer", [("labels.print", "1.0.0")])
    printer.register()
    for _ in range(3):
        task = printer.task()
        assert printer.complete(task["token"], {"label": "x"}).body == {"accepted": True}
    assert api.get("/v1/executions/labels-3/wait").body["status"] == "FAILED"
    reached = (
        "the execution reached 10 history events (--max-history-events or the workflow's `limits`)"
    )
    assert _timeline(api, "labels-3") == [
        "WorkflowCreated",
        "WorkflowStarted",
        "StepFanOut step=print",
        "StepScheduled step=print[0]",
        "StepScheduled step=print[1]",
        "StepScheduled step=print[2]",
        "StepDispatched step=print[0]",
        "StepSucceeded step=print[0]",
        "StepDispatched step=print[1]",
        "StepSucceeded step=print[1]",
        "StepDispatched step=print[2]",
        "StepSucceeded step=print[2]",
        "LimitExceeded limit=max_history_events",
        "StepCancelled step=print",
        "HandlersStarted",
        "StepSucceeded step=on_failure:alert",
        f"WorkflowFailed error=LIMIT_EXCEEDED {reached}",
    ]
