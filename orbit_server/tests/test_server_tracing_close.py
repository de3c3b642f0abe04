"""Closing the tracer never waits long for a collector that does not answer:
past its deadline the exporter is shut down and what is queued is dropped."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from orbit_core import events as ev
from orbit_server.tracing import Tracer, TracingSettings


class Stuck(SpanExporter):
    """Like the OTLP exporter retrying an unreachable collector: an export
    returns only once the exporter is shut down."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.exporting = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exporting.set()
        self.stopped.wait(60)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.stopped.set()


def test_close_gives_up_on_a_stuck_export() -> None:
    exporter = Stuck()
    tracer = Tracer(TracingSettings("http://127.0.0.1:9"), exporter=exporter, schedule_delay_ms=10)
    for i in range(3):
        events: list[ev.Event] = [
            ev.WorkflowCreated(1, 1000, "W", "1.0.0", "h", None),
            ev.WorkflowCompleted(2, 1001, {}),
        ]
        tracer.committed([(f"e{i}", "W", events)])
    assert exporter.exporting.wait(10)
    started = time.monotonic()
    tracer.close(timeout_s=0.2)
    assert time.monotonic() - started < 5
    assert exporter.stopped.is_set()
