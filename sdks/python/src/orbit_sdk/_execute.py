"""Runs one handler and turns whatever it did into the result to report."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import traceback
from collections.abc import Awaitable
from typing import Any, Callable

from orbit_sdk._json import RawJson, json_string
from orbit_sdk._json import encode as encode_json
from orbit_sdk._log import log_fields
from orbit_sdk._tracing import mark_failed, task_span
from orbit_sdk.context import Context
from orbit_sdk.errors import TaskError

Handler = Callable[[Any, Context], Any]

COMPLETE = "/v1/tasks/complete"
FAIL = "/v1/tasks/fail"
TRACEBACK_FRAMES = 20
_POLL_KEYS = ("worker_session_id", "wait_ms")


class Outcome:
    """The protocol call that reports an attempt: its path and JSON body.

    fallback marks the failure the SDK reports when the runtime refused the
    first report; it gets no fallback of its own. output_json is the
    completion's output already encoded (checking it is JSON encoded it).
    """

    __slots__ = ("_output_json", "body", "fallback", "path")

    def __init__(
        self,
        path: str,
        body: dict[str, Any],
        fallback: bool = False,
        output_json: bytes | None = None,
    ) -> None:
        self.path = path
        self.body = body
        self.fallback = fallback
        self._output_json = output_json

    def payload(self, poll: dict[str, Any] | None) -> Any:
        """The request body: the report, with the next poll when given one.
        The same JSON as encoding {**body, "poll": poll}, without encoding
        the output again."""
        if self._output_json is None:
            return self.body if poll is None else {**self.body, "poll": poll}
        tail = b"}" if poll is None else b',"poll":' + _poll_json(poll) + b"}"
        token = self.body["token"]
        token_json = json_string(token) if type(token) is str else encode_json(token)
        return RawJson(
            b'{"token":' + token_json.encode() + b',"output":' + self._output_json + tail
        )


def _poll_json(poll: dict[str, Any]) -> bytes:
    """encode_json(poll).encode(), written out for the poll every report carries."""
    session_id, wait_ms = poll.get("worker_session_id"), poll.get("wait_ms")
    if tuple(poll) != _POLL_KEYS or type(session_id) is not str or type(wait_ms) is not int:
        return encode_json(poll).encode()
    return f'{{"worker_session_id":{json_string(session_id)},"wait_ms":{wait_ms}}}'.encode()


def run_handler(handler: Handler | None, task: dict[str, Any], ctx: Context) -> Outcome:
    """Runs the handler (inside the attempt's trace when the task carries one
    and OpenTelemetry is installed: _tracing.py)."""
    if not isinstance(task.get("traceparent"), str):
        return _run(handler, task, ctx)  # no trace to continue: no span
    with task_span(task, ctx.task_name) as span:
        outcome = _run(handler, task, ctx)
        if outcome.path == FAIL:
            mark_failed(span, outcome.body["error_code"], outcome.body["error_message"])
    return outcome


def _run(handler: Handler | None, task: dict[str, Any], ctx: Context) -> Outcome:
    if handler is None:
        message = f"this worker has no handler for task `{ctx.task_name}`"
        return _failure(ctx, "UNKNOWN_TASK", message, True, None)
    task_input = task.get("input")
    try:
        result = handler({} if task_input is None else task_input, ctx)
        if type(result) is not dict and inspect.isawaitable(result):
            # Each async handler gets a fresh event loop on its poll thread.
            result = asyncio.run(_awaited(result))
    except TaskError as exc:
        return _failure(ctx, exc.code, exc.message, exc.retryable, exc.details)
    except BaseException as exc:
        # Handlers run on poll threads, where KeyboardInterrupt never arrives;
        # SystemExit or CancelledError must not end the thread unreported.
        log_fields(logging.ERROR, "handler raised an exception", ctx._identity(), exc_info=True)
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__, -TRACEBACK_FRAMES)
        message = f"{type(exc).__name__}: {exc}"
        return _failure(ctx, "UNHANDLED_EXCEPTION", message, True, {"traceback": "".join(frames)})
    if result is None:
        result = {}
    if not isinstance(result, dict):
        message = f"handler returned {type(result).__name__}; a task result must be a dict"
        return _failure(ctx, "INVALID_RESULT", message, False, None)
    try:
        output_json = encode_json(result).encode()
    except (TypeError, ValueError) as exc:
        message = f"handler returned a dict that is not valid JSON: {exc}"
        return _failure(ctx, "INVALID_RESULT", message, False, None)
    return Outcome(COMPLETE, {"token": ctx.token, "output": result}, output_json=output_json)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _failure(ctx: Context, code: str, message: str, retryable: bool, details: Any) -> Outcome:
    log_fields(logging.INFO, "task failed", {**ctx._identity(), "code": code})
    body: dict[str, Any] = {
        "token": ctx.token,
        "error_code": code,
        "error_message": str(message),
        "retryable": bool(retryable),
    }
    if details is not None:
        try:
            json.dumps(details, allow_nan=False)
            body["details"] = details
        except (TypeError, ValueError):
            # Keep the failure reportable even when its details are not JSON.
            body["details"] = repr(details)
    return Outcome(FAIL, body)
