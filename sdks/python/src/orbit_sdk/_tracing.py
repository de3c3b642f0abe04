"""Continues the runtime's trace in the worker, when OpenTelemetry is there.

A runtime exporting traces hands each task the span of its attempt as a W3C
`traceparent`. With the `opentelemetry-api` package installed (optional; the
SDK depends on nothing), the handler runs inside a span `task <name>` whose
parent is that attempt span, so whatever the handler traces or logs with
OpenTelemetry joins the execution's trace. Without the package, or without a
`traceparent`, the handler runs as it always did.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

_api: tuple[Any, Any] | None = None
_missing = False


def _opentelemetry() -> tuple[Any, Any] | None:
    global _api, _missing
    if _api is None and not _missing:
        try:
            trace = importlib.import_module("opentelemetry.trace")
            propagator = importlib.import_module(
                "opentelemetry.trace.propagation.tracecontext"
            ).TraceContextTextMapPropagator()
        except ImportError:
            _missing = True
            return None
        _api = (trace, propagator)
    return _api


@contextlib.contextmanager
def task_span(task: dict[str, Any], task_name: str) -> Iterator[Any]:
    """A span for the handler's run under the task's `traceparent`, or None."""
    parent = task.get("traceparent")
    api = _opentelemetry() if isinstance(parent, str) else None
    if api is None:
        yield None
        return
    trace, propagator = api
    context = propagator.extract({"traceparent": parent})
    tracer = trace.get_tracer("orbit-sdk")
    attributes = {
        "orbit.execution_id": str(task.get("execution_id", "")),
        "orbit.unit": str(task.get("step_id", "")),
        "orbit.attempt": int(task.get("attempt") or 0),
    }
    with tracer.start_as_current_span(
        f"task {task_name}", context=context, attributes=attributes, record_exception=False
    ) as span:
        yield span


def mark_failed(span: Any, code: str, message: str) -> None:
    if span is None:
        return
    status = importlib.import_module("opentelemetry.trace").Status
    code_error = importlib.import_module("opentelemetry.trace").StatusCode.ERROR
    span.set_status(status(code_error, f"{code}: {message}"))
