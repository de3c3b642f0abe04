"""GET /v1/health, /v1/ready and /v1/metrics.

A cluster server (`ClusterView`) adds its role, node id, term and leader to
both health and readiness, and is ready only while it leads (chapter 44).

While a part of the engine fails (the store refuses commits, the ticker keeps
raising) `/v1/health` still answers 200 but says `"status": "degraded"` and
adds `degraded`, in the way the book adds fields for other modes: each
failing component with what kind of failure it is, never the error's text.
The route is open, and a store's errors name the database (its user, host
and name: a PostgreSQL URL with only its password hidden), so the document
says only the kind of database and `STORAGE_ERROR`, and for another
component the exception's type; the server's log has the whole message
(issue 36).

`/v1/metrics` is every family of chapter 46 through prometheus-client: a
collector reads the counters at each scrape (events from `Telemetry`, which
counts committed events; schedules and gauges from the engine), and counts
every failure the engine handled in `orbit_engine_faults_total`. Like the
book's families it has no label (only `orbit_schedules_skipped_total` has
one, `reason`): which component failed is in the error log line of each
fault and in `/v1/health`'s `degraded` while it lasts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import falcon
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from orbit_core.engine.facade import EngineApi
from orbit_core.ir import IR_VERSIONS
from orbit_server import __version__
from orbit_server.auth import API_VERSION
from orbit_server.resources._json import send
from orbit_server.retention import Sweeper
from orbit_server.telemetry import Telemetry

PROMETHEUS = "text/plain; version=0.0.4"


class ClusterView(Protocol):
    """What a cluster server adds to health and readiness (orbit_server/cluster.py)."""

    def fields(self) -> dict[str, object]:
        """`role`, `node_id`, `term` and `leader` as this server sees them."""
        ...

    def serving(self) -> bool:
        """Whether this server accepts writes now (the leader within its lease)."""
        ...


class Health:
    """Each call asks the store whether it can write now (the store
    rate-limits its trial writes): so a store fault ends without waiting for
    the next commit, which an idle server never makes, and a database that
    went away under an idle server shows as a degraded store."""

    def __init__(
        self, engine: EngineApi, cluster: ClusterView | None = None, database: str = "sqlite"
    ) -> None:
        self._engine = engine
        self._cluster = cluster
        # The kind of database (`sqlite`, `postgres`), all a failure shows of it.
        self._database = database
        self._problem: Callable[[], str | None] | None = getattr(
            engine.store, "write_problem", None
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        stats = self._engine.health()
        faults = self._engine.faults
        problem = self._problem() if self._problem is not None else None
        if "store" in faults.failing() and self._problem is not None and problem is None:
            faults.recovered("store")
        failing = dict(faults.failing())
        if problem is not None:
            # Noticed by the store's own check (a database gone while idle),
            # before any commit failed.
            failing.setdefault("store", problem)
        body: dict[str, object] = {
            "status": "degraded" if failing else "ok",
            "api_version": API_VERSION,
            "runtime_version": __version__,
            "ir_versions": list(IR_VERSIONS),
            "active_executions": stats["active_executions"],
            "worker_sessions": stats["worker_sessions"],
            "role": "single",
            "node_id": None,
            "term": None,
            "leader": None,
        }
        if self._cluster is not None:
            body.update(self._cluster.fields())
        if failing:
            body["degraded"] = {
                component: self._public(component, failure)
                for component, failure in failing.items()
            }
        send(resp, body)

    def _public(self, component: str, failure: str) -> str:
        """What anyone may read of a component's failure."""
        if component == "store":
            return f"{self._database}: STORAGE_ERROR (details in the server's log)"
        kind = failure.partition(":")[0]
        if not kind.isidentifier():
            kind = "failing"
        return f"{kind} (details in the server's log)"


class Ready:
    """A single server is ready while its store can write: 503 (same body,
    `ready: false`) while it cannot, e.g. its database file was removed or
    the last commit failed and a trial write fails too. A store without a
    `write_problem` check (the in-memory one) is always ready."""

    def __init__(self, engine: EngineApi | None = None, cluster: ClusterView | None = None) -> None:
        self._problem: Callable[[], str | None] | None = getattr(
            getattr(engine, "store", None), "write_problem", None
        )
        self._cluster = cluster

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        body: dict[str, object] = {"role": "single"}
        ready = True
        if self._cluster is not None:
            # A standby is alive but not ready: only the leader takes writes.
            body = self._cluster.fields()
            ready = self._cluster.serving()
        ready = ready and (self._problem is None or self._problem() is None)
        body["ready"] = ready
        send(resp, body, 200 if ready else 503)


