"""Delays between retries of background work that failed: exponential, capped,
with jitter so that threads failing together do not retry in lockstep.

The engine's threads (handlers, the ticker, built-in task reports) wait these
delays after a storage error or an unexpected exception, instead of retrying
at once: a store that refuses every commit would otherwise be hammered by
every thread as fast as it can fail. The jitter comes from the engine's
`RandomSource` port, so tests seed it.
"""

from __future__ import annotations

from orbit_core.ports import RandomSource

FIRST_S = 0.01
CAP_S = 2.0


class Backoff:
    """The delay before each next retry; `reset` after a success."""

    __slots__ = ("_cap", "_first", "_random", "failures")

    def __init__(self, random: RandomSource, first_s: float = FIRST_S, cap_s: float = CAP_S):
        self._random = random
        self._first = first_s
        self._cap = cap_s
        self.failures = 0

    def next_s(self) -> float:
        """Doubles from `first_s` up to `cap_s`; the delay drawn is between
        half that ceiling and all of it."""
        ceiling = min(self._cap, self._first * 2.0 ** min(self.failures, 30))
        self.failures += 1
        return ceiling * (0.5 + 0.5 * self._random.random())

    def reset(self) -> None:
        self.failures = 0
