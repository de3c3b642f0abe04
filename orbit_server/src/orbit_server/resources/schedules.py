"""The schedule API: /v1/schedules and everything below it (chapter 67).

Each responder parses the body and calls one method of the engine's
scheduler (`Engine.schedules`); validation, errors and the document shape
belong to the core. A body must be a JSON object (422 otherwise, as for the
other routes); its fields are checked by the core, which refuses unknown
ones with INVALID_SCHEDULE."""

from __future__ import annotations

from typing import Any

import falcon

from orbit_core.engine import Engine
from orbit_server.body import read_json
from orbit_server.errors import bad_body
from orbit_server.resources._json import send


class Schedules:
    def __init__(self, engine: Engine, max_body: int) -> None:
        self._schedules = engine.schedules
        self._max_body = max_body

    def _body(self, req: falcon.Request) -> dict[str, Any]:
        body = read_json(req, self._max_body, required=True)
        if not isinstance(body, dict):
            raise bad_body("invalid type: expected a JSON object")
        return body

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        send(resp, self._schedules.create(self._body(req)), 201)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send(resp, self._schedules.list_schedules())

    def on_get_one(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.get(schedule_id))

    def on_patch_one(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.update(schedule_id, self._body(req)))

    def on_delete_one(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.delete(schedule_id))

    def on_post_pause(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.pause(schedule_id))

    def on_post_resume(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.resume(schedule_id))

    def on_post_trigger(self, req: falcon.Request, resp: falcon.Response, schedule_id: str) -> None:
        send(resp, self._schedules.trigger(schedule_id))
