"""POST/GET /v1/workflows, GET /v1/workflows/{name}[/{version}].

On a development server (`orbit server --dev`) a POST may replace the
definition registered for the same version when no unfinished execution
uses it (`Engine.deploy(replace=True)`); the answer then says
`"replaced": true` and the log says which hash gave way to which.
"""

from __future__ import annotations

import falcon

from orbit_core.engine.facade import EngineApi
from orbit_core.errors import InvalidError
from orbit_server.auth import client_of
from orbit_server.body import read_json
from orbit_server.logs import logger
from orbit_server.resources._json import send

_log = logger()


class Workflows:
    def __init__(self, engine: EngineApi, max_body: int, *, replace: bool = False) -> None:
        self._engine = engine
        self._max_body = max_body
        self._replace = replace

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        document = read_json(req, self._max_body, required=True)
        if not isinstance(document, dict):
            raise InvalidError("the IR document must be a JSON object", "INVALID_IR")
        answer = self._engine.deploy(document, replace=self._replace)
        if answer.get("replaced"):
            _log.info(
                "replaced workflow definition (development server)",
                workflow=answer["name"],
                version=answer["version"],
                hash=answer["definition_hash"],
            )
        elif answer["created"]:
            _log.info(
                "registered workflow definition",
                workflow=answer["name"],
                version=answer["version"],
                hash=answer["definition_hash"],
            )
        send(resp, answer, 201 if answer["created"] else 200)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        listed = self._engine.list_workflows()
        client = client_of(req)
        if client is not None:
            # A client identity sees only the workflows it may read.
            listed = {
                "workflows": [w for w in listed["workflows"] if client.may("read", w["name"])]
            }
        send(resp, listed)

    def on_get_latest(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        send(resp, self._engine.get_workflow(name))

    def on_get_version(
        self, req: falcon.Request, resp: falcon.Response, name: str, version: str
    ) -> None:
        send(resp, self._engine.get_workflow(name, version))
