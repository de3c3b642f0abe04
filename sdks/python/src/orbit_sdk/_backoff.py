"""Exponential backoff shared by every retry loop of the SDK."""

from __future__ import annotations

INITIAL_DELAY_S = 0.2
MAX_DELAY_S = 5.0


class Backoff:
    """Delays of 0.2 s doubling up to 5 s; reset() after a success."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = INITIAL_DELAY_S

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, MAX_DELAY_S)
        return delay

    def reset(self) -> None:
        self._next = INITIAL_DELAY_S
