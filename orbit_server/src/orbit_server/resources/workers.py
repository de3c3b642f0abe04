"""GET /v1/workers and the worker protocol's HTTP/JSON binding (chapter 68).

This binding reads JSON bodies and hands each call to `worker_calls`, which
the gRPC binding shares: a per-worker identity's rules (chapter 45) are
checked there for a registration (`auth.check_register`) and by the engine
for everything else, with the worker id the credential is bound to.

A result may carry the poll that follows it (the `result-then-poll`
extension, worker_calls.py): `"poll": {"worker_session_id", "wait_ms"}` in
the complete or fail body. The whole body is read and checked before the
result is reported, so a malformed poll is refused (422) with the result
untouched; the answer is the result's, with `task` (the next task, or null
when none came within wait_ms) or, when the poll could not be made,
`poll_error` (the error object the poll alone would have had). A server
that does not offer the extension ignores the field, as the book has it do
with any field it does not know."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import attrs
import falcon

from orbit_core.api import Accepted
from orbit_core.engine.facade import EngineApi
from orbit_server.auth import caller
from orbit_server.body import Fields, read_json
from orbit_server.contract_check import presented
from orbit_server.errors import bad_body
from orbit_server.resources._json import send
from orbit_server.resources._peer import connection_probe, handed_over
from orbit_server.task_use import TaskUse
from orbit_server.worker_calls import NextPoll, ThenPolled, WorkerCalls


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
        answer = self._calls.register(
            caller(req),
            worker_id,
            runtime,
            contracts,
            body.string("sdk"),
            presented=hashes,
            asked=_names(body.any("extensions")),
        )
        send(resp, answer)

    def on_post_heartbeat(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self._fields(req).required_string("worker_session_id")
        send(resp, self._calls.heartbeat(caller(req), session))

    def on_post_poll(self, req: falcon.Request, resp: falcon.Response) -> None:
        session, wait_ms = poll_fields(self._fields(req))
        connected = connection_probe(req.env)
        task = self._calls.poll(caller(req), session, wait_ms, connected)
        if task is None:
            resp.status = 204
            return
        undelivered = functools.partial(self._calls.undelivered, task)
        send(resp, task, stream=lambda data: handed_over(data, connected, undelivered))

    def on_post_unregister(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self._fields(req).required_string("worker_session_id")
        send(resp, self._calls.unregister(caller(req), session))

    def on_post_complete(self, req: falcon.Request, resp: falcon.Response) -> None:
        token, output, poll = complete_fields(self._fields(req), self._calls.result_then_poll)
        who = caller(req)
        if poll is None:
            send(resp, self._calls.complete(who, token, output))
            return
        connected = connection_probe(req.env)
        ack, found = self._calls.complete_then_poll(who, token, output, poll, connected)
        self._answer(resp, ack, found, connected)

    def on_post_fail(self, req: falcon.Request, resp: falcon.Response) -> None:
        failed = fail_fields(self._fields(req), self._calls.result_then_poll)
        who = caller(req)
        if failed.poll is None:
            send(
                resp,
                self._calls.fail(
                    who,
                    failed.token,
                    error_code=failed.error_code,
                    error_message=failed.error_message,
                    retryable=failed.retryable,
                    details=failed.details,
                ),
            )
            return
        connected = connection_probe(req.env)
        ack, found = self._calls.fail_then_poll(
            who,
            failed.token,
            error_code=failed.error_code,
            error_message=failed.error_message,
            retryable=failed.retryable,
            details=failed.details,
            poll=failed.poll,
            connected=connected,
        )
        self._answer(resp, ack, found, connected)

    def _answer(
        self,
        resp: falcon.Response,
        ack: Accepted,
        found: ThenPolled,
        connected: Callable[[], bool] | None,
    ) -> None:
        """The result's answer, with what its poll found."""
        answer = then_polled(ack, found)
        task = found.task
        if task is None:
            send(resp, answer)
            return
        undelivered: Callable[[], None] = functools.partial(self._calls.undelivered, task)
        send(resp, answer, stream=lambda data: handed_over(data, connected, undelivered))


# ---- the hot calls' fields and answers, shared with the worker loop


@attrs.frozen(slots=True)
class FailFields:
    token: str
    error_code: str
    error_message: str
    retryable: bool
    details: Any
    poll: NextPoll | None


def poll_fields(body: Fields) -> tuple[str, int | None]:
    """A poll's session and wait."""
    return body.required_string("worker_session_id"), body.integer("wait_ms")


def complete_fields(body: Fields, result_then_poll: bool) -> tuple[str, Any, NextPoll | None]:
    """A success's token, output and the poll it carries (when offered)."""
    token = body.required_string("token")
    poll = _next_poll(body, result_then_poll)
    return token, body.any("output"), poll


def fail_fields(body: Fields, result_then_poll: bool) -> FailFields:
    """A failure's fields and the poll it carries (when offered)."""
    return FailFields(
        body.required_string("token"),
        body.required_string("error_code"),
        body.string("error_message") or "",
        body.boolean("retryable", True),
        body.any("details"),
        _next_poll(body, result_then_poll),
    )


def _next_poll(body: Fields, result_then_poll: bool) -> NextPoll | None:
    """The poll a result carries, when the server offers result-then-poll."""
    poll = body.object("poll") if result_then_poll else None
    if poll is None:
        return None
    return NextPoll(poll.required_string("worker_session_id"), poll.integer("wait_ms"))


def then_polled(ack: Accepted, found: ThenPolled) -> dict[str, Any]:
    """A result's answer with what its poll found: `task` (null when none
    came) or `poll_error`."""
    answer: dict[str, Any] = dict(ack)
    if found.error is not None:
        answer["poll_error"] = {"code": found.error.code, "message": found.error.message}
    else:
        answer["task"] = found.task
    return answer


def _names(value: Any) -> list[str] | None:
    """The `extensions` a registration names: strings (others are skipped,
    so a list the server cannot read offers nothing), None when absent."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise bad_body("extensions: invalid type, expected a sequence of strings")
    return [name for name in value if isinstance(name, str)]
