"""OpenTelemetry traces of executions, built from committed events.

One trace per top-level execution: a root span `workflow <Name>` from
`WorkflowCreated` to the terminal event, and under it one span `step <unit>`
per attempt (dispatch to result), per timer (start to fire) and per
compensation attempt. A child execution's root span hangs under the parent
step's span, in the parent's trace. Spans are made only when their events
are committed (`telemetry.Telemetry` calls `committed`), with the events'
own millisecond timestamps, so a span is never exported for something the
history does not hold.

Identifiers are SHA-256 of the execution and unit identifiers, so a
restarted server continues the same traces: trace id = first 16 bytes of
`orbit-trace:<top-level id>`, root span id = first 8 of `orbit-span:<id>`,
unit span id = first 8 of `orbit-span:<id>/<unit>#<dispatch number>`. Each
span is made finished (the SDK's `ReadableSpan`, with those ids and the
events' times) and handed to the processor. An execution first seen after a
restart is rebuilt from its stored history.

Export is opentelemetry-sdk's `BatchSpanProcessor` (a bounded queue and a
background thread) with the OTLP/HTTP protobuf exporter: the engine's thread
only queues a finished span. A request the collector refuses, a collector
that cannot be reached and a full queue each log the chapter's warning; the
spans concerned are dropped (the history stays the complete record).
Sampling follows the SDK's `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG`
(every trace by default), decided once per trace from its id. Workers get
the span of their attempt as a W3C `traceparent` in the task.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode
from opentelemetry.util.re import parse_env_headers

from orbit_core import events as ev
from orbit_core.ports import Store
from orbit_server import __version__, logs
from orbit_server.telemetry import Changes

DEFAULT_SERVICE = "orbit-runtime"
SCOPE = "orbit-runtime"
# Requests of up to 512 spans, 10 s each (chapter 46). The queue holds 128
# requests' worth: the chapter's 1024 would be half a million Python span
# objects, far more memory than a collector outage is worth.
BATCH_SPANS = 512
QUEUE_SPANS = 128 * BATCH_SPANS
EXPORT_TIMEOUT_S = 10.0
# At shutdown, what is queued gets this long to go out; then it is dropped.
CLOSE_TIMEOUT_S = 5.0
# Spans are sent this often (or as soon as a batch is full).
SCHEDULE_DELAY_MS = 500
# A full queue is reported at most this often.
_QUEUE_FULL_EVERY_S = 10.0
_TERMINAL = (ev.WorkflowCompleted, ev.WorkflowFailed, ev.WorkflowCancelled, ev.WorkflowTimedOut)
_STATUS = {
    "WorkflowCompleted": "COMPLETED",
    "WorkflowFailed": "FAILED",
    "WorkflowCancelled": "CANCELLED",
    "WorkflowTimedOut": "TIMED_OUT",
}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def trace_id_of(top_level_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"orbit-trace:{top_level_id}".encode()).digest()[:16])


def span_id_of(execution_id: str, unit: str | None = None, dispatch: int = 0) -> int:
    key = execution_id if unit is None else f"{execution_id}/{unit}#{dispatch}"
    return int.from_bytes(hashlib.sha256(f"orbit-span:{key}".encode()).digest()[:8])


@attrs.define(slots=True)
class TracingSettings:
    """What `--otlp-endpoint` and the OTEL_* variables of chapter 70 set."""

    endpoint: str
    service_name: str = DEFAULT_SERVICE
    headers: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_env(cls, endpoint: str | None, env: Mapping[str, str]) -> TracingSettings | None:
        """None when export is off (no flag and no OTEL_EXPORTER_OTLP_ENDPOINT)."""
        base = endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
        if base is None:
            return None
        headers = parse_env_headers(env.get("OTEL_EXPORTER_OTLP_HEADERS", ""), liberal=True)
        return cls(base, env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE, dict(headers))

    @property
    def traces_url(self) -> str:
        return self.endpoint.rstrip("/") + "/v1/traces"


@attrs.define(slots=True)
class _Attempt:
    start_ms: int
    attempt: int
    dispatch: int
    worker_id: str | None
    redelivery: bool


@attrs.define(slots=True)
class _Execution:
    """What tracing remembers of one running execution."""

    execution_id: str
    workflow: str = ""
    version: str = ""
    created_ms: int = 0
    trace_id: int = 0
    parent_span: int | None = None
    sampled: bool = True
    dispatches: dict[str, int] = attrs.field(factory=dict)
    open: dict[str, _Attempt] = attrs.field(factory=dict)
    redelivery: set[str] = attrs.field(factory=set)


class Tracer:
    """Turns committed events into spans and queues them for export."""

    def __init__(
        self,
        settings: TracingSettings,
        store: Store | None = None,
        *,
        exporter: SpanExporter | None = None,
        schedule_delay_ms: int = SCHEDULE_DELAY_MS,
        export: bool = True,
        restored: Callable[[str, list[ev.Event]], None] | None = None,
    ) -> None:
        """`export=False` keeps only the execution model (the ids of
        `committed` and `traceparent`) and makes no span: the engine's
        process runs such a tracer while `trace_export` makes and sends the
        spans in a process of its own. `restored` is told of each history
        read from the store, so that process can rebuild the same model."""
        self.settings = settings
        self._store = store
        self._restored = restored
        self._lock = threading.Lock()
        self._executions: dict[str, _Execution] = {}
        resource = _Resource(
            {"service.name": settings.service_name, "service.version": __version__}
        )
        # The provider is the SDK's configuration (its sampler, read from
        # OTEL_TRACES_SAMPLER) and owns the processor's shutdown.
        self._provider = TracerProvider(resource=resource)
        self._sampler = self._provider.sampler
        self._resource = resource
        self._scope = InstrumentationScope(SCOPE, __version__)
        self._export = export
        if not export:
            return
        _route_sdk_logs()
        if exporter is None:
            exporter = otlp_exporter(settings)
        self._exporter = exporter
        self._processor = BatchSpanProcessor(
            exporter,
            max_queue_size=QUEUE_SPANS,
            max_export_batch_size=BATCH_SPANS,
            schedule_delay_millis=schedule_delay_ms,
            export_timeout_millis=EXPORT_TIMEOUT_S * 1000,
        )
        self._provider.add_span_processor(self._processor)

    def attach(self, store: Store) -> None:
        """The store histories are read from when an execution was started
        before this server did (set once the engine's store exists)."""
        self._store = store

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Sends what is queued for at most `timeout_s`, then stops. The SDK
        would wait for every queued request and its retries (minutes with an
        unreachable collector): past the deadline the exporter is shut down,
        which ends its retries and fails the rest at once."""
        if not self._export:
            return
        closing = threading.Thread(target=self._provider.shutdown, name="otlp-close", daemon=True)
        closing.start()
        closing.join(timeout_s)
        if closing.is_alive():
            self._exporter.shutdown()
            closing.join(timeout_s)

    def flush(self, timeout_ms: int = 10_000) -> bool:
        return not self._export or self._processor.force_flush(timeout_ms)

    # ---- from commits

    def committed(self, changes: Changes) -> dict[str, tuple[str, str]]:
        # Children after the rest: a child created in the same commit as its
        # parent step's dispatch needs that dispatch counted first.
        ordered = sorted(changes, key=_is_new_child)
        ids: dict[str, tuple[str, str]] = {}
        with self._lock:
            for execution_id, _workflow, events in ordered:
                if not events:
                    continue
                x = self._executions.get(execution_id)
                if x is None:
                    x = self._rebuild(execution_id, before_seq=_first_seq(events))
                emit = x.sampled and self._export
                for event in events:
                    self._apply(x, event, emit=emit)
                if x.sampled:
                    ids[execution_id] = (f"{x.trace_id:032x}", f"{span_id_of(execution_id):016x}")
        return ids

    def traceparent(self, execution_id: str, unit: str) -> str | None:
        """The W3C trace context of the attempt of `unit` dispatched last,
        for the task handed to a worker."""
        with self._lock:
            x = self._executions.get(execution_id)
            if x is None or not x.sampled or unit not in x.open:
                return None
            span = span_id_of(execution_id, unit, x.open[unit].dispatch)
            return f"00-{x.trace_id:032x}-{span:016x}-01"

    def forget(self) -> None:
        """Drops what it knows of every execution (each is rebuilt from its
        history when next seen); the spans of open attempts are lost."""
        with self._lock:
            self._executions.clear()

    def sampled(self, execution_id: str) -> bool:
        """Whether a running execution's trace is sampled (False once it ended)."""
        x = self._executions.get(execution_id)
        return x is not None and x.sampled

    # ---- the execution model

    def restore(self, execution_id: str, events: list[ev.Event]) -> None:
        """Rebuilds an execution's model from the events before those still
        to come (what another tracer read from the store), making no span."""
        with self._lock:
            self._restore(execution_id, events)

    def _rebuild(self, execution_id: str, before_seq: int) -> _Execution:
        """An execution's tracing state from its stored history (a server
        restarted since it began), or an empty one without a history."""
        # Nothing comes before an execution's first event: a new execution
        # (every start) costs no read of the store.
        history: list[ev.Event] = []
        if self._store is not None and before_seq > 1:
            for event in self._store.history(execution_id) or ():
                if event.seq >= before_seq:
                    break
                history.append(event)
            if self._restored is not None:
                self._restored(execution_id, history)
        return self._restore(execution_id, history)

    def _restore(self, execution_id: str, history: list[ev.Event]) -> _Execution:
        x = _Execution(execution_id)
        self._executions[execution_id] = x
        for event in history:
            self._apply(x, event, emit=False)
        if not x.trace_id:
            x.trace_id = trace_id_of(execution_id)
        return x

    def _created(self, x: _Execution, event: ev.WorkflowCreated) -> None:
        x.workflow, x.version = event.workflow, event.version
        if (event.run or 1) > 1 and x.trace_id:
            return  # a new run of the same execution: same trace, same root
        x.created_ms = event.timestamp_ms
        parent = event.parent
        if parent is None:
            x.trace_id = trace_id_of(x.execution_id)
            x.sampled = self._sample(x.trace_id, x.workflow)
            return
        owner = self._executions.get(parent["execution_id"])
        if owner is None:
            owner = self._rebuild(parent["execution_id"], before_seq=1 << 62)
        x.trace_id, x.sampled = owner.trace_id, owner.sampled
        step = parent["step"]
        x.parent_span = span_id_of(owner.execution_id, step, owner.dispatches.get(step) or 1)

    def _sample(self, trace_id: int, name: str) -> bool:
        result = self._sampler.should_sample(None, trace_id, f"workflow {name}")
        return result.decision is Decision.RECORD_AND_SAMPLE

    def _apply(self, x: _Execution, event: ev.Event, emit: bool) -> None:
        match event:
            case ev.WorkflowCreated():
                self._created(x, event)
            case ev.StepScheduled() if event.redelivery:
                x.redelivery.add(event.step)
            case ev.StepDispatched():
                n = x.dispatches.get(event.step, 0) + 1
                x.dispatches[event.step] = n
                redelivery = event.step in x.redelivery
                x.redelivery.discard(event.step)
                x.open[event.step] = _Attempt(
                    event.timestamp_ms, event.attempt, n, event.worker_id, redelivery
                )
            case ev.TimerStarted():
                n = x.dispatches.get(event.step, 0) + 1
                x.dispatches[event.step] = n
                x.open[event.step] = _Attempt(event.timestamp_ms, 1, n, None, False)
            case ev.StepSucceeded():
                self._end_unit(x, event, "succeeded", None, emit=emit)
            case ev.StepAttemptFailed():
                message = f"{event.error.get('code')}: {event.error.get('message')}"
                self._end_unit(x, event, "failed", message, emit=emit)
            case ev.StepAttemptUncertain():
                uncertain = f"outcome unknown: {event.reason}"
                self._end_unit(x, event, "uncertain", uncertain, emit=emit)
            case ev.TimerFired():
                self._end_unit(x, event, "timer fired", None, emit=emit)
            case _ if isinstance(event, _TERMINAL):
                if emit:
                    self._end_root(x, event)
                self._executions.pop(x.execution_id, None)
            case _:
                pass

    # ---- spans

    def _end_unit(
        self, x: _Execution, event: Any, outcome: str, error: str | None, *, emit: bool
    ) -> None:
        unit: str = event.step
        attempt = x.open.pop(unit, None)
        if attempt is None or not emit:
            return
        attributes: dict[str, Any] = {
            "orbit.execution_id": x.execution_id,
            "orbit.workflow": x.workflow,
            "orbit.unit": unit,
            "orbit.attempt": attempt.attempt,
            "orbit.outcome": outcome,
        }
        if attempt.worker_id is not None:
            attributes["orbit.worker_id"] = attempt.worker_id
        if attempt.redelivery:
            attributes["orbit.redelivery"] = True
        self._span(
            f"step {unit}",
            trace_id=x.trace_id,
            span_id=span_id_of(x.execution_id, unit, attempt.dispatch),
            parent_id=span_id_of(x.execution_id),
            attributes=attributes,
            start_ms=attempt.start_ms,
            end_ms=event.timestamp_ms,
            error=error,
        )

    def _end_root(self, x: _Execution, event: ev.Event) -> None:
        status = _STATUS[event.TYPE]
        attributes: dict[str, Any] = {
            "orbit.execution_id": x.execution_id,
            "orbit.workflow": x.workflow,
            "orbit.workflow_version": x.version,
            "orbit.status": status,
        }
        compensation = getattr(event, "compensation", None)
        if compensation is not None:
            attributes["orbit.compensation"] = compensation
        error = None
        if isinstance(event, ev.WorkflowFailed):
            error = f"{event.error.get('code')}: {event.error.get('message')}"
        elif status != "COMPLETED":
            error = status
        self._span(
            f"workflow {x.workflow}",
            trace_id=x.trace_id,
            span_id=span_id_of(x.execution_id),
            parent_id=x.parent_span,
            attributes=attributes,
            start_ms=x.created_ms,
            end_ms=event.timestamp_ms,
            error=error,
        )

    def _span(
        self,
        name: str,
        *,
        trace_id: int,
        span_id: int,
        parent_id: int | None,
        attributes: dict[str, Any],
        start_ms: int,
        end_ms: int,
        error: str | None,
    ) -> None:
        # A finished span handed straight to the batch processor: its times
        # are the events' and its sampling was decided for the whole trace,
        # so the tracer's own span lifecycle would only cost time.
        parent = None
        if parent_id is not None:
            parent = SpanContext(trace_id, parent_id, is_remote=False, trace_flags=_SAMPLED)
        status = Status(StatusCode.OK) if error is None else Status(StatusCode.ERROR, error)
        span = ReadableSpan(
            name,
            context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED),
            parent=parent,
            resource=self._resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=start_ms * 1_000_000,
            end_time=max(end_ms, start_ms) * 1_000_000,
            instrumentation_scope=self._scope,
        )
        self._processor.on_end(span)


