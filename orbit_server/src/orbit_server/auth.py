"""Authentication: the admin token and the shared worker token (chapter 45).

Access is decided from the route a request was matched to, never from the
text of its path: Falcon's router forgives spellings (leading slashes are
stripped, `%2F` is decoded before routing), so a rule written against
`req.path` can disagree with the route that actually runs. `Gate` therefore
decides in `process_resource`, which Falcon calls after routing with the
matched resource, and looks the route's template up in a table that
`create_app` builds as it adds each route: every route is declared `OPEN`
(health, readiness, the UI), `WORKER` (the worker protocol: the worker or the
admin token) or `ADMIN` (the admin token only). Deny by default: a route
missing from the table is refused with 403 whatever the credential, and
`create_app` refuses to build an app with such a route at all.

A request that matches no route reaches no resource: it gets the 404 of the
router without a credential check. A known path with an unsupported method
is matched, so its 405 is answered only to a caller allowed on the route.

Without `--token` every declared route is open. Tokens are compared in
constant time. Responses that pass get the `x-orbit-api-version` header; the
body limit is enforced here too, before a responder reads the body.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Mapping
from typing import Any

import falcon

from orbit_core.errors import OrbitError
from orbit_server.errors import too_large
from orbit_server.logs import logger
from orbit_server.params import header_int

API_VERSION = "orbit-api/1"
_VERSION_HEADER = "x-orbit-api-version"
_log = logger()


class Access(enum.Enum):
    """Who may call a route when authentication is configured."""

    OPEN = "open"  # anyone, with or without a credential
    WORKER = "worker"  # the shared worker token or the admin token
    ADMIN = "admin"  # the admin token only


class Gate:
    """Falcon middleware: authorise by matched route, stamp the API version,
    limit the body."""

    def __init__(
        self,
        token: str | None,
        worker_token: str | None,
        max_body: int,
        routes: Mapping[str, Access],
    ) -> None:
        self._admin = token.encode() if token is not None else None
        self._worker = worker_token.encode() if worker_token is not None else None
        self._max_body = max_body
        self._routes = routes

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        access = self._routes.get(req.uri_template or "")
        if access is None:
            _log.error("refused a route without an access rule", route=req.uri_template)
            raise OrbitError("this endpoint has no access rule", "FORBIDDEN")
        if self._admin is not None and access is not Access.OPEN:
            self._authenticate(req, access)
        resp.set_header(_VERSION_HEADER, API_VERSION)
        length = header_int(req, "content-length")
        if length is not None and length > self._max_body:
            raise too_large()

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        # No route matched: the router's 404 gave nothing away, and it carries
        # the version like any answer of the API.
        if resource is None:
            resp.set_header(_VERSION_HEADER, API_VERSION)

    def _authenticate(self, req: falcon.Request, access: Access) -> None:
        presented = _bearer(req.get_header("authorization"))
        if presented is not None:
            assert self._admin is not None
            if hmac.compare_digest(presented, self._admin):
                return
            if self._worker is not None and hmac.compare_digest(presented, self._worker):
                if access is Access.WORKER:
                    return
                raise OrbitError(
                    "worker credentials may only call /v1/workers/* and /v1/tasks/*", "FORBIDDEN"
                )
        raise OrbitError("missing or invalid credentials", "UNAUTHENTICATED")


def _bearer(header: str | None) -> bytes | None:
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    # WSGI hands header values over as latin-1: this recovers the bytes sent.
    return value.strip().encode("latin-1", "replace")
