"""The WSGI application: `create_app(engine, config)` wires the resources.

Every route is added together with the `auth.Rule` of each method it serves
(chapter 45's permission matrix); the table goes to the `Gate` middleware,
which decides on the matched route and method. A route added to Falcon
without an entry in the table stops `create_app`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

import falcon
import falcon.constants
import falcon.inspect

from orbit_core.engine.facade import EngineApi
from orbit_core.errors import NotFoundError
from orbit_server import errors
from orbit_server.auth import (
    ADMIN,
    OPEN,
    WORKER,
    Rule,
    Subject,
    for_clients,
    framework_error,
    gate,
)
from orbit_server.batches import Batches
from orbit_server.config import WORKER_EXTENSIONS, ServerConfig
from orbit_server.identities import Identities
from orbit_server.openapi import PATH as OPENAPI_PATH
from orbit_server.openapi import OpenApi
from orbit_server.resources.archive import ArchivedExecutions
from orbit_server.resources.batches import BatchResource
from orbit_server.resources.executions import Executions
from orbit_server.resources.health import ClusterView, Health, Metrics, Ready
from orbit_server.resources.schedules import Schedules
from orbit_server.resources.ui import Root, Ui
from orbit_server.resources.versions import Versions
from orbit_server.resources.workers import WorkerProtocol, Workers
from orbit_server.resources.workflows import Workflows
from orbit_server.retention import Sweeper
from orbit_server.telemetry import Telemetry
from orbit_server.worker_calls import WorkerCalls

App = falcon.App[falcon.Request, falcon.Response]


class _Routes:
    """Adds routes to the app and records who may call each method."""

    def __init__(self, app: App) -> None:
        self._app = app
        self.rules: dict[tuple[str, str], Rule] = {}

    def add(
        self,
        template: str,
        resource: object,
        rules: Rule | Mapping[str, Rule],
        suffix: str = "",
    ) -> None:
        if suffix:
            self._app.add_route(template, resource, suffix=suffix)
        else:
            self._app.add_route(template, resource)
        for method in falcon.constants.COMBINED_METHODS:
            name = f"on_{method.lower()}" + (f"_{suffix}" if suffix else "")
            if hasattr(resource, name):
                rule = rules if isinstance(rules, Rule) else rules.get(method)
                if rule is None:
                    raise RuntimeError(f"{method} {template} has no access rule")
                self.rules[(template, method)] = rule


def telemetry_of(engine: EngineApi) -> Telemetry:
    """What the engine's store reports commits to (see `storage.LoggedStore`),
    or a fresh one that sees no commits (event counters stay at zero)."""
    found = getattr(engine.store, "telemetry", None)
    return found if isinstance(found, Telemetry) else Telemetry()


def worker_calls(
    engine: EngineApi,
    telemetry: Telemetry | None = None,
    extensions: Iterable[str] = WORKER_EXTENSIONS,
) -> WorkerCalls:
    """The worker protocol's calls, for the HTTP routes and the gRPC binding,
    with the protocol extensions the server offers."""
    return WorkerCalls(engine, (telemetry or telemetry_of(engine)).tracing, extensions)


def create_app(
    engine: EngineApi,
    config: ServerConfig,
    telemetry: Telemetry | None = None,
    *,
    calls: WorkerCalls | None = None,
    cluster: ClusterView | None = None,
    retention: Sweeper | None = None,
    batches: Batches | None = None,
) -> App:
    """`telemetry`: by default `telemetry_of(engine)`. `calls`: the worker
    protocol's calls when another binding shares them. `cluster`: the role a
    cluster server reports in health and readiness. `retention`: the
    sweeper of `--retention`, whose archive the archive routes read."""
    if telemetry is None:
        telemetry = telemetry_of(engine)
    app: App = falcon.App(cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = False
    errors.install(app)
    routes = _Routes(app)
    execution = Subject.EXECUTION

    routes.add("/v1/health", Health(engine, cluster, config.backend), OPEN)
    routes.add("/v1/ready", Ready(engine, cluster), OPEN)
    routes.add("/v1/metrics", Metrics(engine, telemetry, retention), ADMIN)
    routes.add(OPENAPI_PATH, OpenApi(), ADMIN)

    workflows = Workflows(engine, config.max_body, replace=config.dev)
    listed = for_clients("read", Subject.RESOURCE)
    routes.add("/v1/workflows", workflows, {"POST": ADMIN, "GET": listed})
    definition = for_clients("read", Subject.WORKFLOW)
    routes.add("/v1/workflows/{name}", workflows, definition, suffix="latest")
    routes.add("/v1/workflows/{name}/{version}", workflows, definition, suffix="version")
    # Versions in production (issue 41): the census and a migration's plan
    # are reads of the workflow; moving executions is an operator's act.
    versions = Versions(engine, config.max_body)
    routes.add("/v1/workflows/{name}/versions", versions, definition)
    routes.add(
        "/v1/workflows/{name}/migrations",
        versions,
        {"GET": for_clients("read", Subject.WORKFLOW), "POST": ADMIN},
        suffix="plan",
    )

    executions = Executions(engine, config.max_body, retention)
    started = for_clients("start", Subject.RESOURCE)
    routes.add("/v1/executions", executions, {"POST": started, "GET": listed})
    read = for_clients("read", execution)
    routes.add("/v1/executions/{execution_id}", executions, read, suffix="one")
    for action in ("history", "wait"):
        routes.add(f"/v1/executions/{{execution_id}}/{action}", executions, read, suffix=action)
    routes.add(
        "/v1/executions/{execution_id}/cancel",
        executions,
        for_clients("cancel", execution),
        suffix="cancel",
    )
    # Issue 38 (docs/restart-and-fork.md): a restart ends the current run,
    # so it needs the `cancel` permission; a fork starts an execution of the
    # same workflow, so it needs `start`. Their dry runs need the same.
    routes.add(
        "/v1/executions/{execution_id}/restart",
        executions,
        for_clients("cancel", execution),
        suffix="restart",
    )
    routes.add(
        "/v1/executions/{execution_id}/fork",
        executions,
        for_clients("start", execution),
        suffix="fork",
    )
    # Beyond the book (docs/operating-executions.md): whoever may cancel an
    # execution may also hold it and let it go.
    for action in ("pause", "resume"):
        routes.add(
            f"/v1/executions/{{execution_id}}/{action}",
            executions,
            for_clients("cancel", execution),
            suffix=action,
        )
    routes.add(
        "/v1/executions/{execution_id}/signals/{name}",
        executions,
        for_clients("signal", execution),
        suffix="signal",
    )
    routes.add(
        "/v1/executions/{execution_id}/queries/{name}",
        executions,
        for_clients("query", execution),
        suffix="query",
    )

    if retention is not None:
        archived = ArchivedExecutions(retention.archive, engine.typed_filter)
        routes.add("/v1/archive/executions", archived, {"GET": listed})
        routes.add("/v1/archive/executions/{execution_id}", archived, read, suffix="one")
        routes.add(
            "/v1/archive/executions/{execution_id}/history", archived, read, suffix="history"
        )

    if batches is not None:
        # Beyond the book (docs/operating-executions.md): every server (a
        # standby refuses the POST as any write, before this app).
        operated = for_clients("cancel", Subject.RESOURCE)
        jobs = BatchResource(batches, config.max_body)
        routes.add("/v1/batches", jobs, {"POST": operated, "GET": operated})
        routes.add("/v1/batches/{batch_id}", jobs, operated, suffix="one")

    schedules = Schedules(engine, config.max_body)
    managed = for_clients("schedule", Subject.RESOURCE)
    routes.add("/v1/schedules", schedules, {"POST": managed, "GET": managed})
    schedule = for_clients("schedule", Subject.SCHEDULE)
    routes.add("/v1/schedules/{schedule_id}", schedules, schedule, suffix="one")
    for action in ("pause", "resume", "trigger"):
        routes.add(f"/v1/schedules/{{schedule_id}}/{action}", schedules, schedule, suffix=action)

    calls = calls or worker_calls(engine, telemetry, config.worker_extensions)
    routes.add("/v1/workers", Workers(engine, calls.task_use), ADMIN)
    protocol = WorkerProtocol(calls, config.max_body)
    for action in ("register", "heartbeat", "poll", "unregister"):
        routes.add(f"/v1/workers/{action}", protocol, WORKER, suffix=action)
    for action in ("complete", "fail"):
        routes.add(f"/v1/tasks/{action}", protocol, WORKER, suffix=action)

    if config.ui:
        routes.add("/", Root(), OPEN)
        ui = Ui()
        routes.add("/ui/", ui, OPEN)
        routes.add("/ui/{asset}", ui, OPEN, suffix="asset")

    declared = {template for template, _ in routes.rules}
    undeclared = {r.path for r in falcon.inspect.inspect_routes(app)} - declared
    if undeclared:
        raise RuntimeError(f"routes without an access rule: {sorted(undeclared)}")
    app.add_error_handler(falcon.HTTPError, framework_error)
    app.add_middleware(
        gate(
            config.token,
            config.worker_token,
            config.max_body,
            MappingProxyType(routes.rules),
            identities=config.identities or Identities(),
            workflow_of=lambda execution_id: _workflow_of(engine, retention, execution_id),
            schedule_of=engine.schedules.workflow_of,
            mtls=config.tls_client_ca is not None,
        )
    )
    return app


def _workflow_of(engine: EngineApi, retention: Sweeper | None, execution_id: str) -> str:
    """The workflow of an execution, live or (with retention) archived."""
    try:
        return engine.state(execution_id).workflow
    except NotFoundError:
        found = None if retention is None else retention.archive.get(execution_id)
        if found is None:
            raise
        return found.summary["workflow"]
