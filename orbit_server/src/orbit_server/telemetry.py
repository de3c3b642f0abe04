"""What the server derives from committed history: metric counters, the
per-event log lines and (with `--otlp-endpoint`) trace spans.

The hook is the store: `storage.LoggedStore` hands every batch the store
accepted to `Telemetry.committed`, after the commit returned and before any
caller is answered. So every count, line and span describes events that are
durable, and the engine itself knows nothing of any of it (orbit_core stays
free of Prometheus and OpenTelemetry). A failure in here is logged and
swallowed: the batch is committed whatever telemetry thinks of it.

Counters live in memory and start at zero with the process (chapter 46), one
per metric family of `COUNTED`; `/v1/metrics` reads them through
`resources/health.py`'s collector.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from orbit_core import events as ev
from orbit_core.ports import CommitBatch
from orbit_server import logs

# Metric family (without `_total`) -> the event type that increments it.
COUNTED: dict[str, str] = {
    "orbit_executions_started": "WorkflowCreated",
    "orbit_executions_completed": "WorkflowCompleted",
    "orbit_executions_failed": "WorkflowFailed",
    "orbit_executions_cancelled": "WorkflowCancelled",
    "orbit_executions_timed_out": "WorkflowTimedOut",
    "orbit_executions_continued_as_new": "WorkflowContinuedAsNew",
    "orbit_tasks_dispatched": "StepDispatched",
    "orbit_tasks_succeeded": "StepSucceeded",
    "orbit_task_attempts_failed": "StepAttemptFailed",
    "orbit_task_attempts_uncertain": "StepAttemptUncertain",
    "orbit_retries_scheduled": "RetryScheduled",
    "orbit_steps_skipped": "StepSkipped",
    "orbit_stale_results": "StaleResultIgnored",
    "orbit_compensations_started": "CompensationStarted",
    "orbit_compensations_failed": "CompensationFailed",
    # Issue 38: operator restarts (the old run's end) and forks (the new execution's start).
    "orbit_executions_restarted": "WorkflowRestarted",
    "orbit_executions_forked": "WorkflowForked",
    # Flow control: starts a concurrency limit held back, and later let in.
    "orbit_executions_delayed": "WorkflowWaiting",
    "orbit_executions_admitted": "WorkflowAdmitted",
}
# Beyond the book: operators' pauses and resumes (docs/operating-executions.md),
# shown once there was one (resources/health.py).
OPERATOR_COUNTED: dict[str, str] = {
    "orbit_executions_paused": "WorkflowPaused",
    "orbit_executions_resumed": "WorkflowResumed",
}
# Keyed by class: `type(event)` is one lookup, `event.TYPE` two.
_FAMILY_OF = {
    ev.EVENT_TYPES[event]: family for family, event in {**COUNTED, **OPERATOR_COUNTED}.items()
}
_STARTED = "orbit_executions_started"
EVENTS_COMMITTED = "orbit_events_committed"


Changes = list[tuple[str, str, list[ev.Event]]]


class Tracing(Protocol):
    """Where committed events go to become spans (`tracing.Tracer`, or
    `trace_export.TraceForwarder`, which makes them in another process)."""

    def committed(self, changes: Changes) -> Mapping[str, tuple[str, str]]:
        """Makes the spans; returns (trace id, root span id) in hex of each
        sampled execution of `changes`, for its log lines."""
        ...

    def traceparent(self, execution_id: str, unit: str) -> str | None:
        """The W3C trace context of the attempt of `unit` dispatched last."""
        ...

    def close(self) -> None:
        """Sends what is queued (for a bounded time) and stops."""
        ...


def new_events(batch: CommitBatch) -> Changes:
    """(execution id, workflow, events) of each execution the batch adds to.
    A run that ended with continue_as_new has its last events in `archived`,
    before the next run's."""
    return [
        (
            change.execution_id,
            change.row.workflow,
            [*change.archived, *change.events] if change.archived else change.events,
        )
        for change in batch.executions
        if change.archived or change.events
    ]


