"""The WSGI application: `create_app(engine, config)` wires the resources."""

from __future__ import annotations

import falcon

from orbit_core.engine import Engine
from orbit_server import errors
from orbit_server.auth import Gate
from orbit_server.config import ServerConfig
from orbit_server.resources.executions import Executions
from orbit_server.resources.health import Health, Metrics, Ready
from orbit_server.resources.ui import Root, Ui
from orbit_server.resources.workers import WorkerProtocol, Workers
from orbit_server.resources.workflows import Workflows


def create_app(engine: Engine, config: ServerConfig) -> falcon.App[falcon.Request, falcon.Response]:
    app = falcon.App(
        middleware=[Gate(config.token, config.worker_token, config.max_body)],
        cors_enable=False,
    )
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = False
    errors.install(app)

    app.add_route("/v1/health", Health(engine))
    app.add_route("/v1/ready", Ready(engine))
    app.add_route("/v1/metrics", Metrics(engine))

    workflows = Workflows(engine, config.max_body)
    app.add_route("/v1/workflows", workflows)
    app.add_route("/v1/workflows/{name}", workflows, suffix="latest")
    app.add_route("/v1/workflows/{name}/{version}", workflows, suffix="version")

    executions = Executions(engine, config.max_body)
    app.add_route("/v1/executions", executions)
    app.add_route("/v1/executions/{execution_id}", executions, suffix="one")
    for action in ("history", "wait", "cancel"):
        app.add_route(f"/v1/executions/{{execution_id}}/{action}", executions, suffix=action)
    app.add_route("/v1/executions/{execution_id}/signals/{name}", executions, suffix="signal")
    app.add_route("/v1/executions/{execution_id}/queries/{name}", executions, suffix="query")

    app.add_route("/v1/workers", Workers(engine))
    protocol = WorkerProtocol(engine, config.max_body)
    for action in ("register", "heartbeat", "poll", "unregister"):
        app.add_route(f"/v1/workers/{action}", protocol, suffix=action)
    for action in ("complete", "fail"):
        app.add_route(f"/v1/tasks/{action}", protocol, suffix=action)

    if config.ui:
        app.add_route("/", Root())
        app.add_route("/ui/", Ui())
    return app
