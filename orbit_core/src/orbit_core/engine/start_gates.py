"""Start gates: a workflow's `debounce` and `rate`, the two limits on a
start besides its `concurrency` (engine/admission.py). The order is
debounce, then concurrency, then rate: the rate is asked last so that the
starts themselves (WorkflowStarted) keep to it, and an execution waiting
for a token holds the concurrency slot it was given. An execution held at
one gate records `WorkflowWaiting` with that gate's reason and is asked at
the next once it passes (docs/language/flow-control.md).

Debounce. The first start of a key creates the execution and holds it
(`WorkflowWaiting`, reason `debounce`, with `due_ms`). A later start of the
same definition and key, while it is held, is folded into it: the pending
execution records `WorkflowDebounced` with the later input (the last input
wins) and a new due time, `period` after that start but never more than
`max_wait` after the first; the later caller is answered with the pending
execution's id (`created: false`). When the due time passes, the execution
goes on to the rate gate.

Rate. One token bucket per workflow name and key (orbit_core/flow/rate.py).
An execution that finds a token, with nobody of its key in line before it,
passes and the bucket's new state goes into the group (`Tx.rates`), which
the store writes in the same commit. Otherwise it waits in line (priority,
then arrival: the ticket in its event) and a timer lets the first in line
go when the next token is due. With `on_exceed: drop` a start request that
finds no token is refused before anything is created (`refuse`).

What survives a restart: the held executions are in their histories
(`adopted` puts them back in line or pending), the buckets in the store
(`load`). A group that fails after taking a token leaves the bucket in
memory emptier than the store's: later starts wait a little longer, never
less. Like admission, every structure here may hold executions that have
since started or ended; they are pruned when read. An execution that leaves
memory is taken out (`forget`), so that one coming back under its id (a
start whose group was undone, tried again, maybe with another key) is put
in its own line rather than found in the old one's place.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import attrs

from orbit_core.engine.commands import Tx
from orbit_core.engine.counters import Counters
from orbit_core.engine.live import Live
from orbit_core.errors import RateLimitedError
from orbit_core.flow import keys, rate
from orbit_core.ir.definition import Rate
from orbit_core.jsontypes import JsonValue
from orbit_core.plan import Plan
from orbit_core.ports import RateRow
from orbit_core.schedules.times import format_duration

Scope = tuple[str, str]  # (workflow name, key text); a debounce's: (definition hash, key text)

RATE = "rate"
DEBOUNCE = "debounce"


@attrs.frozen
class Hold:
    """Why a new execution waits at a gate: the fields of its WorkflowWaiting."""

    reason: str
    key: str
    label: str
    limit: int
    ticket: int
    period_ms: int | None = None
    due_ms: int | None = None


def _execution(plan: Plan, execution_id: str) -> dict[str, str]:
    d = plan.defn
    return {"id": execution_id, "workflow": d.name, "version": d.version}


def _rate_of(plan: Plan) -> Rate | None:
    flow = plan.defn.flow
    return flow.rate if flow is not None else None


class StartGates:
    def __init__(self, get: Callable[[str], Live | None], counters: Counters) -> None:
        self._get = get
        self._counters = counters
        # Rate: each key's bucket (theoretical arrival time, microseconds)
        # and line: (-priority, ticket, execution id).
        self._tats: dict[Scope, int] = {}
        self._lines: dict[Scope, list[tuple[int, int, str]]] = {}
        # Who is in a line, with the ticket of its entry (an entry with
        # another ticket is stale: its execution left and came back).
        self._in_line: dict[str, int] = {}
        self._ticket = 0
        # Debounce: the pending execution of each (definition hash, key).
        self._pending: dict[Scope, str] = {}
        # Timers: (due ms, kind, scope or execution id).
        self._timers: list[tuple[int, str, str, str]] = []

    # ---- recovery

    def load(self, rows: list[RateRow]) -> None:
        """The buckets the store holds (before executions are adopted)."""
        for row in rows:
            scope = (row.workflow, row.key)
            self._tats[scope] = max(self._tats.get(scope, 0), row.tat_us)

    def adopted(self, live: Live) -> None:
        """An execution taken into memory from its history: back in line,
        or pending, when a gate held it."""
        state = live.state
        waiting = state.waiting
        if state.started or state.terminal or waiting is None:
            return
        if waiting["reason"] == RATE:
            scope = (state.workflow, waiting["key"])
            self._ticket = max(self._ticket, state.flow_ticket)
            self._enqueue(scope, live, state.flow_ticket)
            self._push(0, RATE, scope)
        elif waiting["reason"] == DEBOUNCE:
            self._pending[(state.definition_hash, waiting["key"])] = state.id
            self._push(waiting.get("due_ms", 0), DEBOUNCE, ("", state.id))

    def forget(self, live: Live) -> None:
        """An execution leaving memory (ended, undone, owned elsewhere now)."""
        state = live.state
        self._in_line.pop(state.id, None)
        waiting = state.waiting
        if waiting is not None and waiting["reason"] == DEBOUNCE:
            scope = (state.definition_hash, waiting["key"])
            if self._pending.get(scope) == state.id:
                del self._pending[scope]

    # ---- debounce

    def debounce_hold(self, live: Live, now: int) -> Hold | None:
        """For a new execution: held until `period` passes, when its
        workflow declares a debounce."""
        flow = live.plan.defn.flow
        if flow is None or flow.debounce is None:
            return None
        debounce = flow.debounce
        state = live.state
        key = keys.key_text(debounce.key, state.input, _execution(live.plan, state.id))
        self._pending[(state.definition_hash, key)] = state.id
        due = now + debounce.period_ms
        self._push(due, DEBOUNCE, ("", state.id))
        return Hold(DEBOUNCE, key, keys.key_label(debounce.key), 0, 0, debounce.period_ms, due)

    def pending(self, plan: Plan, value: JsonValue, now: int) -> tuple[Live, int] | None:
        """For a start request: the pending execution it is folded into,
        with its new due time; None when it starts an execution of its own."""
        flow = plan.defn.flow
        if flow is None or flow.debounce is None:
            return None
        debounce = flow.debounce
        key = keys.key_text(debounce.key, value, _execution(plan, ""))
        scope = (plan.defn.definition_hash, key)
        eid = self._pending.get(scope)
        live = self._get(eid) if eid is not None else None
        if live is None or not self._held(live, DEBOUNCE):
            self._pending.pop(scope, None)
            return None
        waiting = live.state.waiting
        assert waiting is not None
        due = now + debounce.period_ms
        if debounce.max_wait_ms is not None:
            due = min(due, waiting["since_ms"] + debounce.max_wait_ms)
        self._push(due, DEBOUNCE, ("", live.state.id))
        self._counters.debounced += 1
        return live, due

    # ---- rate

    def rate_hold(self, tx: Tx, live: Live) -> Hold | None:
        """Takes a token for the execution (None: it may go on), or puts it
        in line."""
        limit = _rate_of(live.plan)
        if limit is None:
            return None
        state = live.state
        key = keys.key_text(limit.key, state.input, _execution(live.plan, state.id))
        scope = (state.workflow, key)
        if self._first(scope) is None and self._take(tx, scope, limit):
            return None
        self._ticket += 1
        self._enqueue(scope, live, self._ticket)
        self._push(rate.ready_ms(self._tats.get(scope, 0), limit), RATE, scope)
        self._counters.rate_delayed += 1
        return Hold(
            RATE, key, keys.key_label(limit.key), limit.limit, self._ticket, limit.period_ms
        )

    def refuse(self, plan: Plan, value: JsonValue, execution_id: str, now: int) -> None:
        """For a start request under `rate { on_exceed: drop }`: raises when
        its key has no token (the caller then creates nothing). A workflow
        that also debounces is not refused: its start is decided later."""
        limit = _rate_of(plan)
        if limit is None or limit.on_exceed != "drop":
            return
        flow = plan.defn.flow
        if flow is not None and flow.debounce is not None:
            return
        key = keys.key_text(limit.key, value, _execution(plan, execution_id))
        scope = (plan.defn.name, key)
        tat = self._tats.get(scope, 0)
        if self._first(scope) is None and rate.take(tat, now, limit) is not None:
            return
        self._counters.rate_dropped += 1
        after = max(1, rate.ready_ms(tat, limit) - now)
        label = keys.key_label(limit.key)
        which = f" for {label} `{key}`" if label else ""
        raise RateLimitedError(
            f"start of {plan.defn.name} refused: its rate limit{which} "
            f"({limit.limit} per {format_duration(limit.period_ms)}) is reached; "
            f"the next start may go in {format_duration(after)}",
            details={"retry_after_ms": after},
        )

    def _take(self, tx: Tx, scope: Scope, limit: Rate) -> bool:
        tat = rate.take(self._tats.get(scope, 0), tx.now, limit)
        if tat is None:
            return False
        self._tats[scope] = tat
        tx.rates[scope] = tat
        return True

    # ---- time

    def next_due_ms(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    def release(self, tx: Tx) -> list[tuple[Live, bool]]:
        """The executions whose gate lets them go now, first due first, each
        with whether it was debounced (the other gates are still ahead of
        it) or had a rate token (it starts now)."""
        out: list[tuple[Live, bool]] = []
        now = tx.now
        while self._timers and self._timers[0][0] <= now:
            _, kind, first, second = heapq.heappop(self._timers)
            if kind == DEBOUNCE:
                live = self._get(second)
                if live is None or not self._held(live, DEBOUNCE):
                    continue
                waiting = live.state.waiting
                assert waiting is not None
                if waiting.get("due_ms", 0) > now:
                    continue  # replaced since: a later timer is pushed
                self._pending.pop((live.state.definition_hash, waiting["key"]), None)
                out.append((live, True))
            else:
                out.extend((live, False) for live in self._fill(tx, (first, second)))
        return out

    def _fill(self, tx: Tx, scope: Scope) -> list[Live]:
        let_go: list[Live] = []
        while (eid := self._first(scope)) is not None:
            live = self._get(eid)
            assert live is not None
            limit = _rate_of(live.plan)
            if limit is not None and not self._take(tx, scope, limit):
                self._push(rate.ready_ms(self._tats[scope], limit), RATE, scope)
                break
            heapq.heappop(self._lines[scope])
            del self._in_line[eid]
            let_go.append(live)
        if not self._lines.get(scope, True):
            del self._lines[scope]
        return let_go

    # ---- lines

    def _push(self, at: int, kind: str, what: Scope) -> None:
        heapq.heappush(self._timers, (at, kind, what[0], what[1]))

    def _held(self, live: Live, reason: str) -> bool:
        state = live.state
        waiting = state.waiting
        return (
            not state.started
            and not state.terminal
            and waiting is not None
            and waiting["reason"] == reason
        )

    def _enqueue(self, scope: Scope, live: Live, ticket: int) -> None:
        eid = live.state.id
        if eid in self._in_line:
            return
        self._in_line[eid] = ticket
        flow = live.plan.defn.flow
        state = live.state
        priority = keys.priority(
            flow.priority if flow else None, state.input, _execution(live.plan, state.id)
        )
        heapq.heappush(self._lines.setdefault(scope, []), (-priority, ticket, eid))

    def _first(self, scope: Scope) -> str | None:
        line = self._lines.get(scope)
        while line:
            _, ticket, eid = line[0]
            if self._in_line.get(eid) == ticket:
                live = self._get(eid)
                if live is not None and self._held(live, RATE):
                    return eid
                del self._in_line[eid]
            heapq.heappop(line)
        return None