class Telemetry:
    """Counts, logs and traces committed events. Thread-safe: commits arrive
    from whichever engine thread leads a group."""

    def __init__(self, tracing: Tracing | None = None) -> None:
        self.tracing = tracing
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(
            [*COUNTED, *OPERATOR_COUNTED, EVENTS_COMMITTED], 0
        )
        self._log = logs.logger()

    def counts(self) -> dict[str, int]:
        """A snapshot of the event counters, by family name without `_total`."""
        with self._lock:
            return dict(self._counts)

    def committed(self, batch: CommitBatch) -> None:
        """Called once per committed batch; never raises."""
        try:
            if batch.offers and logs.enabled(logging.DEBUG):
                # Shared mode's queue: which tasks a server offered, and when.
                for offer in batch.offers:
                    self._log.debug(
                        "task offered",
                        execution_id=offer.execution_id,
                        step=logs.Quoted(offer.unit_key),
                        offer_seq=offer.offer_seq,
                    )
            changes = new_events(batch)
            if not changes:
                return
            self._count(changes)
            ids = self.tracing.committed(changes) if self.tracing is not None else {}
            self._log_events(changes, ids)
        except Exception as exc:  # the batch is durable: telemetry must not undo it
            self._log.error("recording telemetry of a commit failed", error=repr(exc), exc_info=exc)

    def _count(self, changes: Changes) -> None:
        family_of = _FAMILY_OF.get
        with self._lock:
            counts = self._counts
            for _id, _workflow, events in changes:
                counts[EVENTS_COMMITTED] += len(events)
                for event in events:
                    family = family_of(type(event))
                    if family is not None:
                        # The first event of a run after continue_as_new is a
                        # WorkflowCreated too; it starts no new execution.
                        if family == _STARTED and (event.run or 1) > 1:  # type: ignore[union-attr]
                            continue
                        counts[family] += 1

    def _log_events(self, changes: Changes, ids: Mapping[str, tuple[str, str]]) -> None:
        # One concrete logger per batch: the lazy proxy would build a new one
        # for every line (it follows `logs.configure`, which a batch outlives
        # no more than a line does).
        debug = logs.enabled(logging.DEBUG)
        plain = None
        for execution_id, _workflow, all_events in changes:
            # Most events make no line at info: they are passed over at once.
            events = all_events if debug else [e for e in all_events if type(e) in _LOGGED]
            if not events:
                continue
            if plain is None:
                plain = self._log.bind()
            traced = ids.get(execution_id)
            if traced is not None:
                # With tracing on, each line names the execution's trace and root span.
                log = plain.bind(trace_id=traced[0], span_id=traced[1])
            else:
                log = plain
            for event in events:
                if debug:
                    log.debug(
                        "event",
                        execution_id=execution_id,
                        seq=event.seq,
                        event_=logs.Quoted(event.TYPE),
                        **_step_field(event),
                    )
                _log_event(log, execution_id, event)


def _step_field(event: ev.Event) -> dict[str, Any]:
    step = getattr(event, "step", None)
    return {} if step is None else {"step": logs.Quoted(step)}


# The event types `_log_event` writes a line for (keep the two in step).
_LOGGED: frozenset[type] = frozenset(
    {
        ev.WorkflowCreated,
        ev.WorkflowCompleted,
        ev.WorkflowCancelled,
        ev.WorkflowFailed,
        ev.WorkflowTimedOut,
        ev.StepFailed,
        ev.RetryScheduled,
        ev.StepAttemptUncertain,
        ev.CancelRequested,
        ev.WorkflowPaused,
        ev.WorkflowResumed,
    }
)


def _log_event(log: Any, execution_id: str, event: ev.Event) -> None:
    """The chapter's per-event lines (never inputs, outputs or error details)."""
    match event:
        case ev.WorkflowCreated() if (event.run or 1) == 1:
            log.info(
                "execution started",
                execution_id=execution_id,
                workflow=event.workflow,
                version=event.version,
            )
        case ev.WorkflowCompleted():
            log.info("execution completed", execution_id=execution_id)
        case ev.WorkflowCancelled():
            log.info("execution cancelled", execution_id=execution_id)
        case ev.WorkflowFailed():
            log.warning(
                "execution failed",
                execution_id=execution_id,
                code=event.error.get("code"),
                error=event.error.get("message"),
                compensation=event.compensation,
            )
        case ev.WorkflowTimedOut():
            log.warning("execution timed out", execution_id=execution_id)
        case ev.StepFailed():
            log.warning(
                "step failed",
                execution_id=execution_id,
                step=event.step,
                code=event.error.get("code"),
                error=event.error.get("message"),
            )
        case ev.RetryScheduled():
            log.info(
                "retry scheduled",
                execution_id=execution_id,
                step=event.step,
                attempt=event.next_attempt,
                delay_ms=event.delay_ms,
            )
        case ev.StepAttemptUncertain():
            log.warning(
                "attempt outcome uncertain; redelivering",
                execution_id=execution_id,
                step=event.step,
                attempt=event.attempt,
                reason=event.reason,
            )
        case ev.CancelRequested() if event.reason in CHILD_NOT_NEEDED:
            log.info(
                "cancelling child workflow because its parent no longer needs it",
                execution_id=execution_id,
            )
        case ev.WorkflowPaused():
            log.info("execution paused", execution_id=execution_id, reason=event.reason)
        case ev.WorkflowResumed():
            log.info("execution resumed", execution_id=execution_id)
        case _:
            pass


# The reasons orbit_core's children component gives when it cancels a child.
CHILD_NOT_NEEDED = frozenset(
    {"parent step timed out", "parent workflow finished", "parent workflow aborted"}
)
