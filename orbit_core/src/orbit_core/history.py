"""The one place that numbers and dates history events.

A history is dense: the event after seq n is seq n + 1 (`state.apply`
refuses anything else), and every event of one decision or command carries
the time of the group that records it. Producers — the decider's batches,
the engine's commands (results, dispatches, signals, pauses, cancels),
the admission line, migration, restart and fork — name the event's class
and payload and let `stamp` or a `Batch` give it its (seq, timestamp_ms).
No other module adds to `last_seq`; orbit_core/tests/test_architecture.py
checks it.

Events are frozen, so they are built stamped rather than copied to be
stamped (a copy per event would cost the hot path); the only re-stamping
is `into_slots`, which reorders events of one batch in the slots they took.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import attrs

from orbit_core import events as ev

P = ParamSpec("P")
E = TypeVar("E", bound=ev.Event)


class Numbered(Protocol):
    """A history as the stamper sees it: the seq of its newest event (0
    before the first)."""

    @property
    def last_seq(self) -> int: ...


def stamp(
    history: Numbered,
    now: int,
    cls: Callable[Concatenate[int, int, P], E],
    /,
    *fields: P.args,
    **named: P.kwargs,
) -> E:
    """The event of class `cls` with `fields` that comes next in `history`
    (to be applied before another is stamped), dated `now`."""
    return cls(history.last_seq + 1, now, *fields, **named)


class Batch:
    """Events that will follow `history`'s newest, in the order added, all
    dated `now`: what one decision records before any of it is applied."""

    __slots__ = ("_history", "events", "now")

    def __init__(self, history: Numbered, now: int) -> None:
        self._history = history
        self.now = now
        self.events: list[ev.Event] = []

    def add(
        self,
        cls: Callable[Concatenate[int, int, P], E],
        /,
        *fields: P.args,
        **named: P.kwargs,
    ) -> E:
        events = self.events
        event = cls(self._history.last_seq + len(events) + 1, self.now, *fields, **named)
        events.append(event)
        return event

    @property
    def last_seq(self) -> int:
        """The seq of the newest event, counting those of the batch."""
        return self._history.last_seq + len(self.events)


def into_slots(
    batch: Sequence[ev.Event], slots: Sequence[int], order: Sequence[ev.Event]
) -> list[ev.Event]:
    """`batch` with `order`'s events put in the places `slots` names, in
    that order, each taking the (seq, timestamp_ms) of the event it
    replaces: the numbering of the batch stays dense."""
    out = list(batch)
    for i, event in zip(slots, order, strict=True):
        was = batch[i]
        out[i] = attrs.evolve(event, seq=was.seq, timestamp_ms=was.timestamp_ms)
    return out


def problems(runs: Sequence[Sequence[ev.Event]]) -> list[str]:
    """What breaks the numbering in an execution's runs, oldest run first
    (none when sound): each run numbered 1, 2, 3, … with no gap, and no
    event dated before the one it follows, across runs too. For tests and
    checks over stored histories."""
    found: list[str] = []
    last_ms: int | None = None
    for run, events in enumerate(runs, 1):
        for expected, event in enumerate(events, 1):
            if event.seq != expected:
                found.append(f"run {run}: {event.TYPE} has seq {event.seq}, not {expected}")
            if last_ms is not None and event.timestamp_ms < last_ms:
                found.append(
                    f"run {run}: #{event.seq} {event.TYPE} is dated {event.timestamp_ms}, "
                    f"before {last_ms}"
                )
            last_ms = event.timestamp_ms
    return found
