"""Span export in a process of its own.

The OTLP exporter encodes every span as protobuf in Python (about 35 µs a
span) and retries a collector that does not answer. In the server's process
that work shares one GIL with the engine and took about a third of its CPU
at full sampling. `ProcessExporter` is the `SpanExporter` the tracer's batch
processor calls: it sends each batch, flattened to plain tuples, over a pipe
to a spawned process that rebuilds the spans and runs the SDK's OTLP/HTTP
exporter (`tracing.ReportingExporter`) unchanged, on the other core. The
process answers each batch with its result and the warnings the export
raised, which the server logs as its own lines; the batch processor's thread
waits for that answer (without the GIL), so its queue and batching bound
the work exactly as before.

The process is spawned, not forked (the server has threads), and ends when
the pipe closes: at shutdown, or when the server dies.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from orbit_server import logs

# name, trace id, span id, parent span id, attributes, start, end, status
# code, status description (nanoseconds; the SDK's own values).
Flat = tuple[str, int, int, int | None, dict[str, Any], int, int, int, str | None]
# The process's answer: whether the batch was exported, and its warnings.
Answer = tuple[bool, list[tuple[str, dict[str, Any]]]]


def flatten(span: ReadableSpan) -> Flat:
    context, parent, status = span.context, span.parent, span.status
    assert context is not None
    return (
        span.name,
        context.trace_id,
        context.span_id,
        None if parent is None else parent.span_id,
        dict(span.attributes or {}),
        span.start_time or 0,
        span.end_time or 0,
        status.status_code.value,
        status.description,
    )


class ProcessExporter(SpanExporter):
    """Hands batches to the export process and reports what it answers."""

    def __init__(self, settings: Any, version: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(
                theirs,
                settings.traces_url,
                dict(settings.headers),
                settings.service_name,
                version,
            ),
            name="orbit-otlp-export",
            daemon=True,
        )
        self._process.start()
        theirs.close()
        # One batch at a time: the processor's thread, and force_flush's.
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        batch = [flatten(span) for span in spans]
        with self._lock:
            if self._closed:
                return SpanExportResult.FAILURE
            try:
                self._conn.send(batch)
                answer: Answer = self._conn.recv()
            except (OSError, EOFError) as exc:
                logs.logger().warning(
                    "cannot export spans to the OTLP collector",
                    error=f"the export process stopped: {exc!r}",
                )
                return SpanExportResult.FAILURE
        ok, warnings = answer
        for event, fields in warnings:
            logs.logger().warning(event, **fields)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Ends the process; an export it is retrying ends with it."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._conn.close()
        self._process.join(1.0)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5.0)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every batch is answered before the next is sent


def _serve(conn: Connection, url: str, headers: dict[str, str], service: str, version: str) -> None:
    """The export process: a batch in, its result and warnings out, until
    the server closes the pipe."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind
    from opentelemetry.trace.status import Status, StatusCode

    from orbit_server import tracing

    warnings: list[tuple[str, dict[str, Any]]] = []

    def warn(event: str, **fields: Any) -> None:
        warnings.append((event, fields))

    exporter = tracing.ReportingExporter(
        OTLPSpanExporter(endpoint=url, headers=headers, timeout=tracing.EXPORT_TIMEOUT_S), warn
    )
    resource = tracing.span_resource(service, version)
    scope = InstrumentationScope(tracing.SCOPE, version)
    sampled = tracing.SAMPLED
    codes = {code.value: code for code in StatusCode}

    def span(flat: Flat) -> ReadableSpan:
        name, trace_id, span_id, parent_id, attributes, start, end, code, text = flat
        parent = None
        if parent_id is not None:
            parent = SpanContext(trace_id, parent_id, is_remote=False, trace_flags=sampled)
        return ReadableSpan(
            name,
            context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=sampled),
            parent=parent,
            resource=resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            status=Status(codes[code], text),
            start_time=start,
            end_time=end,
            instrumentation_scope=scope,
        )

    while True:
        try:
            batch: list[Flat] = conn.recv()
        except (EOFError, OSError):
            break
        warnings.clear()
        result = exporter.export([span(flat) for flat in batch])
        try:
            conn.send((result is SpanExportResult.SUCCESS, list(warnings)))
        except OSError:
            break
    with contextlib.suppress(Exception):
        exporter.shutdown()
