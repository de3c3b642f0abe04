"""Child workflows: starting a child for a parent's unit, delivering its
outcome to the parent, and cancelling children their parent stopped waiting for.

A parent stops waiting for a child when the unit's attempt ends without the
child (its timeout), when the parent aborts (unless the unit belongs to an
outcome handler, which runs after the abort), and when the parent's run ends
however it ends. `check` runs after every decision of a parent, terminal or
not, so no path leaves a child running; `reconcile` does the same at recovery
for children that an older process left behind.

In shared mode a gated child may run in another server's engine
(engine/remote_children.py): `remote` routes its start, and its start, end
and cancellation travel as inbox entries written in the deciding commit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from orbit_core import events as ev
from orbit_core import ir, unitkeys
from orbit_core import values as _values
from orbit_core.api import (
    UNIT_DISPATCHED,
    ParentRef,
)
from orbit_core.engine import flow_gates, remote_children
from orbit_core.engine.catalog import Catalog
from orbit_core.engine.commands import Tx
from orbit_core.engine.live import ChildLink, Live
from orbit_core.engine.running import Running
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.plan import Plan
from orbit_core.ports import Store
from orbit_core.state import TERMINAL, ExecutionState, fold

_CHILD = "child:"

P = ParamSpec("P")
E = TypeVar("E", bound=ev.Event)


class Parents(Protocol):
    """What children need of the decider loop (`Executions` provides it)."""

    def record(
        self,
        tx: Tx,
        live: Live,
        cls: Callable[Concatenate[int, int, P], E],
        /,
        *fields: P.args,
        **named: P.kwargs,
    ) -> E: ...

    def decide(self, tx: Tx, live: Live) -> None: ...

    def request_cancel(self, tx: Tx, live: Live, reason: str) -> None: ...

    def due_now(self, tx: Tx, execution_id: str) -> None: ...

    def dispatch_to_runtime(self, tx: Tx, live: Live, key: str, session: str) -> str: ...

    def create(
        self,
        tx: Tx,
        execution_id: str,
        plan: Plan,
        value: JsonValue,
        *,
        parent: ParentRef | None,
        schedule_id: str | None,
    ) -> Live: ...


class Children:
    def __init__(self, parents: Parents, running: Running, store: Store, catalog: Catalog) -> None:
        self._x = parents
        self._running = running
        self._store = store
        self._catalog = catalog
        # The running children, by child id, and the child ids of each parent.
        self._links: dict[str, ChildLink] = {}
        self._by_parent: dict[str, set[str]] = {}
        # Child units to start on the next tick: (parent id, unit key, offer seq).
        self._starts: list[tuple[str, str, int]] = []
        # Shared mode (set by Handoff): a gated child may be held by another
        # engine; `remote` (set once the shared engine is built) says where
        # one starts. The children held elsewhere whose cancellation was sent.
        self.shared = False
        self.remote: remote_children.GateRouter | None = None
        self._cancelled: set[str] = set()

    def queue_start(self, tx: Tx, parent: Live, key: str, offer: int) -> None:
        # Children start on the next tick, as the book's histories show.
        self._starts.append((parent.state.id, key, offer))
        self._x.due_now(tx, parent.state.id)

    def tick(self, tx: Tx) -> None:
        """Starts the children queued since the last tick, if still wanted."""
        starts, self._starts = self._starts, []
        try:
            self._start_queued(tx, starts)
        except BaseException:
            self._starts = starts + self._starts  # the group is undone: start them again
            raise

    def _start_queued(self, tx: Tx, starts: list[tuple[str, str, int]]) -> None:
        for eid, key, offer in starts:
            parent = self._running.offered(eid, key, offer)
            if parent is not None and self._unroutable(parent, key):
                # Shared mode, before its router is set (recovery): later.
                self._starts.append((eid, key, offer))
                self._x.due_now(tx, eid)
                continue
            if parent is not None:
                self._start(tx, parent, key)
                self._x.decide(tx, parent)

    def _unroutable(self, parent: Live, key: str) -> bool:
        if not self.shared or self.remote is not None:
            return False
        spec = parent.plan.spec(key)
        contract = parent.plan.contract(spec.task or "") if spec is not None else None
        if not isinstance(contract, ir.ChildContract):
            return False
        plan = self._catalog.by_hash(contract.definition_hash)
        return plan is not None and flow_gates.limited(plan.defn)

    def restore(
        self, parent: ExecutionState, key: str, worker_session: str, token: str | None
    ) -> None:
        """Re-links a child whose parent unit was waiting for it (recovery)."""
        cid = worker_session[len(_CHILD) :]
        self._links[cid] = ChildLink(parent.id, key, token or "")
        self._by_parent.setdefault(parent.id, set()).add(cid)

    def resume(self, tx: Tx) -> None:
        """Delivers children that finished while their parent was not in memory."""
        for cid in list(self._links):
            if cid not in self._running and self._store.execution_row(cid) is not None:
                found = fold(self._store.history(cid) or [], cid)
                if self.shared and not found.terminal:
                    continue  # a gated child running elsewhere: its end is sent here
                self.deliver(tx, found)

    def forget(self, parent_id: str) -> None:
        self._by_parent.pop(parent_id, None)

    def of(self, parent_id: str) -> set[str]:
        """The ids of the running children of `parent_id`."""
        return set(self._by_parent.get(parent_id, ()))

    def _start(self, tx: Tx, parent: Live, key: str) -> None:
        x = self._x
        state = parent.state
        unit = state.units[key]
        spec = parent.plan.spec(key)
        assert spec is not None
        contract = parent.plan.contract(spec.task or "")
        cid = unitkeys.child_execution_id(state.id, state.run, key)
        token = x.dispatch_to_runtime(tx, parent, key, f"{_CHILD}{cid}")
        name = spec.step.workflow or ""
        plan = (
            self._catalog.by_hash(contract.definition_hash)
            if isinstance(contract, ir.ChildContract)
            else None
        )
        if plan is None:
            self._failed(
                tx,
                parent,
                key,
                ev.make_error(
                    "CHILD_NOT_REGISTERED", f"child workflow `{name}` is not registered", False
                ),
            )
            return
        self._links[cid] = ChildLink(state.id, key, token)
        self._by_parent.setdefault(state.id, set()).add(cid)
        existing = self._running.get(cid)
        if existing is not None:
            return
        row = self._store.execution_row(cid)
        if row is not None:
            found = fold(self._store.history(cid) or [], cid)
            if self.shared and not found.terminal:
                return  # running in another engine: its end comes as `child_ended`
            self.deliver(tx, found)
            return
        try:
            value = _values.conform(unit.input, plan.defn.input)
        except _values.ValidationError as exc:
            self._failed(
                tx,
                parent,
                key,
                ev.make_error(
                    "CHILD_START_FAILED",
                    f"child workflow `{name}` could not be started: input is invalid at {exc}",
                    False,
                ),
            )
            return
        gate = self.remote(plan.defn, value) if self.remote is not None else None
        if gate is not None:
            # Admitted by the gate's holder, in the gate's tree.
            message = remote_children.start(
                gate,
                cid,
                parent_id=state.id,
                unit_key=key,
                definition_hash=plan.defn.definition_hash,
                value=value,
            )
            tx.messages.append(message)
            return
        child = x.create(
            tx, cid, plan, value, parent={"execution_id": state.id, "step": key}, schedule_id=None
        )
        x.decide(tx, child)

    def _failed(self, tx: Tx, parent: Live, key: str, error: ev.ErrorJson) -> None:
        unit = parent.state.units[key]
        self._x.record(tx, parent, ev.StepAttemptFailed, key, unit.attempt, error)

    def deliver(self, tx: Tx, child: ExecutionState) -> None:
        """Reports a finished child's outcome to the parent unit waiting for it."""
        link = self._links.pop(child.id, None)
        self._cancelled.discard(child.id)
        self._tell_parent(tx, child)
        if link is None:
            return
        self._by_parent.get(link.parent_id, set()).discard(child.id)
        parent = self._running.get(link.parent_id)
        if parent is None or parent.state.terminal:
            return
        unit = parent.state.units.get(link.unit_key)
        if unit is None or unit.status != UNIT_DISPATCHED or unit.token != link.token:
            return
        name = child.workflow
        if child.status == "COMPLETED":
            self._x.record(tx, parent, ev.StepSucceeded, unit.key, unit.attempt, child.output)
        else:
            if child.status == "FAILED":
                cause = child.error
                details = cause.get("details") if cause is not None else None
                merged: JsonObject = dict(details) if isinstance(details, dict) else {}
                merged["child_execution_id"] = child.id
                error = ev.make_error(
                    cause["code"] if cause is not None else "CHILD_FAILED",
                    f"child workflow `{name}` failed: {cause['message'] if cause else ''}",
                    False,
                    merged,
                )
            elif child.status == "CANCELLED":
                error = ev.make_error(
                    "CHILD_CANCELLED",
                    f"child workflow `{name}` was cancelled",
                    False,
                    {"child_execution_id": child.id},
                )
            else:
                error = ev.make_error(
                    "CHILD_TIMED_OUT",
                    f"child workflow `{name}` timed out",
                    False,
                    {"child_execution_id": child.id},
                )
            self._failed(tx, parent, unit.key, error)
        self._x.decide(tx, parent)

    def _tell_parent(self, tx: Tx, child: ExecutionState) -> None:
        """Shared mode: the end of a gated child whose parent another engine
        holds goes to the parent's owner (`child_ended`)."""
        if not self.shared or child.parent is None or not child.terminal:
            return
        parent_id = child.parent["execution_id"]
        if self._running.get(parent_id) is not None:
            return
        plan = self._catalog.by_hash(child.definition_hash)
        if plan is not None and flow_gates.limited(plan.defn):
            tx.messages.append(remote_children.ended(child, parent_id))

    def delivered(self, tx: Tx, child_id: str) -> None:
        """A gated child held elsewhere ended (its `child_ended` entry)."""
        events = self._store.history(child_id)
        if events:
            found = fold(events, child_id)
            if found.terminal:
                self.deliver(tx, found)

    def check(self, tx: Tx, parent: Live) -> None:
        """Cancels the children their parent no longer waits for."""
        state = parent.state
        cids = self._by_parent.get(state.id)
        if not cids:
            return
        for cid in list(cids):
            link = self._links.get(cid)
            child = self._running.get(cid)
            if link is None or (child is None and not self.shared):
                continue
            unit = state.units.get(link.unit_key)
            if unit is None or unit.status != UNIT_DISPATCHED or unit.token != link.token:
                reason = "parent step timed out"
            elif state.terminal:
                reason = "parent workflow finished"
            elif state.abort is not None and not unitkeys.is_handler(link.unit_key):
                # Outcome handlers' units start after the abort: it does not end them.
                reason = "parent workflow aborted"
            else:
                continue
            if child is None:
                # Shared mode: held by another engine (a gated child).
                message = remote_children.cancel(cid, reason)
                if message not in tx.messages and cid not in self._cancelled:
                    tx.messages.append(message)
                    tx.after_commit.append(functools.partial(self._cancelled.add, cid))
                continue
            self._cancel(tx, child, reason)

    def reconcile(self, tx: Tx) -> None:
        """Cancels running children that no parent unit waits for (recovery)."""
        for live in list(self._running.all()):
            parent = live.state.parent
            if parent is None or live.state.id in self._links:
                continue
            owner = self._running.get(parent["execution_id"])
            if owner is None and self.shared:
                # Shared mode: a gated child's parent may run elsewhere; its
                # owner tells this one when it stops waiting.
                row = self._store.execution_row(parent["execution_id"])
                if row is not None and row.status not in TERMINAL:
                    continue
            running = owner is not None and not owner.state.terminal
            self._cancel(
                tx, live, "parent step timed out" if running else "parent workflow finished"
            )

    def cancel_here(self, tx: Tx, child_id: str, reason: str) -> None:
        """A parent held elsewhere stopped waiting (its `child_cancel` entry)."""
        child = self._running.get(child_id)
        if child is not None:
            self._cancel(tx, child, reason)

    def _cancel(self, tx: Tx, child: Live, reason: str) -> None:
        state = child.state
        if state.terminal or (state.abort is not None and not state.paused):
            return
        self._x.request_cancel(tx, child, reason)
