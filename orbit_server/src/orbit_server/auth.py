"""Authentication: the admin token and the shared worker token (chapter 45).

Runs before routing on every request. Without `--token` everything is open.
With it, every `/v1/` path except health and readiness needs a bearer
credential: the admin token may call anything, the worker token only the
worker protocol below `/v1/workers/` and `/v1/tasks/`. Tokens are compared in
constant time. Responses that pass get the `x-orbit-api-version` header; the
body limit is enforced here too, before anything reads the body.
"""

from __future__ import annotations

import hmac

import falcon

from orbit_core.errors import OrbitError
from orbit_server.errors import too_large

API_VERSION = "orbit-api/1"
OPEN_PATHS = frozenset({"/v1/health", "/v1/ready"})
WORKER_PREFIXES = ("/v1/workers/", "/v1/tasks/")


class Gate:
    """Falcon middleware: authenticate, stamp the API version, limit the body."""

    def __init__(self, token: str | None, worker_token: str | None, max_body: int) -> None:
        self._admin = token.encode() if token is not None else None
        self._worker = worker_token.encode() if worker_token is not None else None
        self._max_body = max_body

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self._admin is not None:
            path = req.path
            if path.startswith("/v1/") and path not in OPEN_PATHS:
                self._authenticate(req, path)
        resp.set_header("x-orbit-api-version", API_VERSION)
        length = req.content_length
        if length is not None and length > self._max_body:
            raise too_large()

    def _authenticate(self, req: falcon.Request, path: str) -> None:
        presented = _bearer(req.get_header("authorization"))
        if presented is not None:
            assert self._admin is not None
            if hmac.compare_digest(presented, self._admin):
                return
            if self._worker is not None and hmac.compare_digest(presented, self._worker):
                if path.startswith(WORKER_PREFIXES):
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
    return value.strip().encode()
