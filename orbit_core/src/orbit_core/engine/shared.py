"""The engine of a server that shares executions with other servers
(chapter 44's shared mode), store-neutral: an `Engine` built with a
`Sharing` (engine/handoff.py), wrapped, and the coordination ports of
orbit_core/coordination.py. The server (orbit_server/shared.py) gives it
the database's adapters and runs the threads around it; the simulation
(orbit_core/tests) gives it the in-memory ones.

- `SharedEngine` answers the calls about executions another server owns:
  a signal or cancellation goes to the owner's mailbox and waits for its
  reply, a wait lists itself (`EndWatch`) and reads again at each
  announcement on `DONE`; everything else is the wrapped `Engine`'s. An
  inbox message is applied through the `Engine`'s own calls under its
  receipt (`Handoff.receipt`), so the commit of its events marks it applied.
- Its `migrations` desk (engine/migrations.py, `MigrationDesk.across`) plans
  the executions other servers hold too, folded from their histories, and
  sends the migration of one of them to its owner's inbox (`migrate`, with
  the mapping's hash), answering with the owner's outcome.
- `SharedDesk` is its `workers`: sessions go to `Sessions`, a poll waits in
  the engine for its own tasks and at the task desk (engine/task_desk.py)
  for the board's at once, and a result for an execution owned elsewhere
  is checked on arrival, as one server checks it, then sent to the owner,
  whose decision is the worker's answer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from orbit_core import values as _values
from orbit_core.api import (
    Accepted,
    ActionAnswer,
    Assignment,
    ExecutionDoc,
    HeartbeatReply,
    Registered,
    SignalAccepted,
    Started,
    StartRequest,
    WorkerList,
)
from orbit_core.coordination import (
    DONE,
    REPLIES,
    Announcements,
    Claim,
    InboxEntry,
    SessionRow,
    Tables,
)
from orbit_core.dispatch import Session
from orbit_core.engine import flow_gates, handoff, remote_children
from orbit_core.engine.facade import Wrapped
from orbit_core.engine.migrations import MigrationDesk
from orbit_core.engine.operations import OperatorApi
from orbit_core.engine.polling import DEFAULT_POLL_MS, MAX_POLL_MS
from orbit_core.engine.reads import DEFAULT_WAIT_MS, MAX_WAIT_MS
from orbit_core.engine.results import admit_failure, admit_success
from orbit_core.engine.service import Engine
from orbit_core.engine.task_desk import Claims
from orbit_core.engine.worker_desk import (
    PollAfter,
    Reported,
    WorkerApi,
    contract_pairs,
    poll_after,
)
from orbit_core.errors import (
    ConflictError,
    InvalidError,
    LimitError,
    NotFoundError,
    OrbitError,
    RateLimitedError,
    StorageError,
)
from orbit_core.ir.definition import Definition
from orbit_core.jsontypes import JsonValue
from orbit_core.migration import MigratedEntry
from orbit_core.state import ExecutionState, fold

REPLY_WAIT_S = 10.0
# How many replies' time a start waits for its flow gate to have a holder
# that answers (the holder stopped: until another server takes the gate
# over), and how long it pauses between tries.
GATE_WAITS = 3
GATE_PAUSE_S = 0.05
# The executions of a workflow a migration plan looks for on other servers
# (as many as the census reads).
MIGRATION_SCAN = 10_000
_ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"})
# Inbox kinds about flow gates: a start under one, a gated child's entries.
_AT_GATE = frozenset({"start", *remote_children.KINDS})
RECHECK_S = 1.0
# How long a read of an execution owned elsewhere waits for its owner's
# document before it answers the store's (an owner that died is not taken
# over before its node timeout: a read must not hang until then).
DESCRIBE_WAIT_S = 2.0
_ERRORS: dict[str, type[OrbitError]] = {
    cls.__name__: cls
    for cls in (
        NotFoundError,
        ConflictError,
        InvalidError,
        RateLimitedError,
        LimitError,
        StorageError,
        OrbitError,
    )
}


class NotApplied(StorageError):
    """A message to an owner that got no answer and was taken back unapplied
    (so sending it again cannot apply it twice)."""


def _error_reply(exc: OrbitError) -> dict[str, Any]:
    error: dict[str, Any] = {"type": type(exc).__name__, "code": exc.code, "message": exc.message}
    if exc.details is not None:
        error["details"] = exc.details
    return {"error": error}


def _raise_reply(reply: Any) -> Any:
    if isinstance(reply, dict) and "error" in reply:
        error = reply["error"]
        cls = _ERRORS.get(str(error.get("type")), OrbitError)
        raise cls(
            str(error.get("message", "")),
            str(error.get("code", "INTERNAL")),
            details=error.get("details"),
        )
    return reply["ok"] if isinstance(reply, dict) else reply


class SharedEngine(Wrapped):
    """The engine of a shared-mode server (module docstring). `engine` must
    be built with a `Sharing`; `tables` and `announcements` are the
    coordination adapters, `tasks` the desk claiming from the board."""

    def __init__(
        self,
        engine: Engine,
        *,
        node_id: str,
        tables: Tables,
        announcements: Announcements,
        tasks: Claims,
        reply_wait_s: float = REPLY_WAIT_S,
        adopt: Callable[[list[tuple[str, str, int]]], None] | None = None,
    ) -> None:
        """`reply_wait_s`: how long a message to an owner waits for its reply;
        `adopt` records in the store what this node now owns (a flow gate it
        reserved: (id, root, epoch))."""
        super().__init__(engine)
        self._adopt = adopt
        self.reply_wait_s = reply_wait_s
        self.node_id = node_id
        self.tables = tables
        self.announcements = announcements
        self.tasks = tasks
        self.tasks_claimed = 0
        self.handoff = handoff.of(engine)
        self._local = engine.workers
        self.desk = SharedDesk(self, self._local)
        self._migrations = engine.migrations.across(self)
        # A schedule's start under a flow gate held elsewhere is decided by
        # the gate's holder too (engine/scheduler.py, `Router`).
        engine.schedules.route(self)
        # So is a gated child's start (engine/remote_children.py).
        self.handoff.route_children(self._route_child)

    @property
    def workers(self) -> WorkerApi:
        return self.desk

    @property
    def migrations(self) -> MigrationDesk:
        return self._migrations

    @property
    def operations(self) -> OperatorApi:
        return SharedOperations(self)

    def owner_elsewhere(self, execution_id: str) -> bool:
        """Whether the execution is owned, but not held in this engine."""
        if self.handoff.holds(execution_id):
            return False
        return self.tables.owner(execution_id) is not None

    # ---- migrations (migrations.Elsewhere)

    def states_elsewhere(self, workflow: str) -> list[ExecutionState]:
        states = []
        for row in self.store.list_executions(None, workflow, MIGRATION_SCAN):
            if row.status in _ENDED or self.handoff.holds(row.execution_id):
                continue
            events = self.store.history(row.execution_id)
            if events:
                states.append(fold(events, row.execution_id))
        return states

    def migrate_elsewhere(
        self,
        execution_id: str,
        workflow: str,
        from_version: str,
        to_version: str,
        migration_hash: str,
    ) -> MigratedEntry:
        payload = {
            "workflow": workflow,
            "from": from_version,
            "to": to_version,
            "migration_hash": migration_hash,
        }
        reply = self.forward(execution_id, "migrate", payload)
        return _raise_reply(reply)  # type: ignore[no-any-return]

    # ---- starts under a flow gate (engine/flow_gates.py)

    def start(
        self,
        workflow: str,
        version: str | None = None,
        input: JsonValue = None,
        execution_id: str | None = None,
        *,
        schedule_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Started:
        """A start of a workflow with start limits is decided by the holder
        of its key's gate: here when this server holds it (or takes it, when
        nobody does), else at the holder, through its mailbox."""
        gate = self._gate(workflow, version, input)
        if gate is None:
            return self.engine.start(
                workflow,
                version,
                input,
                execution_id,
                schedule_id=schedule_id,
                idempotency_key=idempotency_key,
            )
        payload = {
            "workflow": workflow,
            "version": version,
            "input": input,
            "execution_id": execution_id,
            "schedule_id": schedule_id,
            "idempotency_key": idempotency_key,
        }
        # As long as three replies may take (a take-over of the gate's
        # holder happens within that); at least one try.
        deadline = time.monotonic() + GATE_WAITS * self.reply_wait_s
        while True:
            try:
                answer = self._start_at_gate(gate, payload)
            except NotApplied:
                # The gate's holder did not answer (it stopped: another
                # server takes the gate over) and the start was taken back.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(GATE_PAUSE_S)
                continue
            if answer is not None:
                return answer
            if time.monotonic() >= deadline:
                raise StorageError(
                    f"the flow gate of this start of `{workflow}` is being taken over; "
                    "the start was not applied"
                )
            time.sleep(GATE_PAUSE_S)

    def start_many(self, requests: Sequence[StartRequest]) -> list[Started | OrbitError]:
        """As the engine's, except that the starts under a flow gate go one
        by one to the gate's holder (`start`)."""
        gated = [self._gate(r.workflow, r.version, r.input) is not None for r in requests]
        answers: list[Started | OrbitError] = list(
            self.engine.start_many([r for r, g in zip(requests, gated, strict=True) if not g])
        )
        out: list[Started | OrbitError] = []
        for request, gate in zip(requests, gated, strict=True):
            if not gate:
                out.append(answers.pop(0))
                continue
            try:
                out.append(
                    self.start(
                        request.workflow,
                        request.version,
                        request.input,
                        request.execution_id,
                        schedule_id=request.schedule_id,
                        idempotency_key=request.idempotency_key,
                    )
                )
            except OrbitError as exc:
                out.append(exc)
        return out

    def decided_elsewhere(self, workflow: str, version: str | None, input: JsonValue) -> bool:
        """Whether a start has a flow gate this engine does not hold (the
        scheduler's `Router`): it must go through `start`, not be made
        inside one of this engine's commands."""
        gate = self._gate(workflow, version, input)
        return gate is not None and not self.handoff.holds(gate)

    def _gate(self, workflow: str, version: str | None, input: JsonValue) -> str | None:
        try:
            defn = self.engine.definition(workflow, version)
            if not flow_gates.limited(defn):
                return None  # (nearly every start: no second look at its input)
            value = _values.conform({} if input is None else input, defn.input, strict=True)
        except (OrbitError, _values.ValidationError):
            return None  # refused by the engine's own checks, as on one server
        return flow_gates.gate_id(defn, value)

    def _route_child(self, defn: Definition, value: JsonValue) -> str | None:
        """Where a gated child starts (called on a group's thread, so a
        round trip to the database per gated child, as a step slot's take):
        None here (ungated, or its gate held here, reserved when nobody held
        it), else the gate whose holder starts it."""
        gate = flow_gates.gate_id(defn, value)
        if gate is None or self.handoff.holds(gate):
            return None
        if self.tables.owner(gate) is None and self._reserve(gate)[0] == self.node_id:
            self.handoff.hold_gate_now(gate)
            return None
        # (Held here but not in memory yet: the entry waits for the hold.)
        return gate

    def _reserve(self, gate: str) -> tuple[str, int]:
        """Reserves a gate nobody held: (node, epoch) of its holder after,
        recorded in this node's store as owned when it is this node."""
        node, epoch = self.tables.reserve_gate(gate)
        if node == self.node_id and self._adopt is not None:
            self._adopt([(gate, gate, epoch)])
        return node, epoch

    def _start_at_gate(self, gate: str, p: dict[str, Any]) -> Started | None:
        """One try; None when the gate is owned here but not yet in memory
        (a take-over under way)."""
        if self.handoff.holds(gate):
            return self._start_here(p)
        found = self.tables.owner(gate)
        if found is None:
            found = self._reserve(gate)
            if found[0] == self.node_id:
                self.handoff.hold_gates([gate])
                return self._start_here(p)
        if found[0] == self.node_id:
            return None
        return _raise_reply(self.forward(gate, "start", p))  # type: ignore[no-any-return]

    def _start_here(self, p: dict[str, Any]) -> Started:
        return self.engine.start(
            p["workflow"],
            p["version"],
            p["input"],
            p["execution_id"],
            schedule_id=p["schedule_id"],
            idempotency_key=p["idempotency_key"],
        )

    # ---- executions

    def signal(self, execution_id: str, name: str, payload: JsonValue = None) -> SignalAccepted:
        if self.owner_elsewhere(execution_id):
            reply = self.forward(execution_id, "signal", {"name": name, "payload": payload})
            return _raise_reply(reply)  # type: ignore[no-any-return]
        return self.engine.signal(execution_id, name, payload)

    def get(self, execution_id: str) -> ExecutionDoc:
        """The execution's document as its owner has it: what only the
        owner's memory knows (`waiting` for a step's slot or token,
        `waiting_for` queued tasks) is missing from the store's, so a
        running execution owned by another server is asked of that server
        (`describe`). If the owner does not answer, the store's document."""
        if self.owner_elsewhere(execution_id):
            try:
                reply = self.forward(execution_id, "describe", {}, wait_s=DESCRIBE_WAIT_S)
                return _raise_reply(reply)  # type: ignore[no-any-return]
            except StorageError:
                pass  # (the owner away: the store's is the best there is)
        return self.engine.get(execution_id)

    def cancel(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        if self.owner_elsewhere(execution_id):
            reply = self.forward(execution_id, "cancel", {"reason": reason})
            return _raise_reply(reply)  # type: ignore[no-any-return]
        return self.engine.cancel(execution_id, reason)

    def forward(
        self, execution_id: str, kind: str, payload: Any, *, wait_s: float | None = None
    ) -> Any:
        """Puts an entry in the inbox of the execution's owner and waits for
        the owner's reply (`reply_wait_s`, or `wait_s` when shorter)."""
        tables = self.tables
        seq = tables.put(execution_id, kind, payload)
        wait_s = self.reply_wait_s if wait_s is None else min(wait_s, self.reply_wait_s)
        deadline = time.monotonic() + wait_s
        seen = self.announcements.serial(REPLIES)
        while True:
            done, reply = tables.reply(seq)
            if done:
                return reply
            remaining = deadline - time.monotonic()
            if remaining <= 0 and tables.withdraw(seq):
                # Taken back unapplied, so the caller may safely send it again.
                raise NotApplied(
                    f"the owner of execution `{execution_id}` did not answer within "
                    f"{wait_s:g} s; the {kind} was not applied"
                )
            if remaining <= -wait_s:
                # Applied (it could not be taken back), but its owner stopped
                # before it wrote the reply.
                raise StorageError(
                    f"the owner of execution `{execution_id}` applied the {kind} "
                    "but stopped before it answered"
                )
            seen = self.announcements.wait(REPLIES, seen, max(0.01, min(remaining, 0.25)))

    def wait(self, execution_id: str, timeout_ms: int = DEFAULT_WAIT_MS) -> ExecutionDoc:
        holds = self.handoff.holds
        if holds(execution_id):
            return self.engine.wait(execution_id, timeout_ms)
        deadline = time.monotonic() + min(max(timeout_ms, 0), MAX_WAIT_MS) / 1000
        doc = self.engine.get(execution_id)
        if _finished(doc) or time.monotonic() >= deadline or self.draining:
            return doc
        # Listed, so that the owner announces the end (else it does not).
        tables = self.tables
        watch = tables.watch(execution_id)
        try:
            seen = self.announcements.serial(DONE)
            while True:
                # Read again once listed, not only after announcements: an
                # end committed before the listing was announced to nobody.
                doc = self.engine.get(execution_id)
                remaining = deadline - time.monotonic()
                if holds(execution_id):
                    return self.engine.wait(execution_id, max(0, int(remaining * 1000)))
                if _finished(doc) or remaining <= 0 or self.draining:
                    return doc
                seen = self.announcements.wait(DONE, seen, min(remaining, RECHECK_S))
        finally:
            with contextlib.suppress(StorageError):
                tables.unwatch(watch)

    # ---- the inbox

    def apply(self, entry: InboxEntry) -> Any:
        """Applies one inbox entry through the engine's own calls; returns
        the reply for the server that sent it."""
        if entry.kind == "describe":
            # A read: it commits nothing, so there is no receipt to carry.
            try:
                return {"ok": self.engine.get(entry.execution_id)}
            except OrbitError as exc:
                return _error_reply(exc)
        p = entry.payload
        session: Session | None = None
        if entry.kind == "dispatched":
            row = self.desk.session_row(p["session_id"])
            session = (
                session_of(row)
                if row is not None
                else Session(p["session_id"], p["worker_id"], "any", (), None, 0, 0)
            )
        # The one engine call below commits the entry's receipt with its events.
        with self.handoff.receipt(str(entry.seq)):
            return self._apply(entry, session)

    def _apply(self, entry: InboxEntry, session: Session | None) -> Any:
        p = entry.payload
        local = self._local
        try:
            if entry.kind == "dispatched":
                assert session is not None
                done = self.handoff.dispatch_offer(
                    session,
                    execution_id=entry.execution_id,
                    unit_key=p["unit_key"],
                    offer_seq=p["offer_seq"],
                    token=p["token"],
                )
                if done is None:
                    # No longer wanted: the worker hears so at its next heartbeat.
                    self.tables.post_cancels({p["session_id"]: [p["token"]]})
                return {"ok": done is not None}
            if entry.kind == "complete":
                return {"ok": local.complete(p["token"], p["output"], worker=p.get("worker"))}
            if entry.kind == "fail":
                return {
                    "ok": local.fail(
                        p["token"],
                        p["code"],
                        p["message"],
                        p["retryable"],
                        p["details"],
                        worker=p.get("worker"),
                    )
                }
            if entry.kind == "undelivered":
                local.undelivered(p["token"])
                return {"ok": True}
            if entry.kind in _AT_GATE:
                return {"ok": self._apply_at_gate(entry)}
            if entry.kind == "signal":
                return {"ok": self.engine.signal(entry.execution_id, p["name"], p["payload"])}
            if entry.kind == "cancel":
                return {"ok": self.engine.cancel(entry.execution_id, p["reason"])}
            if entry.kind == "restart":
                answer = self.engine.operations.restart(
                    entry.execution_id,
                    p["step"],
                    dry_run=p["dry_run"],
                    force=p["force"],
                    reason=p["reason"],
                )
                return {"ok": answer}
            if entry.kind == "pause":
                return {"ok": self.engine.operations.pause(entry.execution_id, p["reason"])}
            if entry.kind == "resume":
                return {"ok": self.engine.operations.resume(entry.execution_id)}
            if entry.kind == "migrate":
                moved = self.engine.migrations.move(
                    p["workflow"],
                    p["from"],
                    p["to"],
                    entry.execution_id,
                    migration_hash=p["migration_hash"],
                )
                return {"ok": moved}
        except StorageError:
            raise  # not applied: tried again, here or by the next owner
        except OrbitError as exc:
            return _error_reply(exc)
        return _error_reply(OrbitError(f"unknown inbox entry `{entry.kind}`"))

    def _apply_at_gate(self, entry: InboxEntry) -> Started | bool:
        """A start sent to this server as the holder of its flow gate, or a
        gated child's entry (engine/remote_children.py), written by a commit
        of the parent's owner or of the child's."""
        p = entry.payload
        if entry.kind == "start":
            return self._start_here(p)
        if entry.kind == remote_children.START:
            # Sent to this server as the holder of the child's flow gate.
            return self.handoff.start_child(p)
        if entry.kind == remote_children.ENDED:
            self.handoff.child_ended(p["child_id"])
        else:
            self.handoff.cancel_child(entry.execution_id, p["reason"])
        return True


class SharedOperations:
    """The operator's calls of a shared-mode server: one about an execution
    another server owns goes to the owner's inbox and waits for its reply."""

    def __init__(self, engine: SharedEngine) -> None:
        self._engine = engine

    def pause(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        engine = self._engine
        if engine.owner_elsewhere(execution_id):
            reply = engine.forward(execution_id, "pause", {"reason": reason})
            return _raise_reply(reply)  # type: ignore[no-any-return]
        return engine.engine.operations.pause(execution_id, reason)

    def resume(self, execution_id: str) -> ExecutionDoc:
        engine = self._engine
        if engine.owner_elsewhere(execution_id):
            reply = engine.forward(execution_id, "resume", {})
            return _raise_reply(reply)  # type: ignore[no-any-return]
        return engine.engine.operations.resume(execution_id)

    def restart(
        self,
        execution_id: str,
        step: str,
        *,
        dry_run: bool = False,
        force: bool = False,
        reason: str | None = None,
    ) -> ActionAnswer:
        """A running execution is restarted by its owner."""
        engine = self._engine
        if engine.owner_elsewhere(execution_id):
            payload = {"step": step, "dry_run": dry_run, "force": force, "reason": reason}
            reply = engine.forward(execution_id, "restart", payload)
            return _raise_reply(reply)  # type: ignore[no-any-return]
        return engine.engine.operations.restart(
            execution_id, step, dry_run=dry_run, force=force, reason=reason
        )

    def fork(
        self,
        execution_id: str,
        step: str,
        *,
        new_id: str | None = None,
        version: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> ActionAnswer:
        return self._engine.engine.operations.fork(
            execution_id, step, new_id=new_id, version=version, dry_run=dry_run, force=force
        )


class SharedDesk:
    """The worker calls of a shared-mode server (`WorkerApi`): sessions are
    written to `orbit_sessions`, a poll waits for this engine's tasks and the
    shared queue's at once, and a result for an execution owned elsewhere
    goes to its owner's inbox. `local` is the engine's own desk."""

    def __init__(self, engine: SharedEngine, local: WorkerApi) -> None:
        self._engine = engine
        self._local = local
        self._handoff = engine.handoff
        self._tables = engine.tables
        self.clock = engine.clock
        self._sessions: dict[str, SessionRow] = {}
        self._contacts: dict[str, int] = {}
        self._contacts_lock = threading.Lock()
        # Sessions with a poll waiting here (how many): in contact now.
        self.polls_waiting: dict[str, int] = {}
        # Claims to put back on the queue, and tasks to report undelivered,
        # once the database takes it (`release`, `undelivered`).
        self._unreleased: list[str] = []
        self._unsent: list[str] = []

    def _draining(self) -> bool:
        return self._engine.draining

    # ---- sessions

    def register(
        self,
        worker_id: str,
        runtime: str,
        contracts: list[dict[str, str]] | list[tuple[str, str]],
        sdk: str | None = None,
    ) -> Registered:
        reply = self._local.register(worker_id, runtime, contracts, sdk)
        now = self.clock.now_ms()
        row = SessionRow(
            reply["worker_session_id"],
            worker_id,
            runtime.lower(),
            contract_pairs(contracts),
            sdk,
            now,
            now,
        )
        self._sessions[row.session_id] = row
        self._tables.put_session(row)
        return reply

    def session_row(self, session_id: str) -> SessionRow | None:
        row = self._sessions.get(session_id)
        if row is None:
            found = self._tables.sessions([session_id])
            if not found:
                return None
            row = self._sessions[session_id] = found[0]
            self._handoff.know_sessions([session_of(row)])
        return row

    def _seen(self, session_id: str) -> None:
        with self._contacts_lock:
            self._contacts[session_id] = self.clock.now_ms()

    def take_contacts(self) -> dict[str, int]:
        with self._contacts_lock:
            contacts, self._contacts = self._contacts, {}
            now = self.clock.now_ms()
            for session_id in self.polls_waiting:
                contacts[session_id] = now
        return contacts

    def _waits(self, session_id: str, delta: int) -> None:
        with self._contacts_lock:
            count = self.polls_waiting.get(session_id, 0) + delta
            if count > 0:
                self.polls_waiting[session_id] = count
            else:
                self.polls_waiting.pop(session_id, None)
            self._contacts[session_id] = self.clock.now_ms()

    def heartbeat(self, session_id: str, *, worker: str | None = None) -> HeartbeatReply:
        self.session_row(session_id)
        reply = self._local.heartbeat(session_id, worker=worker)
        self._seen(session_id)
        posted = self._tables.take_cancels(session_id)
        if posted:
            reply["cancel"] = sorted({*reply["cancel"], *posted})
        return reply

    def unregister(self, session_id: str, *, worker: str | None = None) -> Accepted:
        self.session_row(session_id)
        reply = self._local.unregister(session_id, worker=worker)
        self._tables.drop_session(session_id)
        self._sessions.pop(session_id, None)
        return reply

    def list(self) -> WorkerList:
        """`GET /v1/workers` of the whole cluster: the registry is shared, and
        the sessions of every server come from `orbit_sessions` (in-flight
        counts are this server's own)."""
        listing = self._local.list()
        now = self.clock.now_ms()
        timeout = self._engine.engine.session_timeout_ms
        by_worker: dict[str, list[SessionRow]] = {}
        for row in self._tables.sessions_seen_since(now - timeout):
            by_worker.setdefault(row.worker_id, []).append(row)
        for doc in listing["workers"]:
            rows = by_worker.get(doc["worker_id"], [])
            if not rows:
                continue
            last_seen = max(r.last_seen_ms for r in rows)
            doc["sessions"] = max(doc["sessions"], len(rows))
            doc["last_seen_ms"] = max(doc["last_seen_ms"], last_seen)
            doc["online"] = doc["online"] or now - last_seen <= timeout
        return listing

    # ---- tasks

    def poll(
        self,
        session_id: str,
        wait_ms: int | None = None,
        connected: Callable[[], bool] | None = None,
        *,
        worker: str | None = None,
    ) -> Assignment | None:
        row = self.session_row(session_id)
        wait = DEFAULT_POLL_MS if wait_ms is None or wait_ms < 0 else min(wait_ms, MAX_POLL_MS)
        deadline = time.monotonic() + (0 if self._draining() else wait) / 1000
        desk = self._engine.tasks
        while True:
            remaining = int((deadline - time.monotonic()) * 1000)
            if remaining <= 0 or self._draining():
                # This engine's own tasks, then one round of the shared queue.
                # (The engine checks the session and its worker binding.)
                got = self._local.poll(session_id, 0, worker=worker)
                if got is not None:
                    return got
                assert row is not None
                self._seen(session_id)
                claim = desk.take(
                    row.contracts,
                    row.runtime,
                    session_id,
                    row.worker_id,
                    deadline,
                    gone=lambda: self._draining() or (connected is not None and not connected()),
                    alive=lambda: self._seen(session_id),
                )
                if claim is None:
                    return None
            else:
                got, claim = self._poll_both(session_id, row, remaining, connected, worker)
                if got is not None:
                    return got
                if claim is None:
                    if time.monotonic() >= deadline or self._draining():
                        return None  # (rounds of the desk looked for it meanwhile)
                    if connected is not None and not connected():
                        return None
                    continue  # ended during a round that found nothing: wait on
            assert row is not None
            assignment = self._hand_out(claim, row)
            if assignment is not None:
                return assignment

    def _poll_both(
        self,
        session_id: str,
        row: SessionRow | None,
        wait_ms: int,
        connected: Callable[[], bool] | None,
        worker: str | None,
    ) -> tuple[Assignment | None, Claim | None]:
        """Waits in this engine for one of its own tasks (dispatched by the
        group that queued it, with no statement of its own) while the task
        desk claims for the poll from the shared queue; a round of the desk
        first takes the poll back from the engine (`withdraw`), so the poll
        gets a task from one of them only."""
        if row is None:
            return self._local.poll(session_id, 0, worker=worker), None  # refuses it
        desk = self._engine.tasks
        waiter = desk.enter(row.contracts, row.runtime, session_id, row.worker_id)
        self._waits(session_id, 1)
        try:
            got = self._handoff.poll_withdrawable(
                session_id,
                wait_ms,
                lambda withdraw: desk.parked(waiter, withdraw),
                connected,
                worker=worker,
            )
        finally:
            claim, error = desk.leave(waiter)
            self._waits(session_id, -1)
        if got is not None:
            # (Not expected: a claim withdraws the poll first.)
            if claim is not None and claim.owner == self._engine.node_id:
                self.release(claim.token)
            elif claim is not None:
                self.undelivered(claim.token)  # after the claim's `dispatched` entry
            return got, None
        if error is not None:
            raise error
        return None, claim

    def _hand_out(self, claim: Claim, row: SessionRow) -> Assignment | None:
        self._engine.tasks_claimed += 1
        if claim.owner != self._engine.node_id:
            # The owner records StepDispatched from its inbox.
            assignment: dict[str, Any] = {**claim.assignment, "token": claim.token}
            if claim.timeout_ms is not None:
                assignment["deadline_ms"] = self.clock.now_ms() + claim.timeout_ms
                assignment["timeout_ms"] = claim.timeout_ms
            return assignment  # type: ignore[return-value]
        try:
            dispatched = self._handoff.dispatch_offer(
                session_of(row),
                execution_id=claim.execution_id,
                unit_key=claim.unit_key,
                offer_seq=claim.offer_seq,
                token=claim.token,
            )
        except StorageError:
            self.release(claim.token)
            raise
        if dispatched is None:
            if self._handoff.holds(claim.execution_id):
                # The unit no longer waits for that offer: nobody will take it.
                self._tables.drop_claim(claim.token)
            else:
                # The execution left this server meanwhile: its new owner may want it.
                self.release(claim.token)
        return dispatched

    def release(self, token: str) -> None:
        """Puts a claim whose dispatch was not recorded back on the queue.
        When the database refuses that too (it is away: the usual reason
        the dispatch failed), the claim is kept and put back by a later
        `release_pending`: left claimed, its row would block the owner's
        offer of the same task (one row per offer), and the task would
        wait for ever."""
        try:
            self._tables.unclaim(token)
        except StorageError:
            with self._contacts_lock:
                self._unreleased.append(token)
            raise

    def release_pending(self) -> None:
        """Puts back the claims `release` could not and reports the tasks
        `undelivered` could not (called by the server's rounds); raises the
        StorageError of one still refused."""
        with self._contacts_lock:
            tokens, self._unreleased = self._unreleased, []
            unsent, self._unsent = self._unsent, []
        for i, token in enumerate(tokens):
            try:
                self._tables.unclaim(token)
            except StorageError:
                with self._contacts_lock:
                    self._unreleased[:0] = tokens[i:]
                    self._unsent[:0] = unsent
                raise
        for i, token in enumerate(unsent):
            try:
                self._undelivered(token)
            except StorageError:
                with self._contacts_lock:
                    self._unsent[:0] = unsent[i:]
                raise

    def undelivered(self, token: str) -> None:
        """As the engine's; when the database refuses it (it is away), it is
        made again by a later `release_pending`: the worker's session lives
        on, so no session timeout would ever redeliver the attempt."""
        try:
            self._undelivered(token)
        except StorageError:
            with self._contacts_lock:
                self._unsent.append(token)
            raise

    def _undelivered(self, token: str) -> None:
        eid = token.partition("/")[0]
        if "/" in token and self._engine.owner_elsewhere(eid):
            # After the `dispatched` entry of the claim, so the owner knows it.
            self._tables.put(eid, "undelivered", {"token": token})
            return
        self._local.undelivered(token)

    def complete(
        self, token: str, output: JsonValue = None, *, worker: str | None = None
    ) -> Accepted:
        # The checks a single server makes first, wherever the execution runs.
        admit_success(token, output)
        payload = {"token": token, "output": output, "worker": worker}
        if self._owned_elsewhere(token):
            return self._send_result(token, "complete", payload)
        reply = self._local.complete(token, output, worker=worker)
        if self._moved(token, reply):
            return self._send_result(token, "complete", payload)
        return reply

    def fail(
        self,
        token: str,
        error_code: str,
        error_message: str = "",
        retryable: bool = True,
        details: JsonValue = None,
        *,
        worker: str | None = None,
    ) -> Accepted:
        admit_failure(token, error_code, error_message, retryable, details)
        payload = {
            "token": token,
            "code": error_code,
            "message": error_message,
            "retryable": retryable,
            "details": details,
            "worker": worker,
        }
        if self._owned_elsewhere(token):
            return self._send_result(token, "fail", payload)
        reply = self._local.fail(
            token, error_code, error_message, retryable, details, worker=worker
        )
        if self._moved(token, reply):
            return self._send_result(token, "fail", payload)
        return reply

    # A result and the poll it carries: the two calls in turn here, as a
    # result may go to another server and a poll waits on the shared queue.

    def complete_then_poll(
        self, token: str, output: JsonValue, poll: PollAfter, *, worker: str | None = None
    ) -> Reported:
        return poll_after(self, self.complete(token, output, worker=worker), poll, worker)

    def fail_then_poll(
        self,
        token: str,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
        *,
        poll: PollAfter,
        worker: str | None = None,
    ) -> Reported:
        ack = self.fail(token, error_code, error_message, retryable, details, worker=worker)
        return poll_after(self, ack, poll, worker)

    def _owned_elsewhere(self, token: str) -> bool:
        eid, slash, _ = token.partition("/")
        return bool(slash) and self._engine.owner_elsewhere(eid)

    def _send_result(self, token: str, kind: str, payload: dict[str, Any]) -> Accepted:
        """Sends a result to the mailbox of its execution's owner (this server
        too, see `_moved`) and answers what the owner decided (accepted, or
        why not), as one server would."""
        eid = token.partition("/")[0]
        return _raise_reply(self._engine.forward(eid, kind, payload))  # type: ignore[no-any-return]

    def _moved(self, token: str, reply: Accepted) -> bool:
        """Whether the owner may yet know a token this engine did not: its
        execution moved to another server while the result was on its way,
        or it runs here and the token's `dispatched` message (a claim made
        through another server) waits in this server's own mailbox. Sent
        through the mailbox, the result is applied after that message, in
        order, instead of being refused as unknown (found by the simulation
        of shared mode)."""
        eid, slash, _ = token.partition("/")
        unknown = not reply.get("accepted") and str(reply.get("reason", "")).startswith(
            "unknown token"
        )
        if not (slash and unknown):
            return False
        return self._handoff.holds(eid) or self._engine.owner_elsewhere(eid)


def _finished(doc: ExecutionDoc) -> bool:
    return str(doc.get("status")) in ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")


def session_of(row: SessionRow) -> Session:
    return Session(
        row.session_id,
        row.worker_id,
        row.runtime,
        tuple(row.contracts),
        row.sdk,
        row.registered_ms,
        row.last_seen_ms,
    )
