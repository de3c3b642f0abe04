"""Errors as HTTP responses, in one place.

`STATUS` maps every API error code of chapter 67 to its HTTP status; the
engine's `OrbitError`s are answered with the JSON envelope through it.
`HttpError` is the other kind the book describes: a refusal of the HTTP layer
(bad JSON, wrong content type, body too large, a missing field) answered in
plain text, not the envelope.
"""

from __future__ import annotations

from typing import Any

import falcon
import orjson

from orbit_core.errors import OrbitError
from orbit_server.logs import logger

STATUS: dict[str, int] = {
    "INVALID_REQUEST": 400,
    "INVALID_FILTER": 400,
    "INVALID_IR": 400,
    "CHILD_NOT_REGISTERED": 400,
    "INVALID_INPUT": 400,
    "INVALID_SCHEDULE": 400,
    "INVALID_EXECUTION_ID": 400,
    "RESERVED_TASK": 400,
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "RUN_NOT_FOUND": 404,
    "SCHEDULE_NOT_FOUND": 404,
    "UNKNOWN_SIGNAL": 404,
    "UNKNOWN_QUERY": 404,
    "WORKFLOW_NOT_FOUND": 404,
    "UNKNOWN_SESSION": 404,
    "DEFINITION_CONFLICT": 409,
    "EXECUTION_EXISTS": 409,
    "SCHEDULE_EXISTS": 409,
    "EXECUTION_FINISHED": 409,
    "CONTRACT_MISMATCH": 409,
    # Beyond the book: pause and resume (docs/operating-executions.md).
    "ALREADY_PAUSED": 409,
    "NOT_PAUSED": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "SIGNAL_PAYLOAD_INVALID": 422,
    "QUERY_FAILED": 422,
    "RESOURCE_EXHAUSTED": 429,
    "STORAGE_ERROR": 500,
    "NOT_LEADER": 503,
    # Restart and fork (issue 38, docs/restart-and-fork.md).
    "UNKNOWN_STEP": 400,
    "INCOMPATIBLE_VERSION": 409,
    "EFFECTS_REPEATED": 409,
    "CHILD_EXECUTION": 409,
    # Idempotent starts (issue 39, docs/language/flow-control.md).
    "IDEMPOTENCY_KEY_REUSED": 409,
    # Start rates with `on_exceed: drop` (issue 39, docs/language/flow-control.md).
    "RATE_LIMITED": 429,
}

_log = logger()


class HttpError(Exception):
    """A refusal of the HTTP layer, answered with a plain-text body."""

    def __init__(self, status: int, text: str = "") -> None:
        super().__init__(text)
        self.status = status
        self.text = text


def bad_json(detail: str) -> HttpError:
    return HttpError(400, f"Failed to parse the request body as JSON: {detail}")


def bad_query(detail: str) -> HttpError:
    return HttpError(400, f"Failed to deserialize query string: {detail}")


def bad_body(detail: str) -> HttpError:
    return HttpError(422, f"Failed to deserialize the JSON body into the target type: {detail}")


def too_large() -> HttpError:
    return HttpError(413, "Failed to buffer the request body: length limit exceeded")


def not_json() -> HttpError:
    return HttpError(415, "Expected request with `Content-Type: application/json`")


def error_json(code: str, message: str) -> bytes:
    """The JSON error envelope's body."""
    return orjson.dumps({"error": {"code": code, "message": message}})


def envelope(resp: falcon.Response, status: int, code: str, message: str) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = error_json(code, message)


def install(app: falcon.App[falcon.Request, falcon.Response]) -> None:
    """Registers the handlers; Falcon picks the most specific one per exception."""
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, framework)
    app.add_error_handler(HttpError, _plain)
    app.add_error_handler(OrbitError, _orbit)


def _orbit(req: falcon.Request, resp: falcon.Response, ex: OrbitError, params: Any) -> None:
    envelope(resp, STATUS.get(ex.code, 500), ex.code, ex.message)


def _plain(req: falcon.Request, resp: falcon.Response, ex: HttpError, params: Any) -> None:
    resp.status = ex.status
    resp.content_type = falcon.MEDIA_TEXT
    resp.text = ex.text


def framework(
    req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: Any
) -> None:
    # Falcon raises these for routing: an unknown path (RULINGS §12: the JSON
    # NOT_FOUND envelope) and a known path with the wrong method (405 + allow).
    if ex.status_code == 404:
        envelope(resp, 404, "NOT_FOUND", f"no such endpoint: {req.method} {req.path}")
        return
    resp.status = ex.status_code
    if ex.headers:
        resp.set_headers(ex.headers)
    resp.content_type = falcon.MEDIA_TEXT
    resp.text = ex.description or ""


def _unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception, params: Any) -> None:
    _log.error("request failed", method=req.method, path=req.path, exc_info=ex)
    envelope(resp, 500, "INTERNAL", f"internal error: {type(ex).__name__}")
