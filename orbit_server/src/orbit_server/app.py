"""The WSGI application: `create_app(engine, config)` wires the resources.

Every route is added together with its `Access` (chapter 67's route table);
the table goes to the `Gate` middleware, which decides on the matched route.
A route added to Falcon without an entry in the table stops `create_app`.
"""

from __future__ import annotations

from types import MappingProxyType

import falcon
import falcon.inspect

from orbit_core.engine import Engine
from orbit_server import errors
from orbit_server.auth import Access, Gate
from orbit_server.config import ServerConfig
from orbit_server.resources.executions import Executions
from orbit_server.resources.health import Health, Metrics, Ready
from orbit_server.resources.schedules import Schedules
from orbit_server.resources.ui import Root, Ui
from orbit_server.resources.workers import WorkerProtocol, Workers
from orbit_server.resources.workflows import Workflows
from orbit_server.telemetry import Telemetry
from orbit_server.tracing import Tracer

App = falcon.App[falcon.Request, falcon.Response]


class _Routes:
    """Adds routes to the app and records who may call each."""

    def __init__(self, app: App) -> None:
        self._app = app
        self.access: dict[str, Access] = {}

    def add(self, template: str, resource: object, access: Access, suffix: str = "") -> None:
        if suffix:
            self._app.add_route(template, resource, suffix=suffix)
        else:
            self._app.add_route(template, resource)
        self.access[template] = access


def create_app(engine: Engine, config: ServerConfig, telemetry: Telemetry | None = None) -> App:
    """`telemetry` is what the engine's store reports commits to (see
    `storage.LoggedStore`); by default the one found on `engine.store`, or a
    fresh one that sees no commits (event counters stay at zero)."""
    if telemetry is None:
        found = getattr(engine.store, "telemetry", None)
        telemetry = found if isinstance(found, Telemetry) else Telemetry()
    app: App = falcon.App(cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = False
    errors.install(app)
    routes = _Routes(app)
    open_, worker, admin = Access.OPEN, Access.WORKER, Access.ADMIN

    routes.add("/v1/health", Health(engine), open_)
    routes.add("/v1/ready", Ready(engine), open_)
    routes.add("/v1/metrics", Metrics(engine, telemetry), admin)

    workflows = Workflows(engine, config.max_body)
    routes.add("/v1/workflows", workflows, admin)
    routes.add("/v1/workflows/{name}", workflows, admin, suffix="latest")
    routes.add("/v1/workflows/{name}/{version}", workflows, admin, suffix="version")

    executions = Executions(engine, config.max_body)
    routes.add("/v1/executions", executions, admin)
    routes.add("/v1/executions/{execution_id}", executions, admin, suffix="one")
    for action in ("history", "wait", "cancel"):
        routes.add(f"/v1/executions/{{execution_id}}/{action}", executions, admin, suffix=action)
    routes.add("/v1/executions/{execution_id}/signals/{name}", executions, admin, suffix="signal")
    routes.add("/v1/executions/{execution_id}/queries/{name}", executions, admin, suffix="query")

    # Client identities with the `schedule` action will need their own rule here.
    schedules = Schedules(engine, config.max_body)
    routes.add("/v1/schedules", schedules, admin)
    routes.add("/v1/schedules/{schedule_id}", schedules, admin, suffix="one")
    for action in ("pause", "resume", "trigger"):
        routes.add(f"/v1/schedules/{{schedule_id}}/{action}", schedules, admin, suffix=action)

    routes.add("/v1/workers", Workers(engine), admin)
    tracer = telemetry.tracing if isinstance(telemetry.tracing, Tracer) else None
    protocol = WorkerProtocol(engine, config.max_body, tracer)
    for action in ("register", "heartbeat", "poll", "unregister"):
        routes.add(f"/v1/workers/{action}", protocol, worker, suffix=action)
    for action in ("complete", "fail"):
        routes.add(f"/v1/tasks/{action}", protocol, worker, suffix=action)

    if config.ui:
        routes.add("/", Root(), open_)
        routes.add("/ui/", Ui(), open_)

    undeclared = {r.path for r in falcon.inspect.inspect_routes(app)} - routes.access.keys()
    if undeclared:
        raise RuntimeError(f"routes without an access rule: {sorted(undeclared)}")
    app.add_middleware(
        Gate(config.token, config.worker_token, config.max_body, MappingProxyType(routes.access))
    )
    return app
