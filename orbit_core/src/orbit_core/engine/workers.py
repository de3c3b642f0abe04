"""Worker sessions: registration, heartbeats (and the cancellations they
carry), the attempts each session holds, and sessions that go silent or
unregister, whose attempts become uncertain and are redelivered.

A caller bound to a worker id (a per-worker identity of the server) may only
use sessions registered under that id and report tokens issued to it: every
dispatched token remembers its worker id (`issued_to`, rebuilt from the
history at recovery) for as long as its execution runs.

A result the engine took but could not record (its group was undone: the
store refused the commit, or the command raised) leaves memory exactly as
the store has it, so the attempt is still in flight under the same token
and the worker may send the same report again; once the store takes it, it
is answered as usual. Nothing makes a worker do so, though (an SDK may give
up, a built-in task's report may be refused), and the session that holds the
attempt keeps heartbeating: it would own the attempt forever. So the token
also gets the deadline an attempt gets after a restart (`unrecorded`): one
session timeout from the failure, after which, if still in flight, the
attempt is uncertain and redelivered. A group undone because the store's answer
to its commit was lost may have been committed after all: an attempt it
dispatched is then in flight in the history although the poll that took it
was answered with the error, so it gets the same deadline (`unconfirmed`). We do not make it uncertain at once:
that needs a commit, which is what just failed, and a worker that reports
again soon should not cause a second delivery. Redelivery keeps the
at-least-once rule (an uncertain attempt is never taken as failed), and the
original token's success is still accepted while its unit is unresolved.
The deadlines are bookkeeping about sessions, like the sessions themselves,
not execution state: memory still never runs ahead of the store."""

from __future__ import annotations

import functools
from typing import TypeVar

from orbit_core import events as ev
from orbit_core.api import (
    UNIT_SCHEDULED,
    Accepted,
    HeartbeatReply,
    Registered,
    WaitingDoc,
    WorkerDoc,
    WorkerList,
)
from orbit_core.dispatch import EVERY_RUNTIME, RUNTIME_ANY, Session, routing_runtime
from orbit_core.engine.commands import Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.live import aborts_with_execution
from orbit_core.errors import InvalidError, NotFoundError, OrbitError, unknown_session
from orbit_core.ports import WorkerRow
from orbit_core.state import ExecutionState

V = TypeVar("V")
RESTART_REASON = "runtime restarted and no worker reported the result"
UNRECORDED_REASON = "its result could not be recorded and was not reported again"
UNCONFIRMED_DISPATCH_REASON = "its dispatch was not confirmed and no worker reported it"
# Unit keys listed per `waiting_for` entry; a large fan-out says how many more.
WAITING_UNITS_SHOWN = 20


