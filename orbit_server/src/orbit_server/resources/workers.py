"""GET /v1/workers and the worker protocol's HTTP/JSON binding (chapter 68).

A per-worker identity's rules (chapter 45) are checked here for a
registration (`auth.check_register`) and by the engine for everything else:
each call passes the worker id the credential is bound to."""

from __future__ import annotations

import contextlib
import functools
from collections import OrderedDict
from collections.abc import Mapping

import falcon

from orbit_core.api import Assignment
from orbit_core.engine import Engine
from orbit_core.errors import OrbitError
from orbit_server.auth import bound_worker, check_register
from orbit_server.body import Fields, read_json
from orbit_server.logs import logger
from orbit_server.resources._json import send
from orbit_server.resources._peer import connection_probe, handed_over
from orbit_server.tracing import Tracer

_log = logger()
_SESSIONS_KEPT = 10_000


class Workers:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send(resp, self._engine.list_workers())


class WorkerProtocol:
    """Every call is a POST with a JSON body; unknown fields are ignored."""

    def __init__(self, engine: Engine, max_body: int, tracer: Tracer | None = None) -> None:
        self._engine = engine
        self._max_body = max_body
        # With tracing on, a task carries its attempt's span as `traceparent`.
        self._tracer = tracer
        # Session -> worker id, for the "worker unregistered" line.
        self._sessions: OrderedDict[str, str] = OrderedDict()

    def _fields(self, req: falcon.Request) -> Fields:
        return Fields(read_json(req, self._max_body, required=True))

    def on_post_register(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        worker_id = body.required_string("worker_id")
        runtime = body.required_string("runtime")
        contracts = body.objects("contracts", "task_name", "contract_version")
        check_register(req, worker_id, runtime, (c["task_name"] for c in contracts))
        answer = self._engine.register_worker(worker_id, runtime, contracts, body.string("sdk"))
        session = answer.get("worker_session_id")
        if isinstance(session, str):
            if len(self._sessions) >= _SESSIONS_KEPT:  # sessions lost without unregistering
                with contextlib.suppress(KeyError):
                    self._sessions.popitem(last=False)
            self._sessions[session] = worker_id
        _log.info(
            "worker registered",
            worker_id=worker_id,
            runtime=runtime.lower(),
            tasks=",".join(c["task_name"] for c in contracts),
        )
        send(resp, answer)

    def on_post_heartbeat(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self._fields(req).required_string("worker_session_id")
        send(resp, self._engine.heartbeat(session, worker=bound_worker(req)))

    def on_post_poll(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        session = body.required_string("worker_session_id")
        connected = connection_probe(req.env)
        task = self._engine.poll(
            session, body.integer("wait_ms"), connected, worker=bound_worker(req)
        )
        if task is None:
            resp.status = 204
            return
        document: Mapping[str, object] = task
        if self._tracer is not None:
            parent = self._tracer.traceparent(task["execution_id"], task["step_id"])
            if parent is not None:
                document = {**task, "traceparent": parent}
        undelivered = functools.partial(self._undelivered, task)
        send(resp, document, stream=lambda data: handed_over(data, connected, undelivered))

    def _undelivered(self, task: Assignment) -> None:
        """The worker hung up before its task reached it: the attempt is
        redelivered now rather than after the session timeout."""
        _log.warning(
            "task not delivered: the worker hung up",
            execution_id=task["execution_id"],
            step=task["step_id"],
            attempt=task["attempt"],
        )
        try:
            self._engine.undelivered(task["token"])
        except OrbitError as exc:  # closing down: the session timeout covers it
            _log.warning("cannot mark the attempt uncertain", error=exc.message)

    def on_post_unregister(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self._fields(req).required_string("worker_session_id")
        send(resp, self._engine.unregister(session, worker=bound_worker(req)))
        _log.info("worker unregistered", worker_id=self._sessions.pop(session, None))

    def on_post_complete(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        send(
            resp,
            self._engine.complete(
                body.required_string("token"), body.any("output"), worker=bound_worker(req)
            ),
        )

    def on_post_fail(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._fields(req)
        send(
            resp,
            self._engine.fail(
                body.required_string("token"),
                body.required_string("error_code"),
                body.string("error_message") or "",
                body.boolean("retryable", True),
                body.any("details"),
                worker=bound_worker(req),
            ),
        )
