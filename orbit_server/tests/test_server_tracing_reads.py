"""The tracer reads a history from the store only for an execution that
began before it was running (a restarted server), never for a new one."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from orbit_core import events as ev
from orbit_core.memory_store import MemoryStore
from orbit_server.tracing import Tracer, TracingSettings


class Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        self.reads.append(execution_id)
        return super().history(execution_id, run)


def test_a_new_execution_costs_no_read_of_the_store() -> None:
    store, exporter = CountingStore(), Kept()
    tracer = Tracer(TracingSettings("http://127.0.0.1:9"), store, exporter=exporter)
    try:
        for i in range(3):
            events: list[ev.Event] = [
                ev.WorkflowCreated(1, 1000, "W", "1.0.0", "h", None),
                ev.WorkflowCompleted(2, 1001, {}),
            ]
            tracer.committed([(f"e{i}", "W", events)])
        # An execution first seen in the middle of its history is rebuilt.
        tracer.committed([("old", "W", [ev.WorkflowCompleted(5, 1002, {})])])
        assert tracer.flush()
    finally:
        tracer.close()
    assert store.reads == ["old"]
    assert [span.name for span in exporter.spans].count("workflow W") == 3