# HELP text of each family (the chapter's example words where it shows them).
HELP: dict[str, str] = {
    "orbit_executions_started": "Executions started",
    "orbit_executions_completed": "Executions completed",
    "orbit_executions_failed": "Executions failed",
    "orbit_executions_cancelled": "Executions cancelled",
    "orbit_executions_timed_out": "Executions timed out",
    "orbit_tasks_dispatched": "Task attempts dispatched, redeliveries included",
    "orbit_tasks_succeeded": "Units that succeeded, compensations included",
    "orbit_task_attempts_failed": "Task attempts that failed, retried or not",
    "orbit_task_attempts_uncertain": "Task attempts whose outcome is unknown",
    "orbit_retries_scheduled": "Retries scheduled",
    "orbit_steps_skipped": "Steps skipped by their when condition",
    "orbit_stale_results": "Late or duplicate task results ignored",
    "orbit_compensations_started": "Executions that started compensating",
    "orbit_compensations_failed": "Compensations that failed for good",
    "orbit_events_committed": "History events committed",
    "orbit_executions_continued_as_new": "Runs ended by continue_as_new",
    "orbit_executions_restarted": "Runs ended by an operator's restart",
    "orbit_executions_forked": "Executions started by an operator's fork",
    "orbit_executions_delayed": "Executions a concurrency limit held back",
    "orbit_executions_admitted": "Held-back executions let in by a freed slot",
}
# Beyond the book (docs/operating-executions.md): written only once the
# process has seen a pause, so a server nobody pauses on answers exactly the
# chapter's families.
OPERATOR_HELP: dict[str, str] = {
    "orbit_executions_paused": "Executions paused by an operator",
    "orbit_executions_resumed": "Paused executions resumed",
}


class EngineCollector(Collector):
    """The families of chapter 46 (and `orbit_engine_faults_total`), read at
    each scrape: event counters from `Telemetry`, schedule counters and the
    gauges from the engine, fault counts from its `Faults` port."""

    def __init__(self, engine: EngineApi, telemetry: Telemetry) -> None:
        self._engine = engine
        self._telemetry = telemetry

    def collect(self) -> Iterator[Metric]:
        counts = self._telemetry.counts()
        for family, text in HELP.items():
            yield CounterMetricFamily(family, text, value=counts.get(family, 0))
        if counts.get("orbit_executions_paused"):
            for family, text in OPERATOR_HELP.items():
                yield CounterMetricFamily(family, text, value=counts.get(family, 0))
        stats = self._engine.health()
        yield CounterMetricFamily(
            "orbit_schedules_fired",
            "Schedule occurrences that started an execution",
            value=stats.get("schedules_fired", 0),
        )
        skipped = CounterMetricFamily(
            "orbit_schedules_skipped",
            "Schedule occurrences that started nothing",
            labels=["reason"],
        )
        skipped.add_metric(["overlap"], stats.get("schedules_skipped_overlap", 0))
        skipped.add_metric(["missed"], stats.get("schedules_skipped_missed", 0))
        yield skipped
        yield from _flow_families(stats)
        yield CounterMetricFamily(
            "orbit_engine_faults",
            "Failures the engine handled itself, all components together",
            value=sum(self._engine.faults.counts().values()),
        )
        yield GaugeMetricFamily(
            "orbit_active_executions",
            "Executions not yet finished",
            value=stats["active_executions"],
        )
        yield GaugeMetricFamily(
            "orbit_worker_sessions",
            "Registered worker sessions",
            value=stats["worker_sessions"],
        )


def _flow_families(stats: dict[str, int]) -> Iterator[Metric]:
    """Start rates and debounce (docs/language/flow-control.md), beyond the
    book: each family only once the process has used it, so a server whose
    workflows declare neither answers exactly the chapter's families."""
    delayed, dropped = stats.get("rate_delayed", 0), stats.get("rate_dropped", 0)
    if delayed or dropped:
        limited = CounterMetricFamily(
            "orbit_executions_rate_limited",
            "Starts a workflow's rate limit held back (delayed) or refused (dropped)",
            labels=["outcome"],
        )
        limited.add_metric(["delayed"], delayed)
        limited.add_metric(["dropped"], dropped)
        yield limited
    debounced = stats.get("debounced", 0)
    if debounced:
        yield CounterMetricFamily(
            "orbit_executions_debounced",
            "Starts folded into a pending debounced execution (its input replaced)",
            value=debounced,
        )


class RetentionCollector(Collector):
    """`--retention`'s families (beyond the book, so only on a server that
    sweeps): what was swept and archived, and how far behind the sweeper is."""

    def __init__(self, sweeper: Sweeper) -> None:
        self._sweeper = sweeper

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "orbit_retention_swept",
            "Finished executions deleted by retention",
            value=self._sweeper.swept_total,
        )
        yield CounterMetricFamily(
            "orbit_retention_archived",
            "Finished executions written to the archive by retention",
            value=self._sweeper.archived_total,
        )
        yield GaugeMetricFamily(
            "orbit_retention_oldest_eligible_age_seconds",
            "How long the oldest execution eligible for retention has waited to be swept",
            value=self._sweeper.oldest_eligible_age_s(),
        )


class Metrics:
    """Prometheus text exposition (format 0.0.4) through prometheus-client,
    from a registry of this app's own: counters reset when the server starts."""

    def __init__(
        self, engine: EngineApi, telemetry: Telemetry, retention: Sweeper | None = None
    ) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(EngineCollector(engine, telemetry))
        if retention is not None:
            self._registry.register(RetentionCollector(retention))

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = PROMETHEUS
        resp.data = generate_latest(self._registry)
