"""GET /v1/workers and the worker protocol's HTTP/JSON binding (chapter 68).

This binding reads JSON bodies and hands each call to `worker_calls`, which
the gRPC binding shares: a per-worker identity's rules (chapter 45) are
checked there for a registration (`auth.check_register`) and by the engine
for everything else, with the worker id the credential is bound to."""

from __future__ import annotations

import functools
from typing import cast

import falcon

from orbit_core.engine.facade import EngineApi
from orbit_server.auth import caller
from orbit_server.body import Fields, read_json
from orbit_server.contract_check import presented
from orbit_server.resources._json import send
from orbit_server.resources._peer import connection_probe, handed_over
from orbit_server.task_use import TaskUse
from orbit_server.worker_calls import WorkerCalls


class Workers:
    def __init__(self, engine: EngineApi, task_use: TaskUse | None = None) -> None:
        self._engine = engine
        self._task_use = task_use or TaskUse()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        listed = self._engine.workers.list()
        # Announced tasks no deployed workflow calls: `unused_contracts`, only when some.
        workers = cast(list[dict[str, object]], listed["workers"])
        self._task_use.mark(self._engine, workers)
        send(resp, listed)


class WorkerProtocol:
    """Every call is a POST with a JSON body; unknown fields are ignored."""

    def __init__(self, calls: WorkerCalls, max_body: int) -> None:
        self._calls = calls
        self._max_body = max_body

    def _fields(self, req: falcon.Request) -> Fields:
        return Fields(read_json(req, self._max_body, required=True))

    def on_post_register(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        worker_id = body.required_string("worker_id")
        runtime = body.required_string("runtime")
        contracts = body.objects("contracts", "task_name", "contract_version")
        hashes = [
            found
            for i, entry in enumerate(body.raw_list("contracts"))
            if (found := presented(entry, f"contracts[{i}]")) is not None
        ]
        send(
            resp,
            self._calls.register(
                caller(req), worker_id, runtime, contracts, body.string("sdk"), presented=hashes
            ),
        )

    def on_post_heartbeat(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self._fields(req).required_string("worker_session_id")
        send(resp, self._calls.heartbeat(caller(req), session))

    def on_post_poll(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        session = body.required_string("worker_session_id")
        connected = connection_probe(req.env)
        task = self._calls.poll(caller(req), session, body.integer("wait_ms"), connected)
        if task is None:
            resp.status = 204
            return
        undelivered = functools.partial(self._calls.undelivered, task)
        send(resp, task, stream=lambda data: handed_over(data, connected, undelivered))

    def on_post_unregister(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self._fields(req).required_string("worker_session_id")
        send(resp, self._calls.unregister(caller(req), session))

    def on_post_complete(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        send(
            resp,
            self._calls.complete(caller(req), body.required_string("token"), body.any("output")),
        )

    def on_post_fail(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        send(
            resp,
            self._calls.fail(
                caller(req),
                body.required_string("token"),
                error_code=body.required_string("error_code"),
                error_message=body.string("error_message") or "",
                retryable=body.boolean("retryable", True),
                details=body.any("details"),
            ),
        )
