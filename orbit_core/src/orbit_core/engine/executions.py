"""The running executions in memory, and the decider loop that advances them.

Every change to an execution goes through `append`; `decide` then takes the
execution to its next waiting point, routes what it scheduled (to the queue
of tasks, to a built-in, or to a child start) and handles the end of a run."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from orbit_core import events as ev
from orbit_core.api import (
    EXEC_CONTINUED_AS_NEW,
    UNIT_DISPATCHED,
    UNIT_SCHEDULED,
    ParentRef,
)
from orbit_core.coordination import StepSlots
from orbit_core.decide import Limits, decide, next_due_ms
from orbit_core.dispatch import QueuedTask, TaskIndex, routing_runtime
from orbit_core.engine.admission import Admission, Wait, admitted_events
from orbit_core.engine.catalog import Catalog
from orbit_core.engine.children import Children
from orbit_core.engine.commands import Tx
from orbit_core.engine.counters import Counters
from orbit_core.engine.live import NO_ROW, RUNTIME_WORKER, Live
from orbit_core.engine.running import Running
from orbit_core.engine.start_gates import Hold, StartGates
from orbit_core.engine.step_gate import StepGate, dispatch_order
from orbit_core.errors import ConflictError, StorageError, not_found
from orbit_core.history import stamp
from orbit_core.jsontypes import JsonValue
from orbit_core.plan import Plan
from orbit_core.ports import (
    BuiltinTasks,
    ExecutionChange,
    ExecutionRow,
    IdSource,
    Store,
    TaskOffer,
)
from orbit_core.state import ExecutionState, apply, fold
from orbit_core.visibility.fields import SearchPlan, SearchValue
from orbit_core.visibility.waiting import FIELD as WAITING_FIELD
from orbit_core.visibility.waiting import IMPLIED as WAITING_IMPLIED
from orbit_core.visibility.waiting import waiting_text

ADAPTER_DISABLED = "the HTTP adapter is disabled; start the server with --enable-http-adapter"
# Events after which the decider has nothing more to do in the same batch.
# What search fields that do not read `execution` get for it (never changed).
_NO_EXECUTION: dict[str, str] = {}
_WAITING_EVENTS = frozenset({ev.StepScheduled, ev.TimerStarted, ev.StepDispatched})

# How a built-in task reports: (token, output, error or None).
BuiltinReport = Callable[[str, JsonValue, "ev.ErrorJson | None"], None]

P = ParamSpec("P")
E = TypeVar("E", bound=ev.Event)


class Executions:
    def __init__(
        self,
        *,
        store: Store,
        ids: IdSource,
        limits: Limits,
        catalog: Catalog,
        counters: Counters,
        builtins: BuiltinTasks | None,
        report_builtin: BuiltinReport,
        offer_tasks: bool = False,
        local_first: bool = False,
        step_slots: StepSlots | None = None,
    ) -> None:
        self.store = store
        # Worker tasks go to the store's shared queue (TaskOffer) instead of
        # `index`; offers made outside a group wait in `_offers` for the next.
        # With `local_first` they wait in `index` first, and only those no
        # poll took are offered (`publish_stale`). `shared` (either way): the
        # scheduled tasks of adopted executions are offered at once (the
        # shared queue may hold them already: a task must not wait in both),
        # and tokens name their execution, for a result sent to any server.
        self.offer_tasks = offer_tasks and not local_first
        self.shared = offer_tasks
        self._offers: list[TaskOffer] = []
        # The newest index entry when `publish_stale` last looked, and the
        # newest ever pushed then.
        self._publish_mark = 0
        self._publish_seen = 0
        self.ids = ids
        self.limits = limits
        self.catalog = catalog
        self.counters = counters
        self.builtins = builtins
        self._report_builtin = report_builtin
        self.memory = Running()
        self.index = TaskIndex()
        self.children = Children(self, self.memory, store, catalog)
        self.admission = Admission(self.memory.get)
        self.gate = StepGate(self.memory.get, step_slots)
        self.gates = StartGates(self.memory.get, counters)
        self._builtin_serial = 0
        # Scheduled child and built-in units of adopted executions, routed on
        # the next tick: (execution id, unit key, offer seq).
        self._unrouted: list[tuple[str, str, int]] = []
        # Executions whose decision raised on a tick: (not before, failures).
        # They are retried later and later, so one cannot stall every timer.
        self._held: dict[str, tuple[int, int]] = {}
        # Executions a failed group touched that could not be read back from
        # the store (the database was away), with the tokens they held: out
        # of memory until `reload_lost` reads them again.
        self._lost: dict[str, list[str]] = {}
        # Shared mode: the flow gate a new top-level execution joins, when
        # this engine holds it (engine/flow_gates.py; set by Handoff).
        self.gate_of: Callable[[Live], str | None] | None = None

    # ---- memory

    def create(
        self,
        tx: Tx,
        execution_id: str,
        plan: Plan,
        value: JsonValue,
        *,
        parent: ParentRef | None,
        schedule_id: str | None,
    ) -> Live:
        d = plan.defn
        state = ExecutionState(execution_id)
        live = Live(state, plan, self.limits.effective(plan), parent is None)
        # A new execution has no `@waiting` row, which a filter reads as
        # `|task|` (waiting.py): the usual start, onto a task step, writes none.
        live.waiting = WAITING_IMPLIED
        self.memory.add(live)
        tx.changes[execution_id] = ExecutionChange(execution_id, NO_ROW, new=True)
        self.record(
            tx,
            live,
            ev.WorkflowCreated,
            d.name,
            d.version,
            d.definition_hash,
            value,
            parent,
            schedule_id,
        )
        if self.gate_of is not None:
            # (Its key reads the input just recorded. A gated child joins its
            # gate's tree too: engine/remote_children.py.)
            tx.changes[execution_id].root = self.gate_of(live)
        gates = self.gates
        wait = (
            gates.debounce_hold(live, tx.now)
            or self.admission.admit(live)
            or gates.rate_hold(tx, live)
        )
        if wait is None:
            self.record(tx, live, ev.WorkflowStarted)
        else:
            self.record(tx, live, ev.WorkflowWaiting, *_waiting_fields(wait))
        return live

    def running(self, execution_id: str) -> Live:
        """The execution, which must still be running."""
        live = self.memory.get(execution_id)
        if live is None:
            if execution_id in self._lost:
                raise self.not_loaded(execution_id)
            row = self.store.execution_row(execution_id)
            if row is None:
                raise not_found(execution_id)
            raise ConflictError(f"execution is already {row.status}", "EXECUTION_FINISHED")
        if live.state.terminal:
            raise ConflictError(f"execution is already {live.state.status}", "EXECUTION_FINISHED")
        return live

    def state_of(self, execution_id: str) -> ExecutionState:
        live = self.memory.get(execution_id)
        if live is not None:
            return live.state
        return self.stored_state(execution_id)

    def stored_state(self, execution_id: str) -> ExecutionState:
        """The state its stored history folds to (an execution not in
        memory: finished, or run by another server). Reads only the store,
        so it may run outside a group, on the caller's thread."""
        events = self.store.history(execution_id)
        if not events:
            raise not_found(execution_id)
        return fold(events, execution_id)

    def adopt(self, state: ExecutionState) -> Live | None:
        """Takes a folded execution into memory and re-indexes its tokens and tasks."""
        plan = self.catalog.by_hash(state.definition_hash)
        if plan is None:
            return None
        live = Live(state, plan, self.limits.effective(plan), state.parent is None)
        self.memory.add(live)
        for unit in state.units.values():
            for token, attempt in unit.attempts():
                self.memory.hold(token, state.id, unit.key, attempt)
            if unit.status == UNIT_SCHEDULED and not state.paused:
                # (A paused execution's scheduled units are routed at its resume.)
                spec = plan.spec(unit.key)
                if spec is None:
                    continue
                if not spec.is_child and not spec.is_builtin:
                    if not self.gate.adopted(live, unit.key, state.updated_at_ms):
                        self.memory.due_at(0, state.id)  # the gate lets it in on a tick
                    elif self.shared:
                        self._offers.append(self.offer(live, unit.key))
                    else:
                        self._queue(live, unit.key)
                else:
                    self._unrouted.append((state.id, unit.key, unit.offer_seq))
                    self.memory.due_at(0, state.id)
            elif unit.status == UNIT_DISPATCHED and (unit.worker_session or "").startswith(
                "child:"
            ):
                self.children.restore(state, unit.key, unit.worker_session or "", unit.token)
            elif unit.status == UNIT_DISPATCHED:
                self.gate.adopted(live, unit.key, state.updated_at_ms)
        self.admission.adopted(live)
        self.gates.adopted(live)
        self.push_due(live)
        return live

    def stamp_rows(self, changes: Iterable[ExecutionChange]) -> None:
        """Gives each change the projection row of its execution as it
        stands; a change of an execution no longer in memory keeps its own."""
        get = self.memory.get
        for change in changes:
            live = get(change.execution_id)
            if live is not None:
                s = live.state
                change.row = ExecutionRow(
                    s.id,
                    s.workflow,
                    s.version,
                    s.definition_hash,
                    s.status,
                    s.created_at_ms,
                    s.updated_at_ms,
                    s.last_seq,
                    s.run,
                )
                search = live.plan.search
                if search is not None:
                    events = change.events
                    # A dispatch alone makes no value known and leaves its
                    # unit waiting for what it waited for: the usual change
                    # of a task step skips both.
                    if len(events) != 1 or type(events[0]) is not ev.StepDispatched:
                        self._index(live, change, search)

    @staticmethod
    def _index(live: Live, change: ExecutionChange, search: SearchPlan) -> None:
        """The search rows `change` makes known (orbit_core.visibility)."""
        events = change.events
        s = live.state
        if s.terminal and search.input_keys is not None:
            # Only a start makes a field over the input known, and a
            # finished execution's `@waiting` row stays: the usual last
            # change of an indexed execution has nothing to write.
            for event in events:
                if type(event) is ev.WorkflowCreated:
                    break
            else:
                return
        execution = (
            {"id": s.id, "workflow": s.workflow, "version": s.version}
            if search.reads_execution
            else _NO_EXECUTION
        )
        change.search = search.values(events, s.input, s.outputs, execution)
        if s.terminal:
            return  # its `@waiting` row stays: filters test the status
        waiting = waiting_text(s, live.plan)
        if waiting != live.waiting:
            live.waiting = waiting
            change.search.append(SearchValue(WAITING_FIELD, waiting, None))

    def forget(self, live: Live) -> list[str]:
        """Drops a finished execution; returns the tokens it held."""
        eid = live.state.id
        if self.memory.get(eid) is live:
            self._leave(live)
        self.memory.remove(live)
        self.gate.forget(eid, ended=live.state.terminal)
        tokens = live.state.tokens()
        self.memory.release(tokens)
        self.children.forget(eid)
        self._held.pop(eid, None)
        if self._offers:
            # Offers not committed yet wait for the next group: not those of
            # an execution that ended or left this engine (another server
            # owns it now), whose commit would be refused for ever.
            self._offers = [o for o in self._offers if o.execution_id != eid]
        return tokens

    def discard(self, execution_id: str) -> list[str]:
        """Takes an execution out of memory; returns the tokens that named it."""
        live = self.memory.get(execution_id)
        if live is not None:
            self._leave(live)
        return self.memory.discard(execution_id)

    def _leave(self, live: Live) -> None:
        # The waiting lines forget it too: they are rebuilt from its history
        # if it comes back (`adopt`), and must not keep a slot or a place in
        # line for whatever comes back under its id (engine/admission.py).
        self.admission.forget(live)
        self.gates.forget(live)

    def rollback(self, tx: Tx) -> list[str]:
        """Rebuilds the executions a failed group touched from the store;
        returns the tokens that no longer exist. When the store cannot give
        one back now (the database is away: the usual reason the group
        failed), its whole execution tree leaves memory until `reload_lost`
        can read it again, so the engine goes on and neither a parent nor a
        child acts on a relative that is away."""
        dropped: list[str] = []
        self.gate.undone(tx.changes)
        for eid in list(tx.changes):
            live = self.memory.get(eid)
            parent = live.state.parent if live is not None else None
            gone = self.discard(eid)
            if eid in self._lost:  # its tree is away already
                self._lost[eid].extend(gone)
                continue
            # A new execution is read back too: a commit the store took
            # without the engine hearing of it (the connection dropped after
            # COMMIT) created it, and it runs here or nowhere.
            try:
                events = self.store.history(eid)
            except StorageError:
                self._lost.setdefault(eid, []).extend(gone)
                self._lose_tree(eid, parent["execution_id"] if parent else None)
                continue
            if events:
                self.adopt(fold(events, eid))
                self.gate.readopted(eid)
            else:
                self.gate.abandon(eid)
            dropped.extend(t for t in gone if not self.memory.knows(t))
        return dropped

    def _lose_tree(self, eid: str, parent_id: str | None) -> None:
        """Takes the tree of `eid` (its ancestors in memory and all their
        descendants) out of memory, into `_lost`."""
        root = eid
        while parent_id is not None and parent_id in self.memory:
            root = parent_id
            live = self.memory.get(parent_id)
            link = live.state.parent if live is not None else None
            parent_id = link["execution_id"] if link else None
        # The failed group may have unlinked a child from its parent, so the
        # children are also found by the parent their state names. (Rare:
        # the scan happens only while the database is away.)
        by_parent: dict[str, list[str]] = {}
        for other in self.memory.all():
            link = other.state.parent
            if link is not None:
                by_parent.setdefault(link["execution_id"], []).append(other.state.id)
        stack, seen = [root], set()
        while stack:
            member = stack.pop()
            if member in seen:
                continue
            seen.add(member)
            stack.extend(self.children.of(member))
            stack.extend(by_parent.get(member, ()))
            if member in self.memory:
                self._lost.setdefault(member, []).extend(self.discard(member))

    def reload_lost(self) -> None:
        """Reads back what `rollback` could not, all of it or nothing (each
        group tries, before its commands run)."""
        try:
            histories = [(eid, self.store.history(eid)) for eid in self._lost]
        except StorageError:
            return
        self._lost.clear()
        for eid, events in histories:
            if not events:
                self.gate.abandon(eid)
            elif eid not in self.memory:
                self.adopt(fold(events, eid))
                self.gate.readopted(eid)

    def lost_token(self, token: str) -> str | None:
        """The execution of a token that is out of memory until reloaded."""
        for eid, tokens in self._lost.items():
            if token in tokens:
                return eid
        return None

    @property
    def lost(self) -> bool:
        """Whether executions wait for `reload_lost`."""
        return bool(self._lost)

    @staticmethod
    def not_loaded(execution_id: str) -> StorageError:
        return StorageError(
            f"execution `{execution_id}` is not loaded: the database could not be read "
            "when its last change failed; try again once it is back"
        )

    def route_unrouted(self, tx: Tx) -> None:
        """Routes the scheduled child and built-in units of adopted
        executions (at recovery, or after their group was undone)."""
        unrouted, self._unrouted = self._unrouted, []
        try:
            self._route_each(tx, unrouted)
        except BaseException:
            self._unrouted = unrouted + self._unrouted  # the group is undone
            raise

    def _route_each(self, tx: Tx, unrouted: list[tuple[str, str, int]]) -> None:
        for eid, key, offer in unrouted:
            live = self.memory.offered(eid, key, offer)
            if live is not None:
                self.route(tx, live, key)

    # ---- time

    def tick(self, tx: Tx) -> None:
        """Decides every execution whose timer, retry or timeout fell due."""
        now = tx.now
        if self._offers:
            # Offers of executions adopted outside a group, dropped once
            # committed (a shared queue keeps one row per offer, so writing
            # one twice is harmless).
            offers = list(self._offers)
            tx.offers.extend(offers)
            tx.after_commit.append(lambda: self._drop_offers(offers))
        if self._unrouted:
            self.route_unrouted(tx)
        if self.admission.recheck:
            self.pass_rate(tx, self.admission.admit_rechecked())
        self.gate.reconcile()
        self.fill_gate(tx)
        gates_due = self.gates.next_due_ms()
        if gates_due is not None and gates_due <= now:
            self._release_gates(tx)
        due = self.memory.pop_due(now)
        held = self._held
        current = None
        try:
            # Entries pushed while these are decided wait for the next tick.
            for eid in due:
                live = self.memory.get(eid)
                if live is None:
                    continue
                hold = held.get(eid) if held else None
                if hold is not None and hold[0] > now:
                    self.memory.due_at(hold[0], eid)
                    continue
                if live.due_at is not None and live.due_at <= now:
                    live.due_at = None
                if not live.state.terminal:
                    current = eid
                    self.decide(tx, live)
                    current = None
                if hold is not None:
                    del held[eid]
        except BaseException:
            # The group is undone: what fell due is due again, except the
            # execution whose decision raised, which waits longer each time.
            if current is not None:
                failures = held[current][1] + 1 if current in held else 1
                held[current] = (now + min(60_000, 100 * 2 ** min(failures, 10)), failures)
            for eid in due:
                self.memory.due_at(held[eid][0] if eid in held else now, eid)
            raise

    def _release_gates(self, tx: Tx) -> None:
        """What a debounce or a rate lets go now (engine/start_gates.py)."""
        for live, debounced in self.gates.release(tx):
            if debounced:
                self.pass_gates(tx, live)
            else:
                self.start_admitted(tx, [live])

    def next_due_ms(self) -> int | None:
        found = [
            t
            for t in (
                self.memory.next_due_ms(),
                self.gates.next_due_ms(),
                self.gate.next_due_ms(),
            )
            if t is not None
        ]
        return min(found) if found else None

    def push_due(self, live: Live) -> None:
        due = next_due_ms(live.state, live.plan)
        if due is not None and (live.due_at is None or due < live.due_at):
            live.due_at = due
            self.memory.due_at(due, live.state.id)

    def due_now(self, tx: Tx, execution_id: str) -> None:
        """Has the next tick decide the execution."""
        self.memory.due_at(tx.now, execution_id)

    # ---- deciding

    def record(
        self,
        tx: Tx,
        live: Live,
        cls: Callable[Concatenate[int, int, P], E],
        /,
        *fields: P.args,
        **named: P.kwargs,
    ) -> E:
        """Appends the next event of `live`'s history: class `cls` with
        `fields`, numbered and dated (the group's time) by `history.stamp`."""
        event = stamp(live.state, tx.now, cls, *fields, **named)
        self.append(tx, live, event)
        return event

    def append(self, tx: Tx, live: Live, event: ev.Event) -> None:
        """Appends an event already stamped (by `history`: a decision's batch)."""
        state = live.state
        apply(state, event)
        eid = state.id
        self.gate.changed(eid)
        tx.last_event = event
        changes = tx.changes
        change = changes.get(eid)
        if change is None:
            change = changes[eid] = ExecutionChange(eid, NO_ROW)
        change.events.append(event)

    def decide(self, tx: Tx, live: Live) -> None:
        state = live.state
        plan = live.plan
        while not state.terminal:
            batch = decide(state, plan, tx.now, live.limits)
            if not batch:
                break
            settled = True
            for event in batch:
                self.append(tx, live, event)
                if type(event) not in _WAITING_EVENTS:
                    settled = False
            last = state.last_seq
            for event in batch:
                if type(event) is ev.StepScheduled:
                    self.route(tx, live, event.step)
            if settled and state.last_seq == last:
                # Only waiting states were entered (queued tasks, timers):
                # nothing else can change before new input or time arrives.
                break
        # Before a new run replaces the state: the old run's children go too.
        self.children.check(tx, live)
        if state.terminal:
            if state.status == EXEC_CONTINUED_AS_NEW:
                self._continue_as_new(tx, live)
            else:
                self._finalize(tx, live)
        elif plan.timed:
            self.push_due(live)

    def route(self, tx: Tx, live: Live, key: str) -> None:
        """Sends a scheduled unit where it runs."""
        unit = live.state.units[key]
        if unit.status != UNIT_SCHEDULED:
            return
        spec = live.plan.spec(key)
        if spec is None:
            return
        if spec.is_child:
            self.children.queue_start(tx, live, key, unit.offer_seq)
        elif spec.is_builtin:
            self._run_builtin(tx, live, key)
        else:
            self._queue(live, key, tx)
            tx.new_tasks = True

    def _queue(self, live: Live, key: str, tx: Tx | None = None) -> None:
        if not self.gate.enter(live, key, tx.now if tx is not None else live.state.updated_at_ms):
            return  # a step's concurrency or rate holds it back (`fill_gate` queues it)
        self._push(live, key, tx)

    def fill_gate(self, tx: Tx) -> None:
        """Queues the units a step's freed concurrency slot, or its rate's
        new token, lets in."""
        if not self.gate.due(tx.now):
            return
        for live, key in self.gate.fill(tx.now):
            self._push(live, key, tx)
            tx.new_tasks = True

    def _push(self, live: Live, key: str, tx: Tx | None) -> None:
        spec = live.plan.spec(key)
        assert spec is not None
        if self.offer_tasks:
            offer = self.offer(live, key)
            (tx.offers if tx is not None else self._offers).append(offer)
            return
        order = dispatch_order(live, key)
        self.index.push(
            (spec.task or "", spec.contract_version or ""),
            spec.using,
            live.state.id,
            key,
            live.state.units[key].offer_seq,
            priority=order.priority,
            fair_key=order.fair_key,
            weight=order.weight,
        )

    def publish_stale(self, tx: Tx) -> int:
        """Offers the tasks that waited in the index since the previous call
        (with `local_first`: no poll here took them) and takes them out of
        it, so each is handed out through one of the two only; returns how
        many. Those not committed are offered again with the next group."""
        mark, self._publish_mark = self._publish_mark, self.index.newest()
        self._publish_seen = self.index.pushed
        stale = self.index.take_until(mark, self._still_offered) if mark else []
        for task in stale:
            live = self.memory.get(task.execution_id)
            assert live is not None  # still offered: running
            self._offers.append(self.offer(live, task.unit_key))
        if self._offers:
            offers = list(self._offers)
            tx.offers.extend(offers)
            tx.after_commit.append(lambda: self._drop_offers(offers))
        return len(stale)

    def nothing_stale(self) -> bool:
        """Whether `publish_stale` would find nothing: the index was empty
        when it last looked and has had no entry since, and no offer waits.
        Read outside the groups (plain reads): an entry pushed meanwhile is
        seen by the next call, as if pushed just after this one."""
        return not (self._publish_mark or self._offers) and self.index.pushed == self._publish_seen

    def _still_offered(self, task: QueuedTask) -> bool:
        return self.memory.offered(task.execution_id, task.unit_key, task.offer_seq) is not None

    def _drop_offers(self, offers: list[TaskOffer]) -> None:
        done = {id(o) for o in offers}
        self._offers = [o for o in self._offers if id(o) not in done]

    def offer(self, live: Live, key: str) -> TaskOffer:
        """The shared-queue entry of a scheduled worker unit."""
        state = live.state
        unit = state.units[key]
        spec = live.plan.spec(key)
        assert spec is not None
        order = dispatch_order(live, key)
        return TaskOffer(
            state.id,
            key,
            unit.offer_seq,
            spec.task or "",
            spec.contract_version or "",
            routing_runtime(spec.using),
            spec.timeout_ms,
            {
                "execution_id": state.id,
                "workflow": state.workflow,
                "workflow_version": state.version,
                "step_id": key,
                "task_name": spec.task or "",
                "contract_version": spec.contract_version or "",
                "input": unit.input,
                "idempotency_key": unit.idempotency_key,
                "attempt": unit.attempt,
                "redelivery": unit.redelivery,
            },
            order.priority,
            order.fair_key,
            order.weight,
        )

    def dispatch_to_runtime(self, tx: Tx, live: Live, key: str, session: str) -> str:
        """Records the unit's current attempt as taken by the runtime itself (a
        builtin task or a child workflow), `session` saying which; returns its token."""
        state = live.state
        attempt = state.units[key].attempt
        spec = live.plan.spec(key)
        assert spec is not None
        token = self.ids.token()
        deadline = None if spec.timeout_ms is None else tx.now + spec.timeout_ms
        self.record(
            tx, live, ev.StepDispatched, key, attempt, token, RUNTIME_WORKER, session, deadline
        )
        self.memory.hold(token, state.id, key, attempt)
        return token

    def _run_builtin(self, tx: Tx, live: Live, key: str) -> None:
        state = live.state
        unit = state.units[key]
        spec = live.plan.spec(key)
        assert spec is not None
        self._builtin_serial += 1
        token = self.dispatch_to_runtime(tx, live, key, f"builtin:{self._builtin_serial}")
        builtins = self.builtins
        if builtins is None or not builtins.supports(spec.task or ""):
            error = ev.make_error("ADAPTER_DISABLED", ADAPTER_DISABLED, False)
            self.record(tx, live, ev.StepAttemptFailed, key, unit.attempt, error)
            return

        def done(output: JsonValue, error: ev.ErrorJson | None) -> None:
            self._report_builtin(token, output, error)

        task, value, timeout = spec.task or "", unit.input, spec.timeout_ms

        def start() -> None:
            threading.Thread(
                target=lambda: builtins.run(task, value, timeout, done), daemon=True
            ).start()

        # The task's effect (an HTTP request, say) must not happen unless its
        # StepDispatched is durable: a group whose commit fails never runs it.
        tx.after_commit.append(start)

    # ---- pause and resume (docs/operating-executions.md)

    def route_scheduled(self, tx: Tx, live: Live) -> None:
        """Routes every scheduled unit again (a resumed execution): what was
        queued before the pause was dropped from the queues while it lasted.
        An entry that survived is harmless: the first dispatch of an offer
        makes any other entry for it stale."""
        for key, unit in list(live.state.units.items()):
            if unit.status == UNIT_SCHEDULED:
                self.route(tx, live, key)

    def request_cancel(self, tx: Tx, live: Live, reason: str) -> None:
        """Records a cancellation and decides. A cancellation ends a pause
        (WorkflowResumed after it): winding down dispatches compensations
        and handlers, which a paused execution would hold for ever."""
        state = live.state
        if state.abort is None:
            self.record(tx, live, ev.CancelRequested, reason)
            if not state.started:
                # Held back by a flow-control limit: it leaves the line and
                # ends without having run anything.
                self.record(tx, live, ev.WorkflowStarted)
        if state.paused:
            self.record(tx, live, ev.WorkflowResumed)
            self.route_scheduled(tx, live)
        self.decide(tx, live)

    # ---- run ends

    def _finalize(self, tx: Tx, live: Live) -> None:
        if live.finalized:
            return
        live.finalized = True
        tx.terminal.append(live)
        self.children.deliver(tx, live.state)
        self.pass_rate(tx, self.admission.release(live))

    def pass_gates(self, tx: Tx, live: Live) -> None:
        """A debounced execution whose quiet period ended: asks the
        concurrency limit, then the rate, and starts it, or records what it
        waits for now (engine/start_gates.py has the order)."""
        wait = self.admission.admit(live) or self.gates.rate_hold(tx, live)
        if wait is None:
            self.start_admitted(tx, [live])
        else:
            self.record(tx, live, ev.WorkflowWaiting, *_waiting_fields(wait))

    def pass_rate(self, tx: Tx, admitted: list[Live]) -> None:
        """Executions a concurrency slot let in: each starts now, or waits
        for its rate's next token (holding its slot meanwhile)."""
        for live in admitted:
            hold = self.gates.rate_hold(tx, live)
            if hold is None:
                self.start_admitted(tx, [live])
            else:
                self.record(tx, live, ev.WorkflowWaiting, *_waiting_fields(hold))

    def debounce(self, tx: Tx, live: Live, value: JsonValue, due_ms: int) -> None:
        """Folds a start into the pending execution `live` (engine/start_gates.py)."""
        self.record(tx, live, ev.WorkflowDebounced, value, due_ms)

    def start_admitted(self, tx: Tx, admitted: list[Live]) -> None:
        """Starts the executions a freed slot let in, in the same group."""
        for other in admitted:
            for event in admitted_events(other, tx.now):
                self.append(tx, other, event)
            self.decide(tx, other)

    def _continue_as_new(self, tx: Tx, live: Live) -> None:
        old = live.state
        held = self.admission.scope_of(live)
        change = tx.changes[old.id]
        change.archive_run = old.run
        change.archived = change.events
        change.events = []
        self.memory.release(old.tokens())
        new = ExecutionState(old.id)
        live.state = new
        self.counters.continued_as_new += 1
        d = live.plan.defn
        self.record(
            tx,
            live,
            ev.WorkflowCreated,
            d.name,
            d.version,
            d.definition_hash,
            old.input if old.next_run is None else _next_input(change.archived),
            old.parent,
            old.schedule_id,
            old.run + 1,
        )
        # The new input may name another concurrency key (engine/admission.py).
        wait, admitted = self.admission.continued(live, held)
        if wait is None:
            self.record(tx, live, ev.WorkflowStarted)
        else:
            self.record(tx, live, ev.WorkflowWaiting, *_waiting_fields(wait))
        for sig in old.signals:
            if "delivered_to" not in sig:
                self.record(tx, live, ev.SignalReceived, sig["name"], sig["payload"])
        self.pass_rate(tx, admitted)
        # The new run is decided on the next tick, so a run that always
        # continues at once advances one run per tick.
        live.due_at = tx.now
        self.due_now(tx, old.id)


def _waiting_fields(
    wait: Wait | Hold,
) -> tuple[str, str, str, int, int, int | None, int | None]:
    """`WorkflowWaiting`'s fields after its seq and time."""
    if isinstance(wait, Hold):
        return (
            wait.reason,
            wait.key,
            wait.label,
            wait.limit,
            wait.ticket,
            wait.period_ms,
            wait.due_ms,
        )
    return (wait.reason, wait.key, wait.label, wait.limit, wait.ticket, None, None)


def _next_input(archived: Sequence[ev.Event]) -> JsonValue:
    for event in reversed(archived):
        if isinstance(event, ev.WorkflowContinuedAsNew):
            return event.input
    return None
