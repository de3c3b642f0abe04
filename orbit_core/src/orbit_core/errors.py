"""The core's error tree. Every error carries the API `code` of chapter 67 and a
message meant for people; the HTTP status mapping belongs to the server.

    OrbitError (code)
    ├── NotFoundError ........ NOT_FOUND, RUN_NOT_FOUND, WORKFLOW_NOT_FOUND,
    │                          UNKNOWN_SIGNAL, UNKNOWN_QUERY, UNKNOWN_SESSION
    ├── ConflictError ........ DEFINITION_CONFLICT, EXECUTION_EXISTS, EXECUTION_FINISHED
    ├── InvalidError ......... INVALID_REQUEST, INVALID_IR, CHILD_NOT_REGISTERED,
    │                          INVALID_INPUT, INVALID_EXECUTION_ID, RESERVED_TASK,
    │                          SIGNAL_PAYLOAD_INVALID, QUERY_FAILED
    ├── LimitError ........... PAYLOAD_TOO_LARGE, RESOURCE_EXHAUSTED
    └── StorageError ......... STORAGE_ERROR
"""

from __future__ import annotations

from orbit_core.jsontypes import JsonObject


class OrbitError(Exception):
    """Base of every error the engine reports to a caller: `code` (the API
    code), `message` (for people) and `details` (JSON for programs, or None;
    the HTTP envelope of chapter 67 carries only code and message)."""

    code = "INTERNAL"

    def __init__(
        self, message: str, code: str | None = None, *, details: JsonObject | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class NotFoundError(OrbitError):
    code = "NOT_FOUND"


class ConflictError(OrbitError):
    code = "EXECUTION_FINISHED"


class InvalidError(OrbitError):
    code = "INVALID_REQUEST"


class LimitError(OrbitError):
    code = "RESOURCE_EXHAUSTED"


class StorageError(OrbitError):
    code = "STORAGE_ERROR"


def not_found(execution_id: str) -> NotFoundError:
    return NotFoundError(f"execution `{execution_id}` not found", "NOT_FOUND")


def workflow_not_found(name: str, version: str | None) -> NotFoundError:
    label = name if version is None else f"{name}@{version}"
    return NotFoundError(f"workflow {label} is not registered", "WORKFLOW_NOT_FOUND")


def unknown_session() -> NotFoundError:
    return NotFoundError("unknown or expired worker session; register again", "UNKNOWN_SESSION")


def payload_too_large(what: str, size: int, limit: int) -> LimitError:
    return LimitError(
        f"{what} is {size} bytes; the limit is {limit} "
        "(--max-payload-bytes or the workflow's `limits`)",
        "PAYLOAD_TOO_LARGE",
    )


class RateLimitedError(LimitError):
    """A start refused by its workflow's `rate { on_exceed: drop }`
    (docs/language/flow-control.md); `details["retry_after_ms"]` says when
    the key's next start may go."""

    code = "RATE_LIMITED"
