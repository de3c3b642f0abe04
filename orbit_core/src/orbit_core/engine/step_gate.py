"""The step gate: how many task attempts a step's `concurrency` lets out.

A task step that declares `concurrency { max: N, key: k }` has at most N
attempts out at once per value of `k`, across every execution of its
workflow (all versions); without a key, N in all. An attempt is out from
the moment its unit is queued for workers until the unit leaves that
offer: it completes, fails, times out, is lost, is cancelled (a retry
is a new offer, and queues again through the gate). A unit whose slot is
taken is not queued: it waits here, in line (higher step `priority`
first, then in the order it arrived), and is queued in the group where a
slot frees.

Nothing is recorded for it: the holders are the units of the step in
memory that are SCHEDULED or DISPATCHED under the offer they were let in
with, so recovery rebuilds the counts from the histories. An adopted
unit that was DISPATCHED holds its slot; an adopted SCHEDULED one goes in
line and is let in on the next tick, after every execution has been
adopted, so the dispatched ones are counted first. The sets are pruned
when read, as `admission` does: any change to an execution that holds a
slot marks the slot's scope for a look on the next fill.

In shared mode (`slots` given) the slots are rows in the store, counted
for the whole group of servers, and so is the line (engine/step_slots.py):
a unit is let in when it takes one, which it may only while no unit of
another server waits ahead of it; refused, it has a waiting row there. The
line here orders this server's own units as the store orders the rows
(higher priority, then earlier `since`, then execution id and unit key,
never an arrival ticket), so the unit it asks with is never behind another
of its own. It asks with its first unit, and with a new unit that goes
ahead of it; a line whose first unit found no free slot asks again every
`step_slots.RETRY_MS`.

A step's `rate` is asked after its concurrency (engine/step_rate.py): a
unit let in here is queued only once a token is promised to it, and holds
its slot meanwhile.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable

import attrs

from orbit_core import unitkeys
from orbit_core.api import UNIT_DISPATCHED, UNIT_SCHEDULED, FlowWaitDoc
from orbit_core.coordination import StepSlots
from orbit_core.engine.commands import Tx
from orbit_core.engine.live import Live
from orbit_core.engine.step_rate import (
    Holder,
    Limited,
    Line,
    Offer,
    Scope,
    StepRates,
    first_in_line,
    still_offered,
    waits_of,
)
from orbit_core.engine.step_slots import RETRY_MS, SharedSlots
from orbit_core.flow import keys
from orbit_core.ir import Step
from orbit_core.ir.expr import Expr, Get, Input
from orbit_core.jsontypes import JsonValue
from orbit_core.ports import StepSlot
from orbit_core.state import waiting_message

# Scope: (workflow name, step name, key text); Holder: (execution id, unit
# key); Offer: which offer of a unit, (run, StepScheduled seq). The run
# matters: a restarted execution numbers its events from 1 again.


@attrs.define(slots=True)
class _Line:
    limit: int
    label: str
    running: dict[Holder, Offer] = attrs.field(factory=dict)
    # (-priority, ticket, execution id, unit key, offer seq); in shared mode
    # the ticket is the unit's `since` (the store's order of the line).
    waiting: Line = attrs.field(factory=list)


@attrs.frozen
class Gated:
    """The limits on one unit: its step's concurrency (`scope` None when
    the step declares none) and rate."""

    scope: Scope | None
    limit: int
    label: str
    priority: int
    rate: Limited | None = None


class StepGate:
    def __init__(self, get: Callable[[str], Live | None], slots: StepSlots | None = None) -> None:
        self._get = get
        # Shared mode: the slots are the store's (None: counted here).
        self.shared = SharedSlots(slots, self._holding, self._place) if slots is not None else None
        # Shared mode: when the lines whose first unit found no slot ask again.
        self._retry: set[Scope] = set()
        self._retry_at: int | None = None
        self._lines: dict[Scope, _Line] = {}
        # Where each unit waiting in a line waits, with since when.
        self._waiting: dict[Holder, tuple[Scope, int, Offer]] = {}
        # The scopes an execution holds slots in (so a change to it marks them).
        self._held: dict[str, set[Scope]] = {}
        self._tickets = itertools.count(1)
        self.recheck: set[Scope] = set()
        # The executions changed since the last fill: only their holders
        # can have let go of a slot (a line nobody waits in is pruned of
        # those alone; one somebody waits in is counted in full).
        self._dirty: set[str] = set()
        self.delayed = 0
        self.rates = StepRates(get, slots)

    # ---- reading a unit

    @staticmethod
    def gated(live: Live, unit_key: str) -> Gated | None:
        """The step limit that applies to the unit, or None."""
        spec = live.plan.spec(unit_key)
        if spec is None or spec.is_child or spec.is_builtin:
            return None
        step = spec.step
        flow = step.flow
        if flow is None or (flow.concurrency is None and flow.rate is None):
            return None
        if unitkeys.compensated(unit_key) is not None:
            return None  # a compensation runs another task: not the step's
        state = live.state
        execution = {"id": state.id, "workflow": state.workflow, "version": state.version}
        local = _vars(live, step, spec.element)
        priority = (
            keys.priority(flow.priority, state.input, execution, local)
            if flow.priority is not None
            else 0
        )
        concurrency, limit = flow.concurrency, flow.rate
        scope: Scope | None = None
        if concurrency is not None:
            key = _key_text(concurrency.key, state.input, execution, local)
            scope = (state.workflow, step.name, key)
        if limit is None:
            assert concurrency is not None
            return Gated(scope, concurrency.limit, keys.key_label(concurrency.key), priority)
        if scope is not None and concurrency is not None and limit.key == concurrency.key:
            rate_key = scope[2]
        else:
            rate_key = _key_text(limit.key, state.input, execution, local)
        return Gated(
            scope,
            concurrency.limit if concurrency is not None else 0,
            keys.key_label(concurrency.key) if concurrency is not None else "",
            priority,
            Limited(
                (state.workflow, step.name, rate_key), limit, keys.key_label(limit.key), priority
            ),
        )

    def _holding(self, holder: Holder, offer: Offer) -> bool:
        live = self._get(holder[0])
        if live is None or live.state.terminal:
            return False
        unit = live.state.units.get(holder[1])
        if unit is None or (live.state.run, unit.offer_seq) != offer:
            return False
        if unit.status == UNIT_DISPATCHED:
            return True
        # A paused execution's queued tasks leave the queue; it queues them
        # again, through the gate, when it resumes.
        return unit.status == UNIT_SCHEDULED and live.state.paused_at_ms is None

    def _place(self, holder: Holder, offer: Offer) -> tuple[int, int] | None:
        """(priority, since) of a unit waiting in a line here with `offer`."""
        found = self._waiting.get(holder)
        if found is None or found[2] != offer:
            return None
        live = self._get(holder[0])
        if not still_offered(live, holder[1], offer):
            return None
        assert live is not None
        gated = self.gated(live, holder[1])
        return None if gated is None else (gated.priority, found[1])

    def _count(self, line: _Line) -> int:
        stale = [h for h, offer in line.running.items() if not self._holding(h, offer)]
        for holder in stale:
            del line.running[holder]
        return len(line.running)

    def _line(self, gated: Gated) -> _Line:
        assert gated.scope is not None
        line = self._lines.get(gated.scope)
        if line is None:
            line = self._lines[gated.scope] = _Line(gated.limit, gated.label)
        line.limit = gated.limit  # (a newer version may say otherwise)
        return line

    def _hold(self, line: _Line, scope: Scope, holder: Holder, offer: Offer) -> None:
        line.running[holder] = offer
        self._held.setdefault(holder[0], set()).add(scope)

    # ---- the engine's hooks

    def enter(self, live: Live, unit_key: str, now: int) -> bool:
        """For a unit about to be queued: True when it may be (it then holds
        a slot), False when it waits in line."""
        gated = self.gated(live, unit_key)
        if gated is None:
            return True
        if gated.scope is not None:
            line = self._line(gated)
            holder = (live.state.id, unit_key)
            offer = (live.state.run, live.state.units[unit_key].offer_seq)
            known = self._waiting.get(holder)
            if known is not None and known[2] == offer:
                since = known[1]
            elif self.shared is not None:
                # The history's time, so any owner gives the unit one place.
                since = live.state.units[unit_key].scheduled_at_ms or now
            else:
                since = now
            if line.running.get(holder) == offer:
                pass  # queued again (a lost attempt's redelivery): holds its slot
            elif self._may_ask(line, gated.priority, since, holder) and self._free(
                line, gated.scope, holder, offer, priority=gated.priority, since=since
            ):
                self._hold(line, gated.scope, holder, offer)
            else:
                self._enqueue(line, gated, holder, offer, since)
                self.delayed += 1
                if self.shared is not None:
                    self._ask_again(gated.scope, now)
                return False
        return self._rated(live, unit_key, gated, now)

    def _may_ask(self, line: _Line, priority: int, since: int, holder: Holder) -> bool:
        """Whether a new unit may ask for a slot before waiting: when nobody
        waits here; in shared mode also when it goes ahead of the first
        unit waiting here (the store then has its row ahead of theirs)."""
        if self._first_waiting(line) is None:
            return True
        if self.shared is None:
            return False
        return (-priority, since, *holder) < line.waiting[0][:4]

    def _free(
        self, line: _Line, scope: Scope, holder: Holder, offer: Offer, *, priority: int, since: int
    ) -> bool:
        """Whether a slot is free for the unit (in shared mode: whether it
        took one in the store; refused, it has a waiting row there)."""
        if self.shared is not None:
            return self.shared.take(
                scope, holder, offer, line.limit, priority=priority, since=since
            )
        return len(line.running) < line.limit or self._count(line) < line.limit

    def _ask_again(self, scope: Scope, now: int) -> None:
        self._retry.add(scope)
        if self._retry_at is None:
            self._retry_at = now + RETRY_MS

    def _rated(self, live: Live, unit_key: str, gated: Gated, now: int) -> bool:
        """True when the unit's step has no rate, or a token for it."""
        if gated.rate is None:
            return True
        return self.rates.enter(live, unit_key, gated.rate, now)

    def adopted(self, live: Live, unit_key: str, now: int) -> bool:
        """For a unit of an adopted execution: True when the caller queues
        it as usual (not gated), False when the gate took it (a dispatched
        one holds its slot, a scheduled one waits for the next fill)."""
        gated = self.gated(live, unit_key)
        if gated is None:
            return True
        unit = live.state.units[unit_key]
        if gated.scope is None:
            # A rate alone: a dispatched unit spent its token (the store
            # has the bucket); a scheduled one waits for a promise.
            if unit.status != UNIT_DISPATCHED and gated.rate is not None:
                self.rates.adopted(live, unit_key, gated.rate, unit.scheduled_at_ms or now)
            return False
        line = self._line(gated)
        holder = (live.state.id, unit_key)
        offer = (live.state.run, unit.offer_seq)
        if self.shared is not None:
            self.shared.adopted(holder[0])
        if unit.status == UNIT_DISPATCHED:
            self._hold(line, gated.scope, holder, offer)
            if self.shared is not None:
                self.shared.held(gated.scope, holder, offer)
        else:
            line.running.pop(holder, None)
            self._enqueue(line, gated, holder, offer, unit.scheduled_at_ms or now)
            self.recheck.add(gated.scope)
        return False

    def dispatched(self, tx: Tx, live: Live, unit_key: str) -> None:
        """An attempt is handed to a worker: it spends a token of its step's
        rate, if any, in the dispatch's group."""
        if self.rates.spend(tx, live, unit_key):
            return
        spec = live.plan.spec(unit_key)
        if spec is None or spec.step.flow is None or spec.step.flow.rate is None:
            return
        gated = self.gated(live, unit_key)
        if gated is not None and gated.rate is not None:
            self.rates.charge(tx, gated.rate.scope, gated.rate.rate)

    def changed(self, execution_id: str) -> None:
        """Something happened to the execution: its slots may be free."""
        scopes = self._held.get(execution_id)
        if scopes:
            self.recheck.update(scopes)
            self._dirty.add(execution_id)

    def forget(self, execution_id: str, *, ended: bool = True) -> None:
        """The execution left memory: it `ended`, or another server owns it."""
        if self.shared is not None:
            self.shared.forget(execution_id, ended=ended)
        scopes = self._held.pop(execution_id, None)
        if scopes:
            self.recheck.update(scopes)
            self._dirty.add(execution_id)

    def readopted(self, execution_id: str) -> None:
        """An execution read back from the store after its group was undone:
        shared mode reconciles its slots (the undone group may have taken
        one for an offer its history does not have, which the same unit,
        decided again later, would not ask for again)."""
        if self.shared is not None:
            self.shared.adopted(execution_id)

    def abandon(self, execution_id: str) -> None:
        """An execution that never came to be (its creating group undone):
        shared mode deletes the store's slots taken for it."""
        if self.shared is not None:
            self.shared.abandon(execution_id)
        self.forget(execution_id)

    def freed(self, execution_ids: Iterable[str]) -> list[StepSlot]:
        """Shared mode: the store's slots the group's changes let go of (for
        its commit); their scopes are looked at again once it is durable."""
        if self.shared is None:
            return []
        return self.shared.freed(execution_ids)

    def left(self, execution_ids: Iterable[str]) -> list[StepSlot]:
        """Shared mode: the store's waiting rows of units the group's changes
        took out of a line without a slot (for its commit)."""
        if self.shared is None:
            return []
        return self.shared.left(execution_ids)

    def committed(self, freed: list[StepSlot]) -> None:
        """Shared mode: a commit deleted `freed`; the lines of their scopes
        that wait ask again at the next fill."""
        for slot in freed:
            workflow, _, step = slot.flow.partition("/")
            scope = (workflow, step, slot.key)
            if scope in self._lines:
                self.recheck.add(scope)

    def reconcile(self) -> None:
        if self.shared is not None:
            self.shared.reconcile()

    def undone(self, execution_ids: Iterable[str]) -> None:
        """A group that changed these executions was undone."""
        if self.shared is not None:
            self.shared.undone(execution_ids)

    def due(self, now: int) -> bool:
        """Whether `fill` has anything to look at."""
        if self._retry_at is not None and self._retry_at <= now:
            self._retry_at = None
            self.recheck.update(self._retry)
            self._retry.clear()
        return bool(self.recheck) or self.rates.due(now)

    def next_due_ms(self) -> int | None:
        due = self.rates.next_due_ms()
        if self._retry_at is not None and (due is None or self._retry_at < due):
            return self._retry_at
        return due

    def fill(self, now: int) -> list[tuple[Live, str]]:
        """The waiting units a free slot or a rate's new token lets in, in
        the scopes marked for a look; each now holds its slot and token
        (the caller queues them)."""
        let_in = self._fill_slots(now) if self.recheck else []
        if self.rates.due(now):
            let_in.extend(self.rates.fill(now))
        return let_in

    def _fill_slots(self, now: int) -> list[tuple[Live, str]]:
        scopes, self.recheck = self.recheck, set()
        dirty, self._dirty = self._dirty, set()
        let_in: list[tuple[Live, str]] = []
        for scope in sorted(scopes):
            line = self._lines.get(scope)
            if line is None:
                continue
            if not line.waiting:
                # Nobody to let in: drop the holders that let go, so an
                # idle line leaves memory.
                running = line.running
                for holder in [h for h, o in running.items() if h[0] in dirty]:
                    if not self._holding(holder, running[holder]):
                        del running[holder]
                if not running:
                    del self._lines[scope]
                continue
            if self.shared is not None:
                let_in.extend(self._holders_in_line(line, scope, now))
            free = line.limit - self._count(line) if self.shared is None else line.limit
            while free > 0:
                found = self._first_waiting(line)
                if found is None:
                    break
                if self.shared is not None:
                    first = line.waiting[0]
                    if not self.shared.take(
                        scope,
                        found,
                        first[4],
                        line.limit,
                        priority=-first[0],
                        since=self._waiting[found][1],
                    ):
                        self._ask_again(scope, now)  # (held, or ahead, elsewhere)
                        break
                _, _, eid, unit_key, offer = heapq.heappop(line.waiting)
                self._waiting.pop((eid, unit_key), None)
                self._hold(line, scope, (eid, unit_key), offer)
                free -= 1
                live = self._get(eid)
                assert live is not None
                gated = self.gated(live, unit_key)
                if gated is None or self._rated(live, unit_key, gated, now):
                    let_in.append((live, unit_key))
            if not line.running and not line.waiting:
                del self._lines[scope]
        return let_in

    def _holders_in_line(self, line: _Line, scope: Scope, now: int) -> list[tuple[Live, str]]:
        """Shared mode: the units waiting in line that hold their slot in the
        store already (taken before a group was undone, or found by the
        reconciliation after a restart or take-over) go in first, whatever
        their place: they count against the limit, and the units before
        them would wait for their slot for ever."""
        assert self.shared is not None
        held = self.shared.holds
        mine = [e for e in line.waiting if held(scope, (e[2], e[3]), e[4])]
        if not mine:
            return []
        line.waiting = [e for e in line.waiting if not held(scope, (e[2], e[3]), e[4])]
        heapq.heapify(line.waiting)
        let_in: list[tuple[Live, str]] = []
        for _, _, eid, unit_key, offer in mine:
            known = self._waiting.get((eid, unit_key))
            if known is None or known[2] != offer or not self._valid(eid, unit_key, offer):
                continue
            del self._waiting[(eid, unit_key)]
            self._hold(line, scope, (eid, unit_key), offer)
            live = self._get(eid)
            assert live is not None
            gated = self.gated(live, unit_key)
            if gated is None or self._rated(live, unit_key, gated, now):
                let_in.append((live, unit_key))
        return let_in

    def waiting_of(self, live: Live) -> FlowWaitDoc | None:
        """`waiting` of an execution one of whose units waits here."""
        if not self._waiting:
            return self.rates.waiting_of(live)
        for unit_key, scope, since in waits_of(live, self._waiting):
            line = self._lines.get(scope)
            if line is None:
                continue
            return {
                "reason": "concurrency",
                "key": scope[2],
                "label": line.label,
                "limit": line.limit,
                "since_ms": since,
                "message": waiting_message("concurrency", line.label, scope[2], line.limit),
                "step": unit_key,
            }
        return self.rates.waiting_of(live)

    def waiting_count(self) -> int:
        return self.rates.waiting_count() + sum(
            1 for (eid, key), (_, _, offer) in self._waiting.items() if self._valid(eid, key, offer)
        )

    # ---- the line

    def _valid(self, eid: str, unit_key: str, offer: Offer) -> bool:
        return still_offered(self._get(eid), unit_key, offer)

    def holds_back(self, live: Live, unit_key: str) -> bool:
        """Whether the unit's current offer waits here (a task queue entry
        for it, left from an earlier run with the same seq, must not
        hand it out)."""
        found = self._waiting.get((live.state.id, unit_key)) if self._waiting else None
        if found is None:
            return self.rates.holds_back(live, unit_key)
        unit = live.state.units.get(unit_key)
        if unit is not None and found[2] == (live.state.run, unit.offer_seq):
            return True
        return self.rates.holds_back(live, unit_key)

    def _enqueue(self, line: _Line, gated: Gated, holder: Holder, offer: Offer, now: int) -> None:
        known = self._waiting.get(holder)
        if known is not None and known[2] == offer:
            return
        assert gated.scope is not None
        self._waiting[holder] = (gated.scope, now, offer)
        # Shared mode: the store's order (module docstring), not arrival.
        ticket = now if self.shared is not None else next(self._tickets)
        heapq.heappush(line.waiting, (-gated.priority, ticket, *holder, offer))

    def _first_waiting(self, line: _Line) -> Holder | None:
        return first_in_line(line.waiting, self._waiting, self._valid)


