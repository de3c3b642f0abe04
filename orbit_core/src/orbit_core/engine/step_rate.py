"""A step's `rate`: how many task attempts it may hand to workers per period.

A task step that declares `rate { max: N, per: P, burst: B, key: k }` has
one token bucket per workflow name, step and value of `k`
(orbit_core/flow/rate.py). A token is spent when an attempt is dispatched
(`StepDispatched`): the bucket's new state goes into the group of that
dispatch (`Tx.rates`, under the workflow `"<workflow>/<step>"`, which no
workflow name can be), so the store's row is the one the last dispatch
left.

Workers take queued tasks in their own order, so the gate cannot pick the
moment of a dispatch; it picks what is queued instead. An attempt is
queued only while the bucket holds a token for it beside one for every
attempt of its key already queued (`promised`): whatever the workers do,
each dispatch finds its token. The others wait here, in line (higher step
`priority` first, then in the order they arrived), and a timer lets the
first in line in when the bucket has earned one more token. A promise that
lapses unspent (the attempt was withdrawn, paused or cancelled, its
execution ended) is found when the bucket is next looked at: when another
attempt of its key comes, or at the bucket's timer, which, while every
token it can hold is promised, looks again one interval later. So the
gate needs no hook on every event of every execution, which the plain
path pays for.

A restart reads the buckets back (`load`, before executions are adopted),
so it refills nothing; the attempts that were queued or waiting are
SCHEDULED in their histories and go through this gate again. A group that
fails after a dispatch leaves the bucket in memory emptier than the
store's: later attempts wait a little longer, never less.

With a step `concurrency` as well, the concurrency is asked first: an
attempt waiting for a token holds its slot.

In shared mode (`buckets` given) the bucket is the store's row, shared by
every server, and the token is spent when it is promised, not at the
dispatch: the promise takes it from the row in a short transaction of its
own that holds the row (`StepSlots.take_step_token`), so two servers never
promise the same token. A promise that lapses unspent (its attempt was
withdrawn, paused or cancelled before a worker took it) has used its
token all the same, and an attempt queued again after a restart or a
take-over takes a new one: the limit errs towards fewer dispatches, never
more. A server that finds the bucket empty asks again when its time says
the next token comes (another server may have taken it first).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator

import attrs

from orbit_core.api import UNIT_SCHEDULED, FlowWaitDoc
from orbit_core.coordination import StepSlots
from orbit_core.engine.commands import Tx
from orbit_core.engine.live import Live
from orbit_core.flow import rate
from orbit_core.ir.definition import Rate
from orbit_core.ports import RateRow
from orbit_core.state import waiting_message

Scope = tuple[str, str, str]  # (workflow name, step name, key text)
Holder = tuple[str, str]  # (execution id, unit key)
# Which offer of a unit: (run, StepScheduled seq).
Offer = tuple[int, int]
# The store's workflow column for a step's buckets: a `/` keeps them apart
# from the start rates of workflows, whose names are identifiers.
SEPARATOR = "/"
# How often the buckets whose time has passed (full ones, the same as none)
# leave memory, by the engine's clock.
SWEEP_EVERY_MS = 60_000

Line = list[tuple[int, int, str, str, Offer]]  # a heap: (-priority, ticket, *holder, offer)


def still_offered(live: Live | None, unit_key: str, offer: Offer) -> bool:
    """Whether `offer` is still the unit's offer waiting for a worker: not
    taken, ended, paused or replaced by a later offer (a retry)."""
    if live is None or live.state.terminal or live.state.paused_at_ms is not None:
        return False
    unit = live.state.units.get(unit_key)
    return (
        unit is not None
        and unit.status == UNIT_SCHEDULED
        and (live.state.run, unit.offer_seq) == offer
    )


def waits_of(
    live: Live, known: dict[Holder, tuple[Scope, int, Offer]]
) -> Iterator[tuple[str, Scope, int]]:
    """(unit key, scope, since) of each unit of `live` whose current offer is in `known`."""
    eid = live.state.id
    for unit_key, unit in live.state.units.items():
        found = known.get((eid, unit_key))
        if found is None or unit.status != UNIT_SCHEDULED:
            continue
        scope, since, offer = found
        if offer == (live.state.run, unit.offer_seq):
            yield unit_key, scope, since


def first_in_line(
    line: Line,
    known: dict[Holder, tuple[Scope, int, Offer]],
    valid: Callable[[str, str, Offer], bool],
) -> Holder | None:
    """The first holder of `line` still waiting for its offer. Entries are
    not removed when their offer changes (cheaper than tracking every
    change); stale ones are dropped here as they reach the front, from the
    heap and from `known` (unless `known` has a newer offer for them)."""
    while line:
        _, _, eid, unit_key, offer = line[0]
        entry = known.get((eid, unit_key))
        if entry is not None and entry[2] == offer and valid(eid, unit_key, offer):
            return (eid, unit_key)
        heapq.heappop(line)
        if entry is not None and entry[2] == offer:
            del known[(eid, unit_key)]
    return None


def store_scope(scope: Scope) -> tuple[str, str]:
    return (f"{scope[0]}{SEPARATOR}{scope[1]}", scope[2])


@attrs.frozen
class Limited:
    """A unit's rate: its bucket, the limit, the key's label and the unit's
    place in line."""

    scope: Scope
    rate: Rate
    label: str
    priority: int


@attrs.define(slots=True)
class _Bucket:
    rate: Rate
    label: str
    capacity: int
    # Attempts queued for workers that will each spend a token.
    promised: dict[Holder, Offer] = attrs.field(factory=dict)
    # (-priority, ticket, execution id, unit key, offer)
    waiting: Line = attrs.field(factory=list)


class StepRates:
    def __init__(self, get: Callable[[str], Live | None], buckets: StepSlots | None = None) -> None:
        self._get = get
        # Shared mode: the store's buckets, spent at the promise.
        self._shared = buckets
        self._tats: dict[Scope, int] = {}
        self._buckets: dict[Scope, _Bucket] = {}
        # Where each waiting unit waits, since when, under which offer.
        self._waiting: dict[Holder, tuple[Scope, int, Offer]] = {}
        # The bucket of each promised unit (read at its dispatch).
        self._promised: dict[Holder, Scope] = {}
        self._timers: list[tuple[int, Scope]] = []
        # The earliest timer of each bucket (so a long line arms one, not one each).
        self._armed: dict[Scope, int] = {}
        self._tickets = itertools.count(1)
        self._swept_ms = 0
        self.recheck: set[Scope] = set()
        self.delayed = 0

    # ---- recovery

    def load(self, rows: list[RateRow]) -> None:
        """The step buckets among the store's rows (before adoption)."""
        for row in rows:
            workflow, sep, step = row.workflow.partition(SEPARATOR)
            if sep:
                scope = (workflow, step, row.key)
                self._tats[scope] = max(self._tats.get(scope, 0), row.tat_us)

    # ---- the gate's hooks

    def enter(self, live: Live, unit_key: str, ask: Limited, now: int) -> bool:
        """For a unit about to be queued: True when a token is promised to
        it, False when it waits in line."""
        scope = ask.scope
        bucket = self._bucket(ask)
        holder = (live.state.id, unit_key)
        offer = (live.state.run, live.state.units[unit_key].offer_seq)
        if bucket.promised.get(holder) == offer:
            return True
        if self._first_waiting(bucket) is None and self._room(scope, bucket, now):
            self._promise(bucket, scope, holder, offer)
            return True
        known = self._waiting.get(holder)
        if known is None or known[2] != offer:
            self._waiting[holder] = (scope, now, offer)
            heapq.heappush(bucket.waiting, (-ask.priority, next(self._tickets), *holder, offer))
            self.delayed += 1
        self._arm(scope, bucket, now)
        return False

    def adopted(self, live: Live, unit_key: str, ask: Limited, now: int) -> None:
        """A scheduled unit of an adopted execution: in line, let in on the
        next fill (once every execution is adopted)."""
        scope = ask.scope
        bucket = self._bucket(ask)
        holder = (live.state.id, unit_key)
        offer = (live.state.run, live.state.units[unit_key].offer_seq)
        bucket.promised.pop(holder, None)
        self._promised.pop(holder, None)
        known = self._waiting.get(holder)
        if known is None or known[2] != offer:
            self._waiting[holder] = (scope, now, offer)
            heapq.heappush(bucket.waiting, (-ask.priority, next(self._tickets), *holder, offer))
        self.recheck.add(scope)

    def spend(self, tx: Tx, live: Live, unit_key: str) -> bool:
        """An attempt handed to a worker spends the token promised to it;
        False when none was (the caller then asks whether its step has a
        rate: a task queued before this engine took the execution over)."""
        if not self._promised:
            return False
        holder = (live.state.id, unit_key)
        scope = self._promised.pop(holder, None)
        if scope is None:
            return False
        bucket = self._buckets.get(scope)
        if bucket is None:
            return False
        bucket.promised.pop(holder, None)
        if self._shared is None:
            self.charge(tx, scope, bucket.rate)
        if bucket.waiting:
            self._arm(scope, bucket, tx.now)  # (all its tokens may have been promised)
        return True

    def charge(self, tx: Tx, scope: Scope, limit: Rate) -> None:
        if self._shared is not None:
            return  # (spent when promised, by whichever server promised it)
        tat = rate.charge(self._tats.get(scope, 0), tx.now, limit)
        self._tats[scope] = tat
        tx.rates[store_scope(scope)] = tat

    def next_due_ms(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    def due(self, now: int) -> bool:
        return bool(self.recheck) or bool(self._timers and self._timers[0][0] <= now)

    def fill(self, now: int) -> list[tuple[Live, str]]:
        """The waiting units the buckets now have tokens for, in the buckets
        marked for a look or whose timer fell due; each now holds a promise
        (the caller queues them)."""
        if now - self._swept_ms >= SWEEP_EVERY_MS:
            self._sweep(now)
        scopes, self.recheck = self.recheck, set()
        while self._timers and self._timers[0][0] <= now:
            at, scope = heapq.heappop(self._timers)
            if self._armed.get(scope) == at:
                del self._armed[scope]
            scopes.add(scope)
        let_in: list[tuple[Live, str]] = []
        for scope in sorted(scopes):
            bucket = self._buckets.get(scope)
            if bucket is None:
                continue
            while self._first_waiting(bucket) is not None and self._room(scope, bucket, now):
                _, _, eid, unit_key, offer = heapq.heappop(bucket.waiting)
                self._waiting.pop((eid, unit_key), None)
                self._promise(bucket, scope, (eid, unit_key), offer)
                live = self._get(eid)
                assert live is not None
                let_in.append((live, unit_key))
            if bucket.waiting:
                self._arm(scope, bucket, now)
            elif not bucket.promised:
                del self._buckets[scope]
        return let_in

    def _sweep(self, now: int) -> None:
        self._swept_ms = now
        now_us = now * rate.US_PER_MS
        full = [s for s, tat in self._tats.items() if tat <= now_us and s not in self._buckets]
        for scope in full:
            del self._tats[scope]

    # ---- what waits

    def waiting_of(self, live: Live) -> FlowWaitDoc | None:
        if not self._waiting:
            return None
        for unit_key, scope, since in waits_of(live, self._waiting):
            bucket = self._buckets.get(scope)
            if bucket is None:
                continue
            limit = bucket.rate
            return {
                "reason": "rate",
                "key": scope[2],
                "label": bucket.label,
                "limit": limit.limit,
                "period_ms": limit.period_ms,
                "since_ms": since,
                "message": waiting_message(
                    "rate", bucket.label, scope[2], limit.limit, limit.period_ms
                ),
                "step": unit_key,
            }
        return None

    def waiting_count(self) -> int:
        return sum(1 for (e, k), (_, _, o) in self._waiting.items() if self._valid(e, k, o))

    def holds_back(self, live: Live, unit_key: str) -> bool:
        """Whether the unit's current offer waits here."""
        if not self._waiting:
            return False
        found = self._waiting.get((live.state.id, unit_key))
        if found is None:
            return False
        unit = live.state.units.get(unit_key)
        return unit is not None and found[2] == (live.state.run, unit.offer_seq)

    # ---- the bucket

    def _bucket(self, ask: Limited) -> _Bucket:
        bucket = self._buckets.get(ask.scope)
        if bucket is None:
            bucket = self._buckets[ask.scope] = _Bucket(
                ask.rate, ask.label, rate.capacity(ask.rate)
            )
        elif bucket.rate is not ask.rate:  # (a newer version may say otherwise)
            bucket.rate, bucket.capacity = ask.rate, rate.capacity(ask.rate)
        return bucket

    def _promise(self, bucket: _Bucket, scope: Scope, holder: Holder, offer: Offer) -> None:
        bucket.promised[holder] = offer
        self._promised[holder] = scope

    def _room(self, scope: Scope, bucket: _Bucket, now: int) -> bool:
        """Whether the bucket has a token beyond those promised."""
        promised = bucket.promised
        if promised:
            for holder in [h for h, o in promised.items() if not self._valid(*h, o)]:
                del promised[holder]
                if self._promised.get(holder) == scope:
                    del self._promised[holder]
        if self._shared is not None:
            flow, key = store_scope(scope)
            limit = bucket.rate
            taken, tat = self._shared.take_step_token(flow, key, lambda t: rate.take(t, now, limit))
            self._tats[scope] = tat
            return taken
        tat = self._tats.get(scope, 0)
        if tat <= now * rate.US_PER_MS:
            return len(promised) < bucket.capacity  # a full bucket
        return rate.available(tat, now, bucket.rate) > len(promised)

    def _arm(self, scope: Scope, bucket: _Bucket, now: int) -> None:
        """A timer for when the bucket earns its next token beyond those
        promised; while every token it can hold is promised, one interval
        later (a spent promise arms it too, a lapsed one is found then)."""
        promised = len(bucket.promised) if self._shared is None else 0  # (spent already)
        at = rate.ready_for(self._tats.get(scope, 0), bucket.rate, promised)
        if at is None:
            at = now + max(1, rate.interval_us(bucket.rate) // rate.US_PER_MS)
        if self._armed.get(scope, at + 1) > at:
            self._armed[scope] = at
            heapq.heappush(self._timers, (at, scope))

    def _valid(self, eid: str, unit_key: str, offer: Offer) -> bool:
        return still_offered(self._get(eid), unit_key, offer)

    def _first_waiting(self, bucket: _Bucket) -> Holder | None:
        return first_in_line(bucket.waiting, self._waiting, self._valid)
