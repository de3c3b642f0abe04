"""What a server that shares executions with other servers needs from the
engine (chapter 44's shared mode), as a few store-neutral steps; the server
(orbit_server/shared.py) decides when to take them and the store
(orbit_store/shared.py) makes them durable and fenced.

The `Engine` façade does not show these steps: an engine built with a
`Sharing` gives them through `Handoff`, which only orbit_core's shared
engine (and tests of it) hold.

- Tasks: with `Sharing(offer_tasks=True)` a scheduled worker task becomes a
  `TaskOffer` of its group's `CommitBatch` instead of an entry of the
  engine's own index, so polls never find work locally; with
  `local_first=True` as well it waits in the index first, and
  `publish_stale` turns the entries no poll took since its previous call
  into offers (out of the index in the same group), while an adopted
  execution's scheduled tasks are offered at once. Whoever claims an offer
  from the shared queue has the owner record the dispatch with the claimed
  token (`dispatch_offer`), which still checks that the unit waits for
  exactly that offer; `poll_withdrawable` lets a server take a waiting poll
  back before it claims a task for it elsewhere. Tokens the engine makes
  then name their execution (`<execution id>/<id>`).
- Sessions: a session registered through another server is made known here
  (`know_sessions`) so the attempts it takes can be held by it, the
  contacts it made elsewhere keep it alive (`touch_sessions`), and the
  attempts it should stop are handed out for it to hear of through any
  server (`cancels`; `sync_sessions` does both in one command).
- Ownership: `take_over` rebuilds executions from their histories as a
  restart does (attempts in flight get one session timeout for their
  reports, built-in attempts are uncertain, scheduled work is offered or
  routed again), and `release` drops executions another server now owns
  without telling their workers to stop (the new owner still wants them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import attrs

from orbit_core import events as ev
from orbit_core.api import Assignment, ParentRef, UnitStatus
from orbit_core.coordination import StepSlots
from orbit_core.dispatch import Session
from orbit_core.engine import flow_gates, remote_children
from orbit_core.engine.commands import RECEIPTS, Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.live import Live
from orbit_core.engine.pipeline import GroupCommit
from orbit_core.engine.polling import MAX_POLL_MS, Polling
from orbit_core.engine.recovery import BUILTIN_RESTART_REASON
from orbit_core.engine.worker_desk import WorkerDesk
from orbit_core.engine.workers import Workers
from orbit_core.errors import NotFoundError
from orbit_core.state import fold


class _Built(Protocol):
    """An `Engine` (a protocol, so this module need not import the façade)."""

    @property
    def _handoff(self) -> Handoff | None: ...


def of(engine: _Built) -> Handoff:
    """The handoff steps of an engine built with a `Sharing`."""
    handoff = engine._handoff
    if handoff is None:
        raise ValueError("the engine was built without `sharing`")
    return handoff


@attrs.frozen(slots=True)
class Sharing:
    """How an engine that shares executions with other servers is built.
    `offer_tasks`: worker tasks go to the store's shared queue as
    `TaskOffer`s instead of the engine's own index; with `local_first` they
    wait in the index first and `Handoff.publish_stale` offers those no poll
    took. `shared_catalog`: other servers deploy into the same store, so a
    workflow not known here is looked for there before it is refused.
    `step_slots`: where the slots of step `concurrency` limits are counted
    for every server (engine/step_slots.py); None: in this engine's memory."""

    offer_tasks: bool = True
    local_first: bool = False
    shared_catalog: bool = True
    step_slots: StepSlots | None = None


