"""Reporting an attempt's result: which answers to retry, for how long, and what then.

The runtime reconciles results by token, so sending one again is harmless and a
result held through an outage or a restart is still accepted afterwards. So:

- no answer, any 5xx, 408 and 429 (`is_away`) mean the runtime, its database
  or a proxy in front of it is restarting, failing or overloaded: retried with
  backoff until the runtime answers (logged as _contact.py says), for up to
  RESULT_RETRY_WINDOW_S, and no longer once shutdown has begun. There is no
  count of tries: giving up while the worker keeps its session alive leaves
  the attempt owned by this worker, which the runtime then never redelivers,
  so a step without a timeout would wait forever after a storage outage of a
  few seconds;
- any other 4xx is the runtime refusing the report, which sending it again
  cannot change.

A refused report would leave the attempt in flight until its timeout (forever
without one), so the SDK reports the attempt as failed instead, once, with a
non-retryable INVALID_RESULT and a small body that carries the runtime's error.
A refusal of the credentials (401, 403) gets no fallback: the fallback would be
refused the same way.

When the runtime offered the result-then-poll extension at registration, a
report carries the poll thread's next poll (`poll`), and the runtime answers
the result and then hands over the next task, if one comes within the wait:
one request per task instead of two. The result's own rules are unchanged:
a report retried after a lost answer is harmless (the runtime redelivers a
task whose answer did not reach us), a refused report took no task, and an
answer without a task (none came, or the poll could not be made) sends the
thread back to polling on its own, which meets a lost session as usual. A
worker that is shutting down asks for no further task.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from orbit_sdk._backoff import Backoff, RandomSource
from orbit_sdk._contact import Contact
from orbit_sdk._execute import FAIL, Outcome
from orbit_sdk._log import fields_line, log_fields
from orbit_sdk._session import Session, describe, is_away, is_unknown_session
from orbit_sdk.client import ApiError, Client
from orbit_sdk.context import Context

# The runtime redelivers an attempt whose worker went silent for a session
# timeout (30 s by default), so a result held for much longer is rarely the
# one that counts; ten minutes also matches the book's other SDKs.
RESULT_RETRY_WINDOW_S = 600.0
CREDENTIAL_STATUSES = frozenset({401, 403})
# Keeps the fallback report small even if the runtime's message is not.
MAX_MESSAGE_CHARS = 2000


class Reporter:
    """Sends the results of one worker's attempts; shared by its poll threads."""

    def __init__(
        self,
        client: Client,
        session: Session,
        stopping: threading.Event,
        random_source: RandomSource,
    ) -> None:
        self._client = client
        self._session = session
        self._stopping = stopping
        self._random = random_source

    def deliver(
        self, ctx: Context, outcome: Outcome, poll_wait_ms: int | None = None
    ) -> dict[str, Any] | None:
        """Reports outcome; if the runtime refuses it, reports a failure in its
        place. With `poll_wait_ms`, the report carries the next poll when the
        runtime offers it: the task it brought back, else None."""
        refusal, task = self._send(ctx, outcome, poll_wait_ms)
        if refusal is None:
            return task
        fallback = _fallback(ctx, outcome, refusal)
        if fallback is not None:
            fields = {**ctx._identity(), "error": str(refusal)}
            log_fields(logging.WARNING, "result refused; reporting the attempt as failed", fields)
            refusal, task = self._send(ctx, fallback, poll_wait_ms)
        if refusal is not None:
            fields = {**ctx._identity(), "error": str(refusal)}
            log_fields(logging.ERROR, "result refused", fields)
        return task

    def _poll(self, poll_wait_ms: int | None) -> dict[str, Any] | None:
        """The poll the report is to carry, if there is to be one."""
        session_id = self._session.id
        if (
            poll_wait_ms is None
            or session_id is None
            or not self._session.result_then_poll
            or self._stopping.is_set()
        ):
            return None
        return {"worker_session_id": session_id, "wait_ms": poll_wait_ms}

    def _send(
        self, ctx: Context, outcome: Outcome, poll_wait_ms: int | None
    ) -> tuple[ApiError | None, dict[str, Any] | None]:
        """Sends until answered: the error if refused, None once answered or
        given up; and the task the answer brought, if any."""
        # Made at the first failure: nearly every result goes through at once.
        backoff: Backoff | None = None
        # This result's own: the runtime may answer polls and still fail it.
        contact: Contact | None = None
        give_up_at = time.monotonic() + RESULT_RETRY_WINDOW_S
        last_chance = False
        while True:
            session_id = self._session.id
            poll = self._poll(poll_wait_ms)
            try:
                if poll is None:
                    _, answer = self._client.post(outcome.path, outcome.payload(None))
                else:
                    _, answer = self._client._post_waiting(outcome.path, outcome.payload(poll))
            except ApiError as exc:
                if poll is not None and self._stopping.is_set():
                    # Shutdown ended the wait for a next task: the result goes
                    # again, without the poll (sending it twice is harmless).
                    continue
                if backoff is None or contact is None:
                    backoff = Backoff(self._random)
                    contact = Contact(back=lambda away: _delivered_after(away, ctx))
                if not is_away(exc):
                    contact.answered()
                if is_unknown_session(exc):
                    self._session.renew(session_id)
                elif not is_away(exc):
                    return exc, None
                fields = {**ctx._identity(), "error": describe(exc)}
                if last_chance:
                    log_fields(logging.WARNING, "result not delivered before shutdown", fields)
                    return None, None
                delay = backoff.next_delay()
                if time.monotonic() + delay > give_up_at:
                    message = f"result not delivered after {RESULT_RETRY_WINDOW_S:g}s of retries"
                    log_fields(logging.ERROR, message, fields)
                    return None, None
                message = f"result delivery failed: {describe(exc)}; retrying in {delay:.1f}s"
                contact.failed(fields_line(message, ctx._identity()))
                last_chance = self._stopping.wait(delay)
                continue
            if contact is not None:
                contact.answered()
            if not isinstance(answer, dict):
                return None, None
            if answer.get("accepted") is False:
                fields = {**ctx._identity(), "reason": answer.get("reason")}
                log_fields(logging.INFO, "result ignored", fields)
            task = answer.get("task")
            return None, task if isinstance(task, dict) else None


def _delivered_after(away: float, ctx: Context) -> str:
    return fields_line(f"result delivered after {away:.1f}s of retries", ctx._identity())


def _fallback(ctx: Context, refused: Outcome, error: ApiError) -> Outcome | None:
    """The failure reported in place of a refused result; None when there is none."""
    if error.status in CREDENTIAL_STATUSES or refused.fallback:
        return None
    details: dict[str, Any] = {"refused": "fail" if refused.path == FAIL else "complete"}
    if refused.path == FAIL:
        details["error_code"] = refused.body.get("error_code")
    details.update(status=error.status, code=error.code, message=_clip(error.message))
    body = {
        "token": ctx.token,
        "error_code": "INVALID_RESULT",
        "error_message": f"the runtime refused the task's result: {_clip(str(error))}",
        "retryable": False,
        "details": details,
    }
    return Outcome(FAIL, body, fallback=True)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"
