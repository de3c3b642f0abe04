"""What a worker logs while the runtime is away: one line, then fewer and fewer.

Every poll thread, the heartbeat thread, registration and each result being
delivered retry on their own while the runtime (or its database) cannot
answer. Logged one line per retry, a worker with four poll threads wrote
about seventy lines a minute through an outage, which buries whatever else
the log holds. The poll threads, the heartbeat and registration share one
Contact instead, and each result being delivered has one of its own (a
runtime that answers polls may still fail to store one execution's result,
and that must not read as the runtime coming and going):

- the first failure after the runtime last answered is logged as it is, at
  WARNING;
- the failures after it are logged at DEBUG only, except one reminder at
  WARNING when the next reminder is due: REMINDER_FIRST_S after the loss,
  then at intervals doubling up to REMINDER_MAX_S, each saying how long the
  runtime has been away and how many lines were held back;
- the first answer after that is logged once, at INFO ("runtime reachable
  again after 12.3s", or what the owner passes as `back`).

Only failures that mean "the runtime is away" (no answer, 5xx, 408, 429) go
through here; a refusal is about the request and is logged where it happens.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from orbit_sdk._log import LOGGER

REMINDER_FIRST_S = 10.0
REMINDER_MAX_S = 600.0


class Contact:
    """Whether the runtime answered the last call, for the threads that share it."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        back: Callable[[float], str] = lambda away: f"runtime reachable again after {away:.1f}s",
    ) -> None:
        self._clock = clock
        self._back = back
        self._lock = threading.Lock()
        self._lost_at: float | None = None
        self._gap = REMINDER_FIRST_S
        self._next_reminder = 0.0
        self._held_back = 0

    @property
    def lost(self) -> bool:
        return self._lost_at is not None

    def failed(self, line: str) -> None:
        """Logs line, a retry because the runtime did not answer, if it is due."""
        with self._lock:
            now = self._clock()
            if self._lost_at is None:
                self._lost_at = now
                self._gap = REMINDER_FIRST_S
                self._next_reminder = now + self._gap
                self._held_back = 0
                LOGGER.warning("%s", line)
                return
            if now < self._next_reminder:
                self._held_back += 1
                LOGGER.debug("%s", line)
                return
            away, held_back = now - self._lost_at, self._held_back
            self._gap = min(self._gap * 2, REMINDER_MAX_S)
            self._next_reminder = now + self._gap
            self._held_back = 0
        LOGGER.warning(
            "%s (runtime unreachable for %.0fs; %d similar lines logged at DEBUG only)",
            line,
            away,
            held_back,
        )

    def answered(self) -> None:
        """Notes an answer from the runtime; logs the end of an outage once."""
        if self._lost_at is None:  # the common case, without the lock
            return
        lost_at = self._end_outage()
        if lost_at is not None:  # else another thread logged it
            LOGGER.info("%s", self._back(self._clock() - lost_at))

    def _end_outage(self) -> float | None:
        with self._lock:
            lost_at, self._lost_at = self._lost_at, None
        return lost_at
