"""Capped exponential backoff with full jitter, shared by every retry loop of the SDK.

A ceiling starts at 0.2 s and doubles after each failure up to 5 s; each delay
is drawn uniformly between zero and the ceiling. Without the random part, all
the workers that lost the runtime at the same moment (a restart, a failover)
would come back at the same moments too and meet it as one burst, again and
again. The random source is a parameter so that tests can fix the delays.
"""

from __future__ import annotations

import random
from typing import Callable

INITIAL_DELAY_S = 0.2
MAX_DELAY_S = 5.0

# Returns a float in [0, 1], like random.random.
RandomSource = Callable[[], float]


class Backoff:
    """Delays below a ceiling of 0.2 s doubling up to 5 s; reset() after a success."""

    __slots__ = ("_ceiling", "_random")

    def __init__(self, random_source: RandomSource = random.random) -> None:
        self._random = random_source
        self._ceiling = INITIAL_DELAY_S

    def next_delay(self) -> float:
        ceiling = self._ceiling
        self._ceiling = min(ceiling * 2, MAX_DELAY_S)
        return ceiling * min(max(self._random(), 0.0), 1.0)

    def reset(self) -> None:
        self._ceiling = INITIAL_DELAY_S