class Handoff:
    """The steps of the module docstring on one engine, each one command."""

    def __init__(
        self,
        *,
        pipeline: GroupCommit,
        executions: Executions,
        workers: Workers,
        polling: Polling,
        desk: WorkerDesk,
        load_definitions: Callable[[], int],
    ) -> None:
        self._pipeline = pipeline
        self._x = executions
        self._workers = workers
        self._polling = polling
        self._desk = desk
        self._load_definitions = load_definitions
        # The flow gates this engine holds (engine/flow_gates.py): a new
        # execution of a gate held here joins the gate's tree.
        self._gates: set[str] = set()
        executions.gate_of = self._gate_of
        # A gated child may be held by another engine (remote_children.py).
        executions.children.shared = True

    def _gate_of(self, live: Live) -> str | None:
        gate = flow_gates.gate_id(live.plan.defn, live.state.input)
        return gate if gate is not None and gate in self._gates else None

    def hold_gates(self, gates: list[str]) -> None:
        """Flow gates this node now holds (reserved, taken over with their
        executions, or resumed after a restart), once every execution of
        theirs is in memory: the rate buckets are read again, since the
        gate's previous holder may have taken tokens."""
        gates = [g for g in gates if flow_gates.is_gate(g)]
        if not gates:
            return

        self._pipeline.submit(lambda tx: self._hold(gates))

    def hold_gate_now(self, gate: str) -> None:
        """`hold_gates` for one gate, from inside a group (a gated child's
        start found nobody holding its gate and reserved it): a gate nobody
        held has no execution that is not in memory."""
        self._hold([gate])

    def _hold(self, gates: list[str]) -> None:
        if any(g not in self._gates for g in gates):
            self._x.gates.load(self._x.store.load_rates())
            self._gates.update(gates)

    def route_children(self, router: remote_children.GateRouter) -> None:
        """Shared mode: a gated child starts where `router` says
        (engine/remote_children.py)."""
        self._x.children.remote = router

    def start_child(self, payload: Mapping[str, Any]) -> bool:
        """Applies a `child_start` entry sent to a gate this engine holds:
        creates the child under its parent unless it exists; True when it
        was created."""
        cid = str(payload["execution_id"])
        x = self._x

        def run(tx: Tx) -> bool:
            if cid in x.memory:
                return False
            if x.store.execution_row(cid) is not None:
                found = x.stored_state(cid)
                if found.terminal and found.parent is not None:
                    # Asked again after it ended: the parent hears of it again.
                    tx.messages.append(remote_children.ended(found, found.parent["execution_id"]))
                return False
            plan = x.catalog.by_hash(str(payload["definition_hash"]))
            if plan is None:
                self._load_definitions()
                plan = x.catalog.by_hash(str(payload["definition_hash"]))
            if plan is None:
                raise NotFoundError(
                    f"the definition of child execution `{cid}` is not registered",
                    "CHILD_NOT_REGISTERED",
                )
            parent: ParentRef = {
                "execution_id": str(payload["parent_id"]),
                "step": str(payload["step"]),
            }
            live = x.create(tx, cid, plan, payload["input"], parent=parent, schedule_id=None)
            x.decide(tx, live)
            return True

        return self._pipeline.submit(run)

    def child_ended(self, child_id: str) -> None:
        """Applies a `child_ended` entry: delivers the stored end of a gated
        child held elsewhere to the parent unit waiting here."""
        self._pipeline.submit(lambda tx: self._x.children.delivered(tx, child_id))

    def cancel_child(self, child_id: str, reason: str) -> None:
        """Applies a `child_cancel` entry: the parent stopped waiting."""
        self._pipeline.submit(lambda tx: self._x.children.cancel_here(tx, child_id, reason))

    def dispatch_offer(
        self, session: Session, *, execution_id: str, unit_key: str, offer_seq: int, token: str
    ) -> Assignment | None:
        """Records that the offer was claimed for `session` under `token`
        (StepDispatched); None when the unit no longer waits for it."""

        def run(tx: Tx) -> Assignment | None:
            know_sessions(self._workers, [session])
            known = self._workers.sessions[session.session_id]
            return self._polling.dispatch_offer(
                tx, known, execution_id=execution_id, key=unit_key, offer=offer_seq, token=token
            )

        result = self._pipeline.submit(run)
        return result.copy() if result is not None else None

    @contextlib.contextmanager
    def receipt(self, value: str) -> Iterator[None]:
        """The commands this thread submits inside the block carry `value`
        into the commit that applies them (`CommitBatch.receipts`), so a
        store can record that a request was applied in the same transaction
        as its events; a command refused with an error carries none."""
        before = RECEIPTS.current
        RECEIPTS.current = value
        try:
            yield
        finally:
            RECEIPTS.current = before

    def know_sessions(self, sessions: list[Session]) -> int:
        """Makes sessions registered elsewhere known; returns how many were new."""
        return self._pipeline.submit(lambda tx: know_sessions(self._workers, sessions))

    def touch_sessions(self, seen: Mapping[str, int]) -> None:
        """Session contacts made elsewhere (session id to time in ms)."""
        self._pipeline.submit(lambda tx: touch_sessions(self._workers, seen))

    def cancels(self, session_ids: list[str]) -> dict[str, list[str]]:
        """Attempts the sessions hold that are no longer wanted, each given
        once (a heartbeat through this engine does not repeat them)."""
        return self._pipeline.submit(lambda tx: cancels(self._workers, session_ids))

    def sync_sessions(
        self, seen: Mapping[str, int], session_ids: list[str]
    ) -> dict[str, list[str]]:
        """`touch_sessions(seen)` then `cancels(session_ids)` as one command:
        a server's session sync every round costs one group, not two, and
        none when it would change nothing (no contact newer than the one
        known here, no session holding an attempt): the usual round. That is
        read outside the groups (plain reads of a number and of whether a set
        is empty): a contact or an attempt that comes meanwhile is synced at
        the next round, as if it had come just after this call."""
        sessions = self._workers.sessions
        for session_id in session_ids:
            session = sessions.get(session_id)
            if session is not None and session.held:
                break
        else:
            for session_id, at_ms in seen.items():
                session = sessions.get(session_id)
                if session is not None and at_ms > session.last_seen_ms:
                    break
            else:
                return {}

        def run(tx: Tx) -> dict[str, list[str]]:
            touch_sessions(self._workers, seen)
            return cancels(self._workers, session_ids)

        return self._pipeline.submit(run)

    def session_ids(self) -> list[str]:
        """The sessions this engine knows. A plain read outside the groups
        (one copy of a dict's keys, which no other thread can interleave
        with): a session added meanwhile is synced at the next round, as if
        it had been added just after this call; one that went is skipped by
        the steps it is passed to."""
        return list(self._workers.sessions)

    def take_over(self, histories: list[tuple[str, list[ev.Event]]]) -> tuple[int, int]:
        """Adopts executions from their histories: (adopted, attempts in
        flight). Definitions deployed elsewhere are loaded first."""
        self._pipeline.submit(lambda tx: self._load_definitions())
        return self._pipeline.submit(lambda tx: take_over(tx, self._x, self._workers, histories))

    def release(
        self, execution_ids: list[str], *, unless: Callable[[str], bool] | None = None
    ) -> int:
        """Drops executions another server owns now; returns how many were held.
        `unless` spares those it says this node owns after all, asked inside
        the command (after every group before it): a server that found a
        copy it does not own (`executions`) asks its store once more, so an
        execution created meanwhile is never dropped."""

        def run(tx: Tx) -> int:
            ids = execution_ids
            if unless is not None:
                # (And what this very group changes: its commit is fenced.)
                ids = [e for e in ids if not unless(e) and e not in tx.changes]
            return release(self._x, self._workers, ids)

        self._pipeline.submit(lambda tx: self._gates.difference_update(execution_ids))
        return self._pipeline.submit(run)

    def executions(self) -> list[str]:
        """The ids of the executions in this engine's memory. A plain read
        outside the groups (a copy of a dict's values): an execution that
        comes meanwhile is seen by the next call."""
        return [live.state.id for live in self._x.memory.all()]

    def publish_stale(self) -> int:
        """With `local_first`: offers to the shared queue the tasks that
        waited in this engine's index since the previous call; how many.
        Called every few tens of milliseconds: with nothing queued since the
        previous call it returns at once, without a command."""
        if self._x.nothing_stale():
            return 0
        return self._pipeline.submit(self._x.publish_stale)

    def poll_withdrawable(
        self,
        session_id: str,
        wait_ms: int,
        parked: Callable[[Callable[[], bool]], None],
        connected: Callable[[], bool] | None = None,
        *,
        worker: str | None = None,
    ) -> Assignment | None:
        """`poll`, for a server that also looks for the poll's task elsewhere:
        once the poll waits, `parked` is given a function that takes it back,
        which returns True when no task of this engine's will be given to it
        (it then ends with None), False when one already was."""
        wait = min(max(wait_ms, 0), MAX_POLL_MS)
        return self._desk.poll_parked(session_id, wait, connected, worker, parked)

    def holds(self, execution_id: str) -> bool:
        """Whether the execution is running in this engine's memory (or, for
        a flow gate, whether this engine holds it)."""
        return execution_id in self._x.memory or execution_id in self._gates


