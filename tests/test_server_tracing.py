"""OpenTelemetry traces from a real `orbit server` to a real OTLP/HTTP
receiver in this process (protobuf `ExportTraceServiceRequest`s decoded with
opentelemetry-proto): a workflow run by a Python SDK worker yields chapter
46's span tree, ids, attributes and statuses; a receiver that answers 500 or
is not there costs the workflow nothing and is logged as the chapter says."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from server_harness import ServerProcess

from orbit_core import ir
from orbit_lang import compile_source
from orbit_sdk import TaskError, Worker

SOURCE = """
task "t.work" {
    version "1.0.0"
    input { n: Int }
    output { v: Int }
}

workflow Shipping {
    version "1.0.0"
    input { n: Int }
    output { v: Int }
    step quote {
        worker "t.work"
        with { n: input.n }
    }
    return { v: quote.v }
}

workflow Order {
    version "1.0.0"
    input { n: Int }
    step validate {
        worker "t.work"
        with { n: input.n }
        retry { attempts: 3, initial_delay: 100ms }
    }
    step ship {
        workflow "Shipping"
        after validate
        with { n: input.n + 1 }
    }
}
"""


class Receiver:
    """An OTLP/HTTP trace receiver: every span of every request, flattened."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.spans: list[dict[str, Any]] = []
        self.requests: list[dict[str, str]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.requests.append({"path": self.path, **headers})
                    for resource_spans in request.resource_spans:
                        resource = _attributes(resource_spans.resource.attributes)
                        for scope_spans in resource_spans.scope_spans:
                            for span in scope_spans.spans:
                                receiver.spans.append(_span(span, resource, scope_spans.scope.name))
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _attributes(attributes: Any) -> dict[str, Any]:
    return {a.key: _value(a.value) for a in attributes}


def _span(span: Any, resource: dict[str, Any], scope: str) -> dict[str, Any]:
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "attributes": _attributes(span.attributes),
        "status": (span.status.code, span.status.message),
        "resource": resource,
        "scope": scope,
    }


