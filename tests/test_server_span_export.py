"""The export process: spans sent through it reach a real OTLP receiver
unchanged, its warnings are logged by the server, and a dead process fails
an export instead of hanging the tracer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind
from opentelemetry.trace.status import Status, StatusCode
from test_server_tracing import Receiver

from orbit_server import logs, span_export, tracing


def _span(name: str, span_id: int, error: str | None = None) -> ReadableSpan:
    context = SpanContext(7, span_id, is_remote=False, trace_flags=tracing.SAMPLED)
    parent = SpanContext(7, 1, is_remote=False, trace_flags=tracing.SAMPLED)
    status = Status(StatusCode.OK) if error is None else Status(StatusCode.ERROR, error)
    return ReadableSpan(
        name,
        context=context,
        parent=parent,
        resource=tracing.span_resource("orbit-test", "9.9.9"),
        attributes={"orbit.unit": name, "orbit.attempt": 2, "orbit.redelivery": True},
        kind=SpanKind.INTERNAL,
        status=status,
        start_time=1_000_000,
        end_time=3_000_000,
        instrumentation_scope=InstrumentationScope(tracing.SCOPE, "9.9.9"),
    )


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []

    class Logger:
        def warning(self, event: str, **fields: Any) -> None:
            seen.append((event, fields))

    monkeypatch.setattr(logs, "logger", Logger)
    return seen


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def _exporter(url: str) -> span_export.ProcessExporter:
    return span_export.ProcessExporter(tracing.TracingSettings(url, "orbit-test"), "9.9.9")


def test_spans_reach_the_receiver_unchanged(
    receiver: Receiver, warnings: list[tuple[str, dict[str, Any]]]
) -> None:
    exporter = _exporter(receiver.url)
    try:
        result = exporter.export([_span("step a", 2), _span("step b", 3, "E: boom")])
    finally:
        exporter.shutdown()
    assert result is SpanExportResult.SUCCESS
    assert warnings == []
    spans = sorted(receiver.spans, key=lambda s: s["name"])
    assert [s["name"] for s in spans] == ["step a", "step b"]
    assert spans[1]["span_id"] == f"{3:016x}" and spans[1]["parent"] == f"{1:016x}"
    assert spans[1]["trace_id"] == f"{7:032x}"
    assert (spans[0]["start"], spans[0]["end"]) == (1_000_000, 3_000_000)
    assert spans[1]["status"] == (2, "E: boom")
    assert spans[0]["attributes"] == {
        "orbit.unit": "step a",
        "orbit.attempt": 2,
        "orbit.redelivery": True,
    }
    assert spans[0]["resource"]["service.name"] == "orbit-test"


def test_a_refusal_is_logged_by_the_server(
    receiver: Receiver, warnings: list[tuple[str, dict[str, Any]]]
) -> None:
    receiver.status = 500
    exporter = _exporter(receiver.url)
    try:
        assert exporter.export([_span("step a", 2)]) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown()
    assert warnings == [("OTLP collector rejected spans", {"status": 500})]


def test_a_dead_export_process_fails_the_export(
    receiver: Receiver, warnings: list[tuple[str, dict[str, Any]]]
) -> None:
    exporter = _exporter(receiver.url)
    exporter._process.kill()
    exporter._process.join(10)
    try:
        assert exporter.export([_span("step a", 2)]) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown()
    assert [event for event, _ in warnings] == ["cannot export spans to the OTLP collector"]
