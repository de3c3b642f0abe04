"""The archive API (`orbit server --retention`; docs/retention.md): what
retention swept, read back from the archive.

`GET /v1/archive/executions` lists archived executions like
`GET /v1/executions`; `/v1/archive/executions/{id}` and `.../history` answer
like their live counterparts, from the archived record. The routes exist
only on a server with retention, and answer with the same permission as
reading executions (the gate finds an archived execution's workflow in the
archive)."""

from __future__ import annotations

import falcon

from orbit_core.errors import NotFoundError
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
    def __init__(self, archive: Archive) -> None:
        self._archive = archive

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit = query_int(req, "limit")
        limit = min(max(50 if limit is None else limit, 1), SCAN)
        status = req.get_param("status") or None
        workflow = req.get_param("workflow") or None
        client = client_of(req)
        rows = self._archive.list(status, workflow, limit if client is None else SCAN)
        if client is not None:
            rows = [r for r in rows if client.may("read", r["workflow"])][:limit]
        send(resp, {"executions": rows})

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