class _Resource(Resource):
    """The SDK's Resource with its hash made once: the OTLP encoder groups
    spans by resource and hashes it for every span, and the SDK's hash
    serialises the attributes to JSON each time (about a third of the
    encoding's cost). The attributes never change after it is made."""

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        super().__init__(dict(attributes))
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def _first_seq(events: list[ev.Event]) -> int:
    return events[0].seq


def _is_new_child(change: tuple[str, str, list[ev.Event]]) -> bool:
    first = change[2][0] if change[2] else None
    return isinstance(first, ev.WorkflowCreated) and first.parent is not None


# ---- export failures, as the chapter's warnings


class ReportingExporter(SpanExporter):
    """The OTLP exporter, with each failed export logged as one warning:
    `OTLP collector rejected spans status=<code>` when the collector
    answered with an error status, `cannot export spans to the OTLP
    collector error=...` otherwise.

    The exporter reports only success or failure; what went wrong is seen
    by the HTTP session it sends through, which it takes as its public
    `session` argument (`otlp_exporter` makes both)."""

    def __init__(self, inner: SpanExporter, session: ObservedSession | None = None) -> None:
        self._inner = inner
        self._session = session

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        session = self._session
        if session is not None:
            session.outcome = None
        try:
            result = self._inner.export(spans)
        except Exception as exc:  # never into the processor's thread
            logs.logger().warning("cannot export spans to the OTLP collector", error=repr(exc))
            return SpanExportResult.FAILURE
        if result is SpanExportResult.FAILURE:
            outcome = session.outcome if session is not None else None
            if isinstance(outcome, int):
                logs.logger().warning("OTLP collector rejected spans", status=outcome)
            else:
                logs.logger().warning(
                    "cannot export spans to the OTLP collector", error=outcome or "export failed"
                )
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class ObservedSession(requests.Session):
    """The OTLP exporter's HTTP session, keeping the outcome of its latest
    request: the status code of an error answer, the text of an error that
    left no answer, or None (a success, or no request yet). The batch
    processor exports from one thread, and an export's retries happen
    within it, so the latest outcome is that export's last."""

    def __init__(self) -> None:
        super().__init__()
        self.outcome: int | str | None = None

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            response = super().request(*args, **kwargs)
        except Exception as exc:
            self.outcome = str(exc) or type(exc).__name__
            raise
        self.outcome = response.status_code if response.status_code >= 400 else None
        return response


