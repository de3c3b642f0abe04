"""The execution API: /v1/executions and everything below it.

For a client identity the gate has checked every route with an execution
id; a start is checked here, where the body names the workflow, and the
list keeps only the executions of workflows the client may read (a page
still holds up to `limit` of them, from the most recent `SCAN` matches)."""

from __future__ import annotations

import falcon

from orbit_core.api import ExecutionPage, ExecutionSummary
from orbit_core.engine.facade import EngineApi
from orbit_core.schedules.times import TimeFormatError, parse_duration
from orbit_core.visibility.query import encode_position
from orbit_server.auth import client_of, require
from orbit_server.body import ABSENT, Fields, read_json
from orbit_server.errors import bad_body
from orbit_server.identities import ClientIdentity
from orbit_server.params import query_int
from orbit_server.resources._json import send
from orbit_server.retention import Sweeper

SCAN = 1000


def _retention_ms(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except TimeFormatError as exc:
        raise bad_body(f"retention: `{text}`: {exc}") from None


class Executions:
    def __init__(self, engine: EngineApi, max_body: int, retention: Sweeper | None = None) -> None:
        self._engine = engine
        self._max_body = max_body
        self._retention = retention

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = Fields(read_json(req, self._max_body, required=True))
        workflow = body.required_string("workflow")
        require(client_of(req), "start", workflow)
        # `retention` (beyond the book) is read only by a server with
        # --retention; others ignore it as they ignore any unknown field.
        own = None if self._retention is None else _retention_ms(body.string("retention"))
        # `idempotency_key` (beyond the book: docs/language/flow-control.md).
        key = body.string("idempotency_key")
        answer = self._engine.start(
            workflow,
            version=body.string("version"),
            input=body.any("input"),
            execution_id=body.string("execution_id"),
            **({} if key is None else {"idempotency_key": key}),
        )
        if own is not None and answer["created"] and self._retention is not None:
            self._retention.remember(answer["execution_id"], own)
        send(resp, answer, 201 if answer["created"] else 200)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit = query_int(req, "limit")
        limit = 50 if limit is None else limit
        status = req.get_param("status") or None
        workflow = req.get_param("workflow") or None
        client = client_of(req)
        where = req.get_param("where")
        cursor = req.get_param("cursor")
        if where is not None or cursor is not None:
            # A typed filter and/or a cursor (docs/language/visibility.md):
            # the answer gains `next_cursor`; without both it is the book's.
            self._search(
                resp,
                client=client,
                where=where,
                status=status,
                workflow=workflow,
                limit=limit,
                cursor=cursor,
            )
            return
        if client is None:
            send(resp, self._engine.list_executions(status, workflow, limit))
            return
        rows = self._engine.list_executions(status, workflow, SCAN)["executions"]
        readable = [r for r in rows if client.may("read", r["workflow"])]
        send(resp, {"executions": readable[: min(max(limit, 1), SCAN)]})

    def _search(
        self,
        resp: falcon.Response,
        *,
        client: ClientIdentity | None,
        where: str | None,
        status: str | None,
        workflow: str | None,
        limit: int,
        cursor: str | None,
    ) -> None:
        if client is None:
            send(resp, self._engine.search_executions(where, status, workflow, limit, cursor))
            return
        # A client sees the matches it may read: pages are read until
        # `limit` of them are found, and the cursor resumes after the last
        # one shown.
        limit = min(max(limit, 1), SCAN)
        shown: list[ExecutionSummary] = []
        more = True
        while more and len(shown) <= limit:
            page = self._engine.search_executions(where, status, workflow, SCAN, cursor)
            shown += [r for r in page["executions"] if client.may("read", r["workflow"])]
            cursor = page["next_cursor"]
            more = cursor is not None
        rows = shown[:limit]
        after = None
        if (more or len(shown) > limit) and rows:
            after = encode_position(rows[-1]["created_at_ms"], rows[-1]["execution_id"])
        answer: ExecutionPage = {"executions": rows, "next_cursor": after}
        send(resp, answer)

    def on_get_one(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        send(resp, self._engine.get(execution_id))

    def on_get_history(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        send(resp, self._engine.history(execution_id, query_int(req, "run")))

    def on_get_wait(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        timeout = query_int(req, "timeout_ms")
        send(resp, self._engine.wait(execution_id, 30_000 if timeout is None else timeout))

    def on_post_cancel(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        body = read_json(req, self._max_body, required=False)
        reason = None if body is ABSENT else Fields(body).string("reason")
        send(resp, self._engine.cancel(execution_id, reason))

    def on_post_restart(
        self, req: falcon.Request, resp: falcon.Response, execution_id: str
    ) -> None:
        fields = Fields(read_json(req, self._max_body, required=True))
        answer = self._engine.operations.restart(
            execution_id,
            fields.required_string("from"),
            dry_run=fields.boolean("dry_run", False),
            force=fields.boolean("force", False),
            reason=fields.string("reason"),
        )
        send(resp, answer, 200 if answer["dry_run"] else 201)

    def on_post_fork(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        fields = Fields(read_json(req, self._max_body, required=True))
        answer = self._engine.operations.fork(
            execution_id,
            fields.required_string("from"),
            new_id=fields.string("execution_id"),
            version=fields.string("version"),
            dry_run=fields.boolean("dry_run", False),
            force=fields.boolean("force", False),
        )
        send(resp, answer, 200 if answer["dry_run"] else 201)

    def on_post_pause(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        body = read_json(req, self._max_body, required=False)
        reason = None if body is ABSENT else Fields(body).string("reason")
        send(resp, self._engine.operations.pause(execution_id, reason))

    def on_post_resume(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        read_json(req, self._max_body, required=False)
        send(resp, self._engine.operations.resume(execution_id))

    def on_post_signal(
        self, req: falcon.Request, resp: falcon.Response, execution_id: str, name: str
    ) -> None:
        payload = read_json(req, self._max_body, required=False)
        send(resp, self._engine.signal(execution_id, name, None if payload is ABSENT else payload))

    def on_get_query(
        self, req: falcon.Request, resp: falcon.Response, execution_id: str, name: str
    ) -> None:
        send(resp, self._engine.query(execution_id, name))
