"""Versions in production (issue 41): `GET /v1/workflows/{name}/versions`
(the census and drain status), `GET /v1/workflows/{name}/migrations`
(the plan of a migration, which changes nothing) and `POST` to the same
path (moves up to `limit` executions at a safe point, each in its own
commit). The rules live in orbit_core/migration.py."""

from __future__ import annotations

import falcon

from orbit_core.engine.facade import EngineApi
from orbit_core.engine.migrations import Filter, everything
from orbit_core.errors import InvalidError
from orbit_core.jsontypes import JsonObject
from orbit_core.state import ExecutionState
from orbit_server.body import read_json
from orbit_server.resources._json import send

MAX_BATCH = 1000
_STATUSES = ("RUNNING", "COMPENSATING")


def status_filter(status: str | None) -> Filter:
    """The filter `orbit ps --status` has."""
    if status is None:
        return everything
    wanted = status.upper()
    if wanted not in _STATUSES:
        raise InvalidError(
            f"status must be one of {', '.join(_STATUSES)} (live executions only)",
            "INVALID_REQUEST",
        )

    def keep(state: ExecutionState) -> bool:
        return state.status == wanted

    return keep


def where_filter(engine: EngineApi, workflow: str, where: str | None, status: str | None) -> Filter:
    """The executions of `workflow` passing the typed filter `where` (the
    language of `orbit ps --where`, docs/language/visibility.md), as the
    store's search finds them among the live statuses (or `status`). The
    search is what `GET /v1/executions?where=` runs, so both agree on every
    field; the plan then intersects its ids with the executions in memory.
    A bad filter raises INVALID_FILTER."""
    if where is None:
        return everything
    ids: set[str] = set()
    for wanted in (status.upper(),) if status is not None else _STATUSES:
        cursor: str | None = None
        while True:
            page = engine.search_executions(where, wanted, workflow, MAX_BATCH, cursor)
            ids.update(e["execution_id"] for e in page["executions"])
            cursor = page["next_cursor"]
            if cursor is None:
                break

    def keep(state: ExecutionState) -> bool:
        return state.id in ids

    return keep


def _both(first: Filter, second: Filter) -> Filter:
    if first is everything:
        return second
    if second is everything:
        return first
    return lambda state: first(state) and second(state)


def _versions(source: JsonObject | dict[str, str | None]) -> tuple[str, str]:
    from_version, to_version = source.get("from"), source.get("to")
    if not isinstance(from_version, str) or not isinstance(to_version, str):
        raise InvalidError("`from` and `to` (two versions) are required", "INVALID_REQUEST")
    return from_version, to_version


class Versions:
    def __init__(self, engine: EngineApi, max_body: int) -> None:
        self._engine = engine
        self._max_body = max_body

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        send(resp, self._engine.migrations.census(name))

    def on_get_plan(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        params = {k: req.get_param(k) for k in ("from", "to")}
        from_version, to_version = _versions(params)
        status = req.get_param("status")
        keep = _both(
            status_filter(status), where_filter(self._engine, name, req.get_param("where"), status)
        )
        send(resp, self._engine.migrations.plan(name, from_version, to_version, keep))

    def on_post_plan(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        body = read_json(req, self._max_body, required=True)
        if not isinstance(body, dict):
            raise InvalidError("the body must be a JSON object", "INVALID_REQUEST")
        from_version, to_version = _versions(body)
        limit = body.get("limit", 100)
        if type(limit) is not int or not 1 <= limit <= MAX_BATCH:
            raise InvalidError(f"limit must be an integer from 1 to {MAX_BATCH}", "INVALID_REQUEST")
        dry_run = body.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise InvalidError("dry_run must be true or false", "INVALID_REQUEST")
        status = body.get("status")
        if status is not None and not isinstance(status, str):
            raise InvalidError("status must be a string", "INVALID_REQUEST")
        where = body.get("where")
        if where is not None and not isinstance(where, str):
            raise InvalidError("where must be a string (a filter)", "INVALID_REQUEST")
        keep = _both(status_filter(status), where_filter(self._engine, name, where, status))
        answer = self._engine.migrations.run(
            name, from_version, to_version, limit=limit, dry_run=dry_run, keep=keep
        )
        send(resp, answer)