def otlp_exporter(settings: TracingSettings) -> ReportingExporter:
    """The OTLP/HTTP exporter for `settings`, reporting its failures."""
    session = ObservedSession()
    return ReportingExporter(
        OTLPSpanExporter(
            endpoint=settings.traces_url,
            headers=dict(settings.headers),
            timeout=EXPORT_TIMEOUT_S,
            session=session,
        ),
        session,
    )


class _QueueFull(logging.Handler):
    """The SDK's 'queue full' record becomes the chapter's warning, at most
    once per `_QUEUE_FULL_EVERY_S`; the SDK's other records go to debug."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(logging.DEBUG)
        self._clock = clock
        self._last = -_QUEUE_FULL_EVERY_S

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith("Queue full"):
            now = self._clock()
            if now - self._last >= _QUEUE_FULL_EVERY_S:
                self._last = now
                logs.logger().warning("OTLP export queue is full; dropping spans")
        elif logs.enabled(logging.DEBUG):
            logs.logger().bind(target=record.name).debug(text)


_routed = False


def _route_sdk_logs() -> None:
    """OpenTelemetry logs through the standard `logging` module; its records
    are handled here (never printed raw by logging's last resort)."""
    global _routed
    if _routed:
        return
    _routed = True
    handler = _QueueFull()
    sdk_logger = logging.getLogger("opentelemetry")
    sdk_logger.addHandler(handler)
    sdk_logger.setLevel(logging.WARNING)
    sdk_logger.propagate = False