def sha(text: str, size: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[: size * 2]


def eventually(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def deploy(server: ServerProcess) -> None:
    result = compile_source(SOURCE, "trace.orbit")
    assert [d.message for d in result.diagnostics] == []
    api = server.http()
    for definition in result.definitions:
        assert api.post("/v1/workflows", ir.to_json(definition)).status in (200, 201)


def python_worker(server: ServerProcess, seen: list[dict[str, Any]]) -> Worker:
    worker = Worker("py-1", server=f"http://{server.addr}", token="", poll_wait_ms=1000)

    @worker.task("t.work")
    def work(payload: dict[str, Any], ctx: Any) -> dict[str, Any]:
        seen.append({"step": ctx.step_id, "attempt": ctx.attempt, "span": _current_span()})
        if ctx.step_id == "validate" and ctx.attempt == 1:
            raise TaskError("CARD_DECLINED", "card was declined", retryable=True)
        return {"v": payload["n"]}

    worker.start()
    return worker


def _current_span() -> tuple[str, str] | None:
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def run_order(server: ServerProcess, execution_id: str) -> dict[str, Any]:
    api = server.http()
    started = api.post(
        "/v1/executions", {"workflow": "Order", "input": {"n": 1}, "execution_id": execution_id}
    )
    assert started.status in (200, 201), started.text
    reply = api.get(f"/v1/executions/{execution_id}/wait?timeout_ms=20000")
    body: dict[str, Any] = reply.body
    return body


def test_an_execution_is_one_trace_with_the_chapters_spans(
    tmp_path: Path, receiver: Receiver
) -> None:
    env = {"OTEL_SERVICE_NAME": "orbit-test", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=k1"}
    seen: list[dict[str, Any]] = []
    with ServerProcess(tmp_path / "o.db", "--otlp-endpoint", receiver.url, env=env) as server:
        deploy(server)
        worker = python_worker(server, seen)
        try:
            assert run_order(server, "trace-1")["status"] == "COMPLETED"
            eventually(lambda: any(s["name"] == "workflow Order" for s in receiver.spans))
        finally:
            worker.stop()
        log = server.log()
    assert "exporting OpenTelemetry traces" in log
    assert f"endpoint={receiver.url}" in log and "service=orbit-test" in log

    trace_id = sha("orbit-trace:trace-1", 16)
    spans = {
        s["name"] + "#" + str(s["attributes"].get("orbit.attempt", "")): s for s in receiver.spans
    }
    assert {s["trace_id"] for s in receiver.spans} == {trace_id}
    assert receiver.requests[0]["path"] == "/v1/traces"
    assert receiver.requests[0]["x-api-key"] == "k1"
    assert receiver.requests[0]["content-type"] == "application/x-protobuf"

    root = spans["workflow Order#"]
    assert root["span_id"] == sha("orbit-span:trace-1", 8)
    assert root["parent"] == ""
    assert root["kind"] == 1
    assert root["status"] == (1, "")
    assert root["attributes"] == {
        "orbit.execution_id": "trace-1",
        "orbit.workflow": "Order",
        "orbit.workflow_version": "1.0.0",
        "orbit.status": "COMPLETED",
    }
    assert root["resource"]["service.name"] == "orbit-test"
    assert root["resource"]["service.version"]
    assert root["scope"] == "orbit-runtime"

    failed, retried = spans["step validate#1"], spans["step validate#2"]
    assert failed["span_id"] == sha("orbit-span:trace-1/validate#1", 8)
    assert failed["parent"] == root["span_id"]
    assert failed["status"] == (2, "CARD_DECLINED: card was declined")
    assert failed["attributes"] == {
        "orbit.execution_id": "trace-1",
        "orbit.workflow": "Order",
        "orbit.unit": "validate",
        "orbit.attempt": 1,
        "orbit.outcome": "failed",
        "orbit.worker_id": "py-1",
    }
    assert retried["span_id"] == sha("orbit-span:trace-1/validate#2", 8)
    assert retried["status"] == (1, "")
    assert retried["attributes"]["orbit.outcome"] == "succeeded"

    ship = spans["step ship#1"]
    assert ship["parent"] == root["span_id"]
    assert ship["attributes"]["orbit.worker_id"] == "orbit-runtime"
    child_root = spans["workflow Shipping#"]
    assert child_root["attributes"]["orbit.execution_id"] == "trace-1.ship"
    assert child_root["span_id"] == sha("orbit-span:trace-1.ship", 8)
    assert child_root["parent"] == ship["span_id"]
    quote = spans["step quote#1"]
    assert quote["parent"] == child_root["span_id"]
    assert (
        quote["attributes"]["orbit.execution_id"] == child_root["attributes"]["orbit.execution_id"]
    )
    for span in receiver.spans:
        assert span["start"] <= span["end"]
        assert span["start"] % 1_000_000 == 0  # millisecond precision
    assert root["start"] <= failed["start"] and quote["end"] <= ship["end"] <= root["end"]

    # The worker ran each attempt inside the attempt's span (traceparent).
    by_attempt = {(s["step"], s["attempt"]): s["span"] for s in seen}
    assert by_attempt[("validate", 1)] == (trace_id, failed["span_id"])
    assert by_attempt[("validate", 2)][1] != failed["span_id"]


@pytest.mark.parametrize("answer", [500, None])
def test_a_failing_or_absent_receiver_costs_the_workflow_nothing(
    tmp_path: Path, answer: int | None
) -> None:
    receiver = Receiver(status=answer or 200)
    url = receiver.url
    if answer is None:
        receiver.close()  # nothing listens there any more
    seen: list[dict[str, Any]] = []
    try:
        with ServerProcess(tmp_path / "o.db", "--otlp-endpoint", url) as server:
            deploy(server)
            worker = python_worker(server, seen)
            try:
                for i in range(3):
                    assert run_order(server, f"down-{i}")["status"] == "COMPLETED"
            finally:
                worker.stop()
            if answer is None:
                expected = "cannot export spans to the OTLP collector"
            else:
                expected = "OTLP collector rejected spans status=500"
            eventually(lambda: expected in server.log())
            assert " WARN " in next(line for line in server.log().splitlines() if expected in line)
    finally:
        if answer is not None:
            receiver.close()


def test_a_trace_carries_on_across_a_restart(tmp_path: Path, receiver: Receiver) -> None:
    """The execution began before the restart: the spans made after it (in
    the exporting process) still know its workflow, start and trace."""
    with ServerProcess(tmp_path / "o.db", "--otlp-endpoint", receiver.url) as server:
        deploy(server)
        api = server.http()
        started = api.post(
            "/v1/executions", {"workflow": "Order", "input": {"n": 1}, "execution_id": "again-1"}
        )
        assert started.status == 201, started.text
        history = api.get("/v1/executions/again-1/history").body
    created_ms = history["events"][0]["timestamp_ms"]
    seen: list[dict[str, Any]] = []
    with ServerProcess(tmp_path / "o.db", "--otlp-endpoint", receiver.url) as server:
        worker = python_worker(server, seen)
        try:
            reply = server.http().get("/v1/executions/again-1/wait?timeout_ms=20000")
            assert reply.body["status"] == "COMPLETED"
            eventually(lambda: any(s["name"] == "workflow Order" for s in receiver.spans))
        finally:
            worker.stop()
    spans = {
        s["name"] + "#" + str(s["attributes"].get("orbit.attempt", "")): s for s in receiver.spans
    }
    root = spans["workflow Order#"]
    assert root["trace_id"] == sha("orbit-trace:again-1", 16)
    assert root["start"] == created_ms * 1_000_000
    assert root["attributes"]["orbit.workflow_version"] == "1.0.0"
    validate = spans["step validate#1"]
    assert validate["parent"] == root["span_id"]
    assert validate["attributes"]["orbit.workflow"] == "Order"
    assert spans["workflow Shipping#"]["parent"] == spans["step ship#1"]["span_id"]
