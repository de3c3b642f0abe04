"""GET /v1/health, /v1/ready and /v1/metrics.

While a part of the engine fails (the store refuses commits, the ticker keeps
raising) `/v1/health` still answers 200 but says `"status": "degraded"` and
adds `degraded`, each failing component with its last error, in the way the
book adds fields for other modes. `/v1/metrics` counts every failure the
engine handled in `orbit_engine_faults_total{component=...}`."""

from __future__ import annotations

from collections.abc import Callable

import falcon

from orbit_core.engine import Engine
from orbit_core.ir import IR_VERSIONS
from orbit_core.ports import FAULT_COMPONENTS
from orbit_server import __version__
from orbit_server.auth import API_VERSION
from orbit_server.resources._json import send

PROMETHEUS = "text/plain; version=0.0.4"


class Health:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        stats = self._engine.health()
        failing = dict(self._engine.faults.failing())
        body = {
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
        if failing:
            body["degraded"] = failing
        send(resp, body)


class Ready:
    """A single server is ready while its store can write: 503 (same body,
    `ready: false`) while it cannot, e.g. its database file was removed or
    the last commit failed and a trial write fails too. A store without a
    `write_problem` check (the in-memory one) is always ready."""

    def __init__(self, engine: Engine | None = None) -> None:
        self._problem: Callable[[], str | None] | None = getattr(
            getattr(engine, "store", None), "write_problem", None
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        ready = self._problem is None or self._problem() is None
        send(resp, {"role": "single", "ready": ready}, 200 if ready else 503)


class Metrics:
    """Prometheus text exposition of the engine's counters (reset at start)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        stats = self._engine.health()
        lines: list[str] = []

        def metric(name: str, kind: str, text: str, *samples: tuple[str, int]) -> None:
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {value}" for labels, value in samples)

        metric(
            "orbit_executions_started_total",
            "counter",
            "Executions started",
            ("", stats["started"]),
        )
        metric(
            "orbit_executions_continued_as_new_total",
            "counter",
            "Runs ended by continue_as_new",
            ("", stats["continued_as_new"]),
        )
        metric(
            "orbit_schedules_fired_total",
            "counter",
            "Schedule occurrences that started an execution",
            ("", stats.get("schedules_fired", 0)),
        )
        metric(
            "orbit_schedules_skipped_total",
            "counter",
            "Schedule occurrences that started nothing",
            ('{reason="overlap"}', stats.get("schedules_skipped_overlap", 0)),
            ('{reason="missed"}', stats.get("schedules_skipped_missed", 0)),
        )
        faults = self._engine.faults.counts()
        components = [*FAULT_COMPONENTS, *sorted(set(faults) - set(FAULT_COMPONENTS))]
        metric(
            "orbit_engine_faults_total",
            "counter",
            "Failures the engine handled itself, by component",
            *((f'{{component="{c}"}}', faults.get(c, 0)) for c in components),
        )
        metric(
            "orbit_active_executions",
            "gauge",
            "Executions not yet finished",
            ("", stats["active_executions"]),
        )
        metric(
            "orbit_worker_sessions",
            "gauge",
            "Worker sessions the runtime remembers",
            ("", stats["worker_sessions"]),
        )
        resp.content_type = PROMETHEUS
        resp.text = "\n".join(lines) + "\n"
