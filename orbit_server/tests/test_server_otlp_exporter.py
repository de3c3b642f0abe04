"""The OTLP exporter's failures as the chapter's warnings, seen through the
HTTP session the exporter takes as its public `session` argument (no
internal of opentelemetry-exporter-otlp-proto-http is touched)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from orbit_server import logs
from orbit_server.tracing import (
    ObservedSession,
    ReportingExporter,
    TracingSettings,
    otlp_exporter,
)


def _spans() -> list:  # type: ignore[type-arg]
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    return list(memory.get_finished_spans())


@pytest.fixture
def collector(request: pytest.FixtureRequest) -> Iterator[str]:
    status: int = request.param

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_exporter_sends_through_the_observed_session() -> None:
    exporter = otlp_exporter(TracingSettings("http://127.0.0.1:9"))
    assert isinstance(exporter._inner, OTLPSpanExporter)
    assert isinstance(exporter._session, ObservedSession)


@pytest.mark.parametrize(("collector", "status"), [(400, 400), (500, 500)], indirect=["collector"])
def test_an_error_status_is_the_collector_rejecting_spans(
    collector: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("text")
    exporter = otlp_exporter(TracingSettings(collector))
    try:
        assert exporter.export(_spans()) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown()
    err = capsys.readouterr().err
    assert f"OTLP collector rejected spans status={status}" in err, err


@pytest.mark.parametrize("collector", [200], indirect=True)
def test_a_success_is_not_reported(collector: str, capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("text")
    exporter = otlp_exporter(TracingSettings(collector))
    try:
        assert exporter.export(_spans()) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert "OTLP" not in capsys.readouterr().err


def test_no_answer_is_a_failure_to_export(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("text")
    session = ObservedSession()
    # A short timeout bounds the exporter's retries.
    inner = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{_closed_port()}/v1/traces", timeout=1, session=session
    )
    exporter = ReportingExporter(inner, session)
    try:
        assert exporter.export(_spans()) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown()
    err = capsys.readouterr().err
    assert "cannot export spans to the OTLP collector error=" in err, err
    assert "rejected" not in err
