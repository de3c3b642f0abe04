"""The running executions in memory: their `Live` records by id, the tokens of
their attempts, the heap of times they fall due, and the count of running
top-level executions.

`Running` is the one owner of this state; every other component reads and
changes it through its methods, so the count of top-level executions can never
drift from the records and a token always names an execution still in memory
(or nothing). `attempt` is the one place that answers "which unit is this
token's, and is it still that unit's attempt in flight?"."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import NamedTuple

from orbit_core.api import (
    UNIT_DISPATCHED,
    UNIT_SCHEDULED,
)
from orbit_core.engine.live import Live
from orbit_core.state import Unit


class Attempt(NamedTuple):
    """What a token names: an attempt of a unit of a running execution.

    A NamedTuple rather than a frozen attrs class: one is made for every
    result a worker reports, and a tuple is built several times faster."""

    token: str
    live: Live
    key: str
    number: int

    @property
    def unit(self) -> Unit | None:
        return self.live.state.units.get(self.key)

    @property
    def in_flight(self) -> bool:
        """Whether the token is still its unit's dispatched attempt."""
        unit = self.unit
        return unit is not None and unit.status == UNIT_DISPATCHED and unit.token == self.token


_new_tuple = tuple.__new__


class Running:
    def __init__(self) -> None:
        self._live: dict[str, Live] = {}
        # Running top-level executions (children do not count against the limit).
        self._active_top = 0
        # Every token of a running execution: (execution id, unit key, attempt).
        self._tokens: dict[str, tuple[str, str, int]] = {}
        # When executions fall due (lazy: stale entries are skipped).
        self._due: list[tuple[int, str]] = []
        # The execution by id, or None: the dict's own method, since it is
        # called several times per event and a wrapper doubles its cost.
        self.get: Callable[[str], Live | None] = self._live.get

    # ---- executions

    def __contains__(self, execution_id: str) -> bool:
        return execution_id in self._live

    def __len__(self) -> int:
        return len(self._live)

    def all(self) -> list[Live]:
        """A snapshot, safe to iterate while executions come and go."""
        return list(self._live.values())

    def offered(self, execution_id: str, key: str, offer: int) -> Live | None:
        """The execution, if its unit `key` is still scheduled under offer
        `offer` and the execution has not ended nor is paused: work queued for that offer
        (routing a task, starting a child) is still wanted."""
        live = self._live.get(execution_id)
        if live is None or live.state.terminal or live.state.paused_at_ms is not None:
            # (A paused execution's work is routed again when it resumes.)
            return None
        unit = live.state.units.get(key)
        if unit is None or unit.status != UNIT_SCHEDULED or unit.offer_seq != offer:
            return None
        return live

    @property
    def active_top(self) -> int:
        return self._active_top

    def add(self, live: Live) -> None:
        previous = self._live.get(live.state.id)
        if previous is not None:
            self.remove(previous)
        self._live[live.state.id] = live
        if live.top_level:
            self._active_top += 1

    def remove(self, live: Live) -> None:
        """Drops the record if it is still the one held for its id."""
        eid = live.state.id
        if self._live.get(eid) is live:
            del self._live[eid]
            if live.top_level:
                self._active_top -= 1

    def discard(self, execution_id: str) -> list[str]:
        """Drops an execution and every token that names it; returns those tokens."""
        live = self._live.get(execution_id)
        if live is not None:
            self.remove(live)
        gone = [t for t, ref in self._tokens.items() if ref[0] == execution_id]
        for token in gone:
            del self._tokens[token]
        return gone

    # ---- tokens

    def hold(self, token: str, execution_id: str, key: str, attempt: int) -> None:
        self._tokens[token] = (execution_id, key, attempt)

    def release(self, tokens: list[str]) -> None:
        pop = self._tokens.pop
        for token in tokens:
            pop(token, None)

    def knows(self, token: str) -> bool:
        return token in self._tokens

    def attempt(self, token: str) -> Attempt | None:
        """The attempt a token names, while its execution is in memory."""
        ref = self._tokens.get(token)
        if ref is None:
            return None
        live = self._live.get(ref[0])
        if live is None:
            return None
        # Made with tuple's own constructor: a NamedTuple's `__new__` is a
        # Python function, and one Attempt is made per reported result.
        return _new_tuple(Attempt, (token, live, ref[1], ref[2]))

    # ---- due times

    def due_at(self, at_ms: int, execution_id: str) -> None:
        heapq.heappush(self._due, (at_ms, execution_id))

    def pop_due(self, now_ms: int) -> list[str]:
        """The executions due by `now_ms`, each once, in the order they fell due."""
        due: dict[str, None] = {}
        heap = self._due
        while heap and heap[0][0] <= now_ms:
            due[heapq.heappop(heap)[1]] = None
        return list(due)

    def next_due_ms(self) -> int | None:
        due = [t for t, eid in list(self._due) if eid in self._live]
        return min(due) if due else None
