"""The worker's session: opened at start, reopened when the runtime forgets it."""

from __future__ import annotations

import threading
from typing import Any

from orbit_sdk._backoff import Backoff, RandomSource
from orbit_sdk._contact import Contact
from orbit_sdk._log import LOGGER
from orbit_sdk.client import ApiError, Client

REGISTER = "/v1/workers/register"
DEFAULT_HEARTBEAT_INTERVAL_MS = 5000
# The runtime's worker protocol extension this SDK can use: a result that
# carries the next poll (docs/worker-protocol.md in the ORBIT repository).
RESULT_THEN_POLL = "result-then-poll"


def is_transient(error: ApiError) -> bool:
    """Connection failures and 5xx answers are retried; other answers are final."""
    return error.is_connection_error or error.status >= 500


def is_away(error: ApiError) -> bool:
    """The runtime, its database or a proxy before it could not answer the
    call itself (no answer, 5xx, a proxy's 408, a 429 shedding load)."""
    return is_transient(error) or error.status in (408, 429)


def is_unknown_session(error: ApiError) -> bool:
    return error.status == 404 and error.code == "UNKNOWN_SESSION"


def describe(error: ApiError) -> str:
    return error.message if error.is_connection_error else str(error)


class Session:
    """Holds the current worker_session_id for every thread of a worker.

    After a runtime restart every thread that touches the session gets
    UNKNOWN_SESSION at about the same time; renew() makes sure only the first
    of them registers again and the others pick up the new session.
    """

    def __init__(
        self,
        client: Client,
        announcement: dict[str, Any],
        stopping: threading.Event,
        random_source: RandomSource,
        contact: Contact,
    ) -> None:
        self._client = client
        self._random = random_source
        self._contact = contact
        # Asks for the extensions this SDK uses; a runtime that does not know
        # the field ignores it and answers the book's protocol.
        self._announcement = {**announcement, "extensions": [RESULT_THEN_POLL]}
        self._stopping = stopping
        self._lock = threading.Lock()
        self._id: str | None = None
        self._heartbeat_interval_ms = DEFAULT_HEARTBEAT_INTERVAL_MS
        # Whether the runtime offered result-then-poll at the last registration.
        self.result_then_poll = False

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def heartbeat_interval_s(self) -> float:
        return self._heartbeat_interval_ms / 1000

    def open(self) -> bool:
        """Registers, retrying transient failures; False if stopped first.

        A refusal (401, 403, 400 ...) raises ApiError: the worker cannot start.
        """
        with self._lock:
            return self._register(refusals_are_fatal=True)

    def renew(self, lost_id: str | None) -> None:
        """Registers again, unless another thread already replaced lost_id."""
        with self._lock:
            if self._id != lost_id:
                return
            LOGGER.info("worker session is unknown to the runtime; registering again")
            self._register(refusals_are_fatal=False)

    def _register(self, refusals_are_fatal: bool) -> bool:
        backoff = Backoff(self._random)
        while not self._stopping.is_set():
            try:
                _, answer = self._client.post(REGISTER, self._announcement)
            except ApiError as exc:
                if refusals_are_fatal and not is_transient(exc):
                    raise
                # A refusal after a restart may be a configuration being fixed
                # on the runtime side, so it is retried like an outage.
                delay = backoff.next_delay()
                line = f"{describe(exc)}; retrying in {delay:.1f}s"
                if is_away(exc):
                    self._contact.failed(line)
                else:
                    self._contact.answered()
                    LOGGER.warning("%s", line)
                self._stopping.wait(delay)
                continue
            self._contact.answered()
            self._id = str(answer["worker_session_id"])
            interval = answer.get("heartbeat_interval_ms")
            self._heartbeat_interval_ms = int(interval or DEFAULT_HEARTBEAT_INTERVAL_MS)
            # A runtime restarted with other settings may offer less: read anew.
            self.result_then_poll = RESULT_THEN_POLL in (answer.get("extensions") or [])
            LOGGER.info(
                "worker %s registered (%d tasks)",
                self._announcement["worker_id"],
                len(self._announcement["contracts"]),
            )
            for warning in answer.get("warnings") or []:
                LOGGER.warning("runtime: %s", warning)
            return True
        return False
