"""The schedule API: /v1/schedules and everything below it (chapter 67).

Each responder parses the body and calls one method of the engine's
scheduler (`Engine.schedules`); validation, errors and the document shape
belong to the core. A body must be a JSON object (422 otherwise, as for the
other routes); its fields are checked by the core, which refuses unknown
ones with INVALID_SCHEDULE.

A client identity needs the `schedule` action for the schedule's workflow:
the gate checks the routes with a schedule id; a create, and a change of a
schedule's workflow, are checked here against the body's workflow, and the
list keeps the schedules of workflows the client may schedule."""

from __future__ import annotations

from typing import Any

import falcon

from orbit_core.engine.facade import EngineApi
from orbit_server.auth import client_of, require
from orbit_server.body import read_json
from orbit_server.errors import bad_body
from orbit_server.resources._json import send


class Schedules:
    def __init__(self, engine: EngineApi, max_body: int) -> None:
        self._schedules = engine.schedules
        self._max_body = max_body

    def _body(self, req: falcon.Request) -> dict[str, Any]:
        body = read_json(req, self._max_body, required=True)
        if not isinstance(body, dict):
            raise bad_body("invalid type: expected a JSON object")
        return body

    def _body_workflow(self, req: falcon.Request, body: dict[str, Any]) -> None:
        workflow = body.get("workflow")
        if isinstance(workflow, str):
            require(client_of(req), "schedule", workflow)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._body(req)
        self._body_workflow(req, body)
        send(resp, self._schedules.create(body), 201)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = client_of(req)
        visible = None if client is None else (lambda w: client.may("schedule", w))
        send(resp, self._schedules.list_schedules(visible))

    def on_get_one(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.get(schedule_id))

    def on_patch_one(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        body = self._body(req)
        self._body_workflow(req, body)
        send(resp, self._schedules.update(schedule_id, body))

    def on_delete_one(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.delete(schedule_id))

    def on_post_pause(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.pause(schedule_id))

    def on_post_resume(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.resume(schedule_id))

    def on_post_trigger(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.trigger(schedule_id))