@attrs.frozen
class Order:
    """Where a queued task goes among the ready tasks of its task (the
    step's `priority`, its `fairness` key and weight)."""

    priority: int = 0
    fair_key: str | None = None
    weight: int = 1


_PLAIN = Order()


def dispatch_order(live: Live, unit_key: str) -> Order:
    """The step's `priority` and `fairness` for one of its units (a
    compensation, which runs another task, has neither)."""
    spec = live.plan.spec(unit_key)
    flow = spec.step.flow if spec is not None else None
    if (
        spec is None
        or flow is None
        or (flow.priority is None and flow.fairness is None)
        or unitkeys.compensated(unit_key) is not None
    ):
        return _PLAIN
    state = live.state
    execution = {"id": state.id, "workflow": state.workflow, "version": state.version}
    local = _vars(live, spec.step, spec.element)
    priority = keys.priority(flow.priority, state.input, execution, local)
    fairness = flow.fairness
    if fairness is None:
        return Order(priority)
    # The key names its group within the task's queue: the workflow and
    # step are part of it, so equal values of two workflows stay apart.
    fair_key = keys.key_text(fairness.key, state.input, execution, local)
    weight = (
        keys.priority(fairness.weight, state.input, execution, local)
        if fairness.weight is not None
        else 1
    )
    return Order(priority, f"{state.workflow}/{spec.step.name}/{fair_key}", max(1, weight))


def _key_text(
    key: Expr | None, input: JsonValue, execution: dict[str, str], local: dict[str, JsonValue]
) -> str:
    """`keys.key_text`, read straight from the input for the usual key
    `input.<field>` (the same text: a missing field or a null is `""`)."""
    if isinstance(key, Get) and isinstance(key.target, Input) and isinstance(input, dict):
        value = input.get(key.field)
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return keys.key_text(key, input, execution, local)


def _vars(live: Live, step: Step, element: int | None) -> dict[str, JsonValue]:
    """The step's `for` variable of a fan-out element (its items are the
    input of the step's own unit)."""
    if element is None or step.for_each is None:
        return {}
    parent = live.state.units.get(step.name)
    items = parent.input if parent is not None else None
    if isinstance(items, list) and element < len(items):
        return {step.for_each.var: items[element]}
    return {}