def know_sessions(workers: Workers, sessions: list[Session]) -> int:
    """Adds the sessions not known yet; returns how many were added."""
    added = 0
    for session in sessions:
        if session.session_id not in workers.sessions:
            workers.sessions[session.session_id] = session
            added += 1
    return added


def touch_sessions(workers: Workers, seen: Mapping[str, int]) -> None:
    """Moves each known session's last contact forward to `seen`'s."""
    for session_id, at_ms in seen.items():
        session = workers.sessions.get(session_id)
        if session is not None and at_ms > session.last_seen_ms:
            session.last_seen_ms = at_ms
            session.lost = False


def cancels(workers: Workers, session_ids: list[str]) -> dict[str, list[str]]:
    """For each known session: the attempts it holds that are no longer
    wanted, each returned once (here or by the session's next heartbeat)."""
    out = {}
    for session_id in session_ids:
        session = workers.sessions.get(session_id)
        if session is not None and session.held:
            tokens = workers.cancels(session)
            if tokens:
                out[session_id] = tokens
    return out


def take_over(
    tx: Tx,
    executions: Executions,
    workers: Workers,
    histories: list[tuple[str, list[ev.Event]]],
) -> tuple[int, int]:
    """Adopts executions from their histories; returns how many were adopted
    and how many of their attempts were in flight at a worker."""
    adopted = []
    in_flight: list[str] = []
    builtin: list[str] = []
    for eid, events in histories:
        if not events or eid in executions.memory:
            continue
        state = fold(events, eid)
        if state.terminal:
            continue
        live = executions.adopt(state)
        if live is None:
            continue
        adopted.append(live)
        for event in events:
            if isinstance(event, ev.StepDispatched):
                workers.issued_to[event.token] = event.worker_id
        for unit in state.units.values():
            if unit.status != UnitStatus.DISPATCHED or unit.token is None:
                continue
            session = unit.worker_session or ""
            if session.startswith("builtin:"):
                builtin.append(unit.token)
            elif not session.startswith("child:"):
                in_flight.append(unit.token)
                holder = workers.sessions.get(session)
                if holder is not None:
                    workers.hold(holder, unit.token)
    workers.expect_reports(in_flight, tx.now + workers.session_timeout_ms)
    for token in builtin:
        workers.make_uncertain(tx, token, BUILTIN_RESTART_REASON)
    executions.route_unrouted(tx)
    for live in adopted:
        if not live.state.terminal:
            executions.decide(tx, live)
    return len(adopted), len(in_flight)


def release(executions: Executions, workers: Workers, execution_ids: list[str]) -> int:
    """Drops executions from memory; returns how many were held."""
    dropped = 0
    for eid in execution_ids:
        live = executions.memory.get(eid)
        if live is None:
            continue
        tokens = executions.forget(live)
        workers.drop(tokens)
        workers.forget(tokens)
        dropped += 1
    return dropped
