"""The archive API (`orbit server --retention`; docs/retention.md): what
retention swept, read back from the archive.

`GET /v1/archive/executions` lists archived executions like
`GET /v1/executions`, `where` and `cursor` included: the filter is typed
by the engine as the live one is (`typed_filter`), then run
over the archive's index (which keeps each execution's search rows), and
the answer gains `next_cursor`; `/v1/archive/executions/{id}` and `.../history` answer
like their live counterparts, from the archived record. The routes exist
only on a server with retention, and answer with the same permission as
reading executions (the gate finds an archived execution's workflow in the
archive)."""

from __future__ import annotations

from collections.abc import Callable

import falcon

from orbit_core.api import ExecutionPage, ExecutionSummary
from orbit_core.errors import NotFoundError
from orbit_core.visibility.check import Filter
from orbit_core.visibility.query import decode_cursor, encode_position
from orbit_server.archive import Archive, ArchivedExecution
from orbit_server.auth import client_of
from orbit_server.params import query_int
from orbit_server.resources._json import send
from orbit_server.resources.executions import SCAN


def archived_or_404(archive: Archive, execution_id: str) -> ArchivedExecution:
    found = archive.get(execution_id)
    if found is None:
        raise NotFoundError(f"execution `{execution_id}` is not in the archive", "NOT_FOUND")
    return found


class ArchivedExecutions:
    def __init__(self, archive: Archive, typed: Callable[[str, str | None], Filter]) -> None:
        """`typed`: types a `where` filter (with the workflow named, if one
        is), the engine's `typed_filter`."""
        self._archive = archive
        self._typed = typed

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit = query_int(req, "limit")
        limit = min(max(50 if limit is None else limit, 1), SCAN)
        status = req.get_param("status") or None
        workflow = req.get_param("workflow") or None
        client = client_of(req)
        where = req.get_param("where")
        cursor = req.get_param("cursor")
        paged = where is not None or cursor is not None
        typed: Filter | None = None
        if where is not None:
            typed = self._typed(where, workflow)
        after = decode_cursor(cursor) if cursor else None
        # One more than shown tells whether a next page exists.
        wanted = limit + 1 if client is None else None
        rows: list[ExecutionSummary] = self._archive.list(
            status, workflow, SCAN + 1 if wanted is None else wanted, where=typed, after=after
        )
        if client is not None:
            rows = [r for r in rows if client.may("read", r["workflow"])]
        more = len(rows) > limit
        rows = rows[:limit]
        if not paged:
            send(resp, {"executions": rows})
            return
        last = rows[-1] if more and rows else None
        page: ExecutionPage = {
            "executions": rows,
            "next_cursor": None
            if last is None
            else encode_position(last["created_at_ms"], last["execution_id"]),
        }
        send(resp, page)

    def on_get_one(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        send(resp, archived_or_404(self._archive, execution_id).document)

    def on_get_history(self, req: falcon.Request, resp: falcon.Response, execution_id: str) -> None:
        found = archived_or_404(self._archive, execution_id)
        run = query_int(req, "run")
        page = found.history(run)
        if page is None:
            raise NotFoundError(
                f"execution `{execution_id}` has runs 1 to {len(found.runs)}; there is no run {run}",
                "RUN_NOT_FOUND",
            )
        send(resp, page)