class Workers:
    def __init__(self, executions: Executions, session_timeout_ms: int) -> None:
        self._x = executions
        self.session_timeout_ms = session_timeout_ms
        self.sessions: dict[str, Session] = {}
        # The session that holds each dispatched token.
        self._holders: dict[str, str] = {}
        # The worker id each token of a running execution was dispatched to.
        self.issued_to: dict[str, str] = {}
        # Attempts in flight at a restart, or whose result could not be
        # recorded: when to give up waiting for a report, and why.
        self._recovered: dict[str, tuple[int, str]] = {}

    # ---- sessions

    def register(
        self,
        tx: Tx,
        worker_id: str,
        runtime: str,
        contracts: list[tuple[str, str]],
        sdk: str | None,
        *,
        local: bool = False,
    ) -> Registered:
        """`local`: the session of in-process handlers, which never goes silent."""
        if not worker_id or not worker_id.strip():
            raise InvalidError("worker_id is required", "INVALID_REQUEST")
        if not contracts:
            raise InvalidError(
                "a worker must announce at least one task contract", "INVALID_REQUEST"
            )
        for task, _version in contracts:
            if task.startswith("orbit."):
                raise InvalidError(f"`{task}` is a built-in task", "RESERVED_TASK")
            if task.startswith("workflow:"):
                raise InvalidError(f"`{task}` is a child workflow contract", "RESERVED_TASK")
        warnings = []
        for task, version in contracts:
            used = self._x.catalog.contract_versions(task)
            if used and version not in used:
                warnings.append(
                    f"`{task}` is announced at version {version} but registered workflows "
                    f"use {', '.join(used)}; this worker will not receive those tasks"
                )
        session = Session(
            self._x.ids.session_id(),
            worker_id,
            runtime.lower(),
            tuple(contracts),
            sdk,
            tx.now,
            tx.now,
            local=local,
        )
        # Known once registered for good: a group undone leaves no session.
        tx.after_commit.append(
            functools.partial(self.sessions.__setitem__, session.session_id, session)
        )
        tx.workers.append(
            WorkerRow(
                worker_id,
                runtime.lower(),
                sdk,
                [{"task_name": t, "contract_version": v} for t, v in contracts],
                tx.now,
                tx.now,
            )
        )
        return {
            "accepted": True,
            "worker_session_id": session.session_id,
            "heartbeat_interval_ms": max(500, self.session_timeout_ms // 6),
            "session_timeout_ms": self.session_timeout_ms,
            "warnings": warnings,
        }

    def serve(self, session_id: str, contracts: list[tuple[str, str]]) -> None:
        """A local session takes the contracts of the handlers registered since."""
        self.sessions[session_id].contracts = tuple(contracts)

    def session(self, tx: Tx, session_id: str, worker: str | None = None) -> Session:
        """The session, seen now; `worker`: the id the caller is bound to.
        A session silent for longer than the session timeout has expired,
        whether or not a tick has found it yet (its attempts are, or will
        be, redelivered): it is unknown from then on, so it is handed no
        more tasks and its worker registers again (chapter 68)."""
        session = self.sessions.get(session_id)
        if session is None or (
            not session.local
            and (session.lost or tx.now - session.last_seen_ms > self.session_timeout_ms)
        ):
            raise unknown_session()
        _check_owner(session, worker)
        session.last_seen_ms = max(session.last_seen_ms, tx.now)
        return session

    def heartbeat(self, tx: Tx, session_id: str, worker: str | None = None) -> HeartbeatReply:
        session = self.session(tx, session_id, worker)
        return {"accepted": True, "cancel": self.cancels(session)}

    def cancels(self, session: Session) -> list[str]:
        """The session's attempts that are no longer wanted and that it has
        not been told of yet; each is returned once."""
        cancel = []
        for token in list(session.held):
            if token in session.cancel_sent:
                if not self._x.memory.knows(token):
                    session.held.discard(token)
                continue
            if not self._still_wanted(token):
                cancel.append(token)
                session.cancel_sent.add(token)
                if not self.is_current(token):
                    session.held.discard(token)
        return cancel

    def unregister(self, tx: Tx, session_id: str, worker: str | None = None) -> Accepted:
        session = self.sessions.get(session_id)
        if session is None:
            raise NotFoundError("unknown worker session", "UNKNOWN_SESSION")
        _check_owner(session, worker)
        self._lose(tx, session, "worker unregistered")
        tx.after_commit.append(functools.partial(_discard, self.sessions, session_id))
        return {"accepted": True}

    def describe(self, rows: list[WorkerRow], now: int) -> WorkerList:
        """`GET /v1/workers`: the registry rows with their live sessions."""
        out: list[WorkerDoc] = []
        for row in rows:
            live = [
                s for s in self.sessions.values() if s.worker_id == row.worker_id and not s.lost
            ]
            last_seen = max([row.last_seen_ms] + [s.last_seen_ms for s in live])
            inflight = sum(1 for s in live for t in s.held if self.is_current(t))
            out.append(
                {
                    "worker_id": row.worker_id,
                    "runtime": row.runtime,
                    "sdk": row.sdk,
                    "contracts": row.contracts,
                    "last_seen_ms": last_seen,
                    "registered_at_ms": row.registered_at_ms,
                    "online": any(now - s.last_seen_ms <= self.session_timeout_ms for s in live),
                    "sessions": len(live),
                    "inflight": inflight,
                }
            )
        return {"workers": out}

    def waiting_for(self, state: ExecutionState) -> list[WaitingDoc]:
        """What the execution's queued tasks wait for (`waiting_for` of the
        execution document): one entry per task contract and runtime, with how
        many connected sessions could take it (`serving`: 0 means nothing
        connected will ever poll it) and the workers connected for that task
        name at any version or runtime, so a typo in `using`, a worker not
        started or a wrong contract version can be told apart."""
        live = self._x.memory.get(state.id)
        if live is None or state.terminal:
            return []
        plan = live.plan
        groups: dict[tuple[str, str, str | None], WaitingDoc] = {}
        for unit in state.units_by_change():
            if unit.status != UNIT_SCHEDULED:
                continue
            spec = plan.spec(unit.key)
            if spec is None or spec.is_child or spec.is_builtin or spec.task is None:
                continue
            runtime = routing_runtime(spec.using)
            key = (spec.task, spec.contract_version or "", runtime)
            entry = groups.get(key)
            if entry is None:
                entry = groups[key] = {
                    "task": spec.task,
                    "contract_version": spec.contract_version or "",
                    "runtime": "any" if runtime is RUNTIME_ANY else runtime,
                    "units": [],
                    "queued": 0,
                    "since_ms": unit.scheduled_at_ms or state.updated_at_ms,
                    "serving": 0,
                    "workers": [],
                }
            entry["queued"] += 1
            if len(entry["units"]) < WAITING_UNITS_SHOWN:
                entry["units"].append(unit.key)
            if unit.scheduled_at_ms is not None:
                entry["since_ms"] = min(entry["since_ms"], unit.scheduled_at_ms)
        connected = [s for s in self.sessions.values() if not s.lost]
        for (task, version, runtime), entry in groups.items():
            entry["serving"] = sum(
                1
                for s in connected
                if (task, version) in s.contracts
                and (runtime in (RUNTIME_ANY, s.runtime) or s.runtime == EVERY_RUNTIME)
            )
            seen: dict[tuple[str, str, str], None] = {}
            for s in connected:
                for t, v in s.contracts:
                    if t == task:
                        seen[(s.worker_id, s.runtime, v)] = None
            entry["workers"] = [
                {"worker_id": w, "runtime": r, "contract_version": v} for w, r, v in sorted(seen)
            ]
        return list(groups.values())

    # ---- held attempts

    def hold(self, session: Session, token: str) -> None:
        self._holders[token] = session.session_id
        self.issued_to[token] = session.worker_id
        session.held.add(token)

    def check_issued(self, token: str, worker: str) -> None:
        """Refuses a report for a token dispatched to another worker id."""
        owner = self.issued_to.get(token)
        if owner is not None and owner != worker:
            raise OrbitError(
                f"task token was issued to worker `{owner}`, not `{worker}`", "FORBIDDEN"
            )

    def reported(self, tx: Tx, token: str) -> None:
        """A result arrived for the token: its holder was seen, and lets go of
        it once the result is committed."""
        tx.reported.append(token)
        holder = self.sessions.get(self._holders.get(token, ""))
        if holder is None:
            return
        holder.last_seen_ms = max(holder.last_seen_ms, tx.now)
        self._let_go(tx, holder, token)

    def _let_go(self, tx: Tx, holder: Session, token: str) -> None:
        """The session stops holding the token once the group is committed."""

        def settle() -> None:
            holder.held.discard(token)
            self._holders.pop(token, None)

        tx.after_commit.append(settle)

    def drop(self, tokens: list[str]) -> None:
        """Forgets attempts that no longer exist (their group was undone):
        the sessions that took them stop holding them."""
        for token in tokens:
            holder = self.sessions.get(self._holders.pop(token, ""))
            if holder is not None:
                holder.held.discard(token)

    def forget(self, tokens: list[str]) -> None:
        for token in tokens:
            self._holders.pop(token, None)
            self.issued_to.pop(token, None)

    def is_current(self, token: str) -> bool:
        """Whether the token is its unit's attempt in flight."""
        attempt = self._x.memory.attempt(token)
        return attempt is not None and attempt.in_flight

    def _still_wanted(self, token: str) -> bool:
        attempt = self._x.memory.attempt(token)
        if attempt is None or attempt.live.state.terminal or not attempt.in_flight:
            return False
        return not (attempt.live.state.abort is not None and aborts_with_execution(attempt.key))

    # ---- lost attempts

    def expect_reports(
        self, tokens: list[str], deadline: int, reason: str = RESTART_REASON
    ) -> None:
        """Attempts in flight at a restart become uncertain at `deadline`
        unless a worker reports them first."""
        for token in tokens:
            self._recovered[token] = (deadline, reason)

    def unrecorded(self, tokens: list[str], now: int, reason: str = UNRECORDED_REASON) -> None:
        """Results taken for `tokens` were undone with their group: each
        attempt still in flight one session timeout from now is uncertain
        (see the module's docstring). A later failure moves the deadline on."""
        deadline = now + self.session_timeout_ms
        for token in tokens:
            waiting = self._recovered.get(token)
            if waiting is None or waiting[0] < deadline:
                self._recovered[token] = (deadline, reason)

    def unconfirmed(self, tx: Tx) -> None:
        """The attempts the undone group `tx` dispatched to workers and
        built-in tasks (see the module's docstring): gone from memory when
        the store refused the commit, but in flight when it took the commit
        and only its answer was lost. Then the poll that took one was
        answered with the error, and a built-in one never started, so no
        report may ever come for it while its session heartbeats: one
        session timeout from now, each still in flight is uncertain. (A
        task claimed through another server of a shared cluster did reach
        its worker, which reports it within that time as usual.)"""
        tokens = [
            event.token
            for change in tx.changes.values()
            for event in (*change.archived, *change.events)
            if isinstance(event, ev.StepDispatched)
            and not event.worker_session.startswith("child:")
        ]
        if tokens:
            self.unrecorded(tokens, tx.now, UNCONFIRMED_DISPATCH_REASON)

    def next_due_ms(self) -> int | None:
        if not self._recovered:
            return None
        return min(deadline for deadline, _ in self._recovered.values())

    def make_uncertain(self, tx: Tx, token: str, reason: str) -> None:
        attempt = self._x.memory.attempt(token)
        if attempt is None or not attempt.in_flight:
            return
        live = attempt.live
        self._x.record(tx, live, ev.StepAttemptUncertain, attempt.key, attempt.number, reason)
        self._x.decide(tx, live)

    def undelivered(self, tx: Tx, token: str) -> None:
        """The assignment for `token` never reached its worker (the transport
        failed to send it): the attempt is uncertain now, not one session
        timeout later, and the session no longer holds it."""
        holder = self.sessions.get(self._holders.get(token, ""))
        if holder is None:
            return  # its session was lost: the attempt is uncertain already
        self.make_uncertain(tx, token, f"worker `{holder.worker_id}` never received the task")
        self._let_go(tx, holder, token)

    def _lose(self, tx: Tx, session: Session, reason: str) -> None:
        """Marks the attempts a session holds as uncertain; they are redelivered."""
        for token in sorted(session.held):
            self.make_uncertain(tx, token, reason)

        def forget() -> None:
            session.held.clear()
            session.lost = True

        tx.after_commit.append(forget)

    def tick(self, tx: Tx) -> None:
        """Loses silent sessions, and gives up on attempts nobody reported
        since the restart."""
        now = tx.now
        timeout = self.session_timeout_ms
        for session in list(self.sessions.values()):
            if session.local:
                continue
            silent = now - session.last_seen_ms
            if silent > timeout and not session.lost:
                self._lose(tx, session, f"worker `{session.worker_id}` stopped responding")
            if silent > 4 * timeout:
                tx.after_commit.append(
                    functools.partial(_discard, self.sessions, session.session_id)
                )
        if self._recovered:
            x = self._x
            for token, (deadline, reason) in list(self._recovered.items()):
                if now < deadline or (x.lost and x.lost_token(token) is not None):
                    continue  # (away with its execution until the store answers)
                self.make_uncertain(tx, token, reason)
                tx.after_commit.append(functools.partial(_discard, self._recovered, token))


def _check_owner(session: Session, worker: str | None) -> None:
    if worker is not None and session.worker_id != worker:
        raise OrbitError(
            f"session belongs to worker `{session.worker_id}`, not `{worker}`", "FORBIDDEN"
        )


def _discard(mapping: dict[str, V], key: str) -> None:
    mapping.pop(key, None)
