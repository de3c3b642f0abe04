"""Batch operations (beyond the book; docs/operating-executions.md):
/v1/batches. A client identity may run a batch over a workflow whose
executions it may cancel (the permission that covers pause and resume too),
and sees only those batches."""

from __future__ import annotations

from typing import Any

import falcon

from orbit_core.jsontypes import JsonObject
from orbit_server.auth import client_of, require
from orbit_server.batches import Batches
from orbit_server.body import Fields, read_json
from orbit_server.errors import bad_body
from orbit_server.params import query_int
from orbit_server.resources._json import send


def _workflow_of(doc: JsonObject) -> str:
    chosen = doc.get("filter")
    workflow = chosen.get("workflow") if isinstance(chosen, dict) else None
    return workflow if isinstance(workflow, str) else ""


class BatchResource:
    def __init__(self, batches: Batches, max_body: int) -> None:
        self._batches = batches
        self._max_body = max_body

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw: Any = read_json(req, self._max_body, required=True)
        if not isinstance(raw, dict):
            raise bad_body("the body must be a JSON object")
        body = Fields(raw)
        action = body.required_string("action")
        chosen = raw.get("filter", {})
        workflow = chosen.get("workflow") if isinstance(chosen, dict) else None
        if isinstance(workflow, str):
            require(client_of(req), "cancel", workflow)
        elif client_of(req) is not None:
            raise bad_body("filter.workflow is required")
        dry_run = body.boolean("dry_run", False)
        answer = self._batches.create(action, chosen, raw, dry_run)
        send(resp, answer, 200 if dry_run else 201)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit = query_int(req, "limit")
        listed = self._batches.listing(50 if limit is None else limit)
        client = client_of(req)
        if client is not None:
            rows = listed.get("batches")
            listed = {
                "batches": [
                    r
                    for r in (rows if isinstance(rows, list) else [])
                    if isinstance(r, dict) and client.may("cancel", _workflow_of(r))
                ]
            }
        send(resp, listed)

    def on_get_one(self, req: falcon.Request, resp: falcon.Response, batch_id: str) -> None:
        doc = self._batches.get(batch_id, items=req.get_param_as_bool("items") or False)
        require(client_of(req), "cancel", _workflow_of(doc))
        send(resp, doc)
