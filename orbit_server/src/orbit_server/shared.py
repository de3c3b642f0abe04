"""Shared mode (`--cluster --cluster-mode shared`, chapter 44): every server
active, sharing executions and worker tasks through PostgreSQL.

Each server's worker process runs a `SharedNode`: the WSGI app (every route
served, nothing refused for want of a leader) around a `SharedEngine`, and
two threads.

- The engine is a full one on a `SharedStore` (orbit_store/shared.py), built
  with `offer_tasks=True, local_first=True`: it runs the executions this
  server owns (those it started, those it resumed after a restart of the
  same node id, and those it took over), and its worker tasks wait in its
  own index first, as on a single server, so a poll here takes one in the
  group that queued it, with no statement of its own. Those no poll here
  took within one to two `PUBLISH_S` go to the shared queue (taken out of
  the index in the same group, so a task is handed out through one of the
  two only), as do the pending tasks of executions it adopts (taken over or
  resumed: the queue may hold them already). Task tokens name their
  execution. Every commit is fenced on the owners' epochs by the database.
- `SharedEngine` sends each call where it can be answered: a poll waits in
  this engine for its own tasks while the task desk claims for it from the
  shared queue, and a claim first takes the poll back from the engine
  (`Engine.poll_withdrawable`), so it gets one task from one of them (for a
  claimed task the owner records the dispatch: this engine when it owns the
  execution, else the owner through its inbox, while the task is returned
  at once); a result, signal or cancellation for an execution
  owned elsewhere is checked here as a single server checks it, then goes to
  the owner's inbox and waits up to 10 s for the owner's reply, so it is
  answered with what the owner decided, as on one server; a wait on an
  execution owned elsewhere lists itself in `orbit_waits`, so that its
  owner announces the end (NOTIFY orbit_done: no end is announced that
  nobody waits for elsewhere), and reads the database again at each
  announcement and every second. Sessions are
  written to `orbit_sessions`, and a session registered elsewhere is loaded
  into this engine the first time it is used here.
- `orbit-heartbeat` (every `interval`, 1 s): the heartbeat alone (the
  database's clock), on its own connection, so that no slow round or
  vacuum makes the others take this server's executions.
- `orbit-shared` (every `interval`): dropping executions a fenced commit
  showed lost, taking over its rendezvous share of the trees of servers
  whose heartbeat is older than `--node-timeout` (in batches of 100 trees),
  syncing the sessions' last contacts both ways, posting the cancellations
  of sessions that talk to other servers, and loading definitions and
  schedules changed elsewhere (schedule claims name the node, so an
  occurrence fires on one server).
- `orbit-claims` (orbit_server/task_desk.py): claims from the shared queue
  for every poll waiting on this server, this server's tasks first.
- `orbit-publish` (every `PUBLISH_S`): moves the tasks that waited in the
  engine's index since the last time to the shared queue
  (`Engine.publish_stale`).
- `orbit-inbox`: applies the inbox entries of the executions this engine
  holds, those of one execution in order, different executions at once
  (so their commits share groups); woken by NOTIFY orbit_inbox with the
  execution's id, and reading every entry for this server each second.
- `orbit-vacuum` (every 2 s): vacuums the queue and the inbox, whose rows
  live for milliseconds (SharedTables.vacuum).

An entry is applied through one engine call made under its receipt
(`Engine.receipt`), so the commit of the events it causes also marks it
applied: an owner that dies right after leaves nothing for its successor to
apply again. The reply for a waiting sender is written after the call.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orbit_core.api import (
    Accepted,
    Assignment,
    ExecutionDoc,
    HeartbeatReply,
    Registered,
    SignalAccepted,
    WorkerList,
)
from orbit_core.dispatch import Session
from orbit_core.engine import DEFAULT_WAIT_MS, MAX_WAIT_MS, Engine, handoff
from orbit_core.engine.handoff import Sharing
from orbit_core.engine.polling import DEFAULT_POLL_MS, MAX_POLL_MS
from orbit_core.engine.results import admit_failure, admit_success
from orbit_core.engine.worker_desk import WorkerApi, contract_pairs
from orbit_core.errors import (
    ConflictError,
    InvalidError,
    LimitError,
    NotFoundError,
    OrbitError,
    StorageError,
)
from orbit_core.jsontypes import JsonValue
from orbit_core.ports import Store
from orbit_server import logs
from orbit_server.config import ServerConfig
from orbit_server.task_desk import TaskDesk
from orbit_store.shared import (
    TAKEOVER_BATCH,
    Claim,
    InboxEntry,
    Listener,
    SessionRow,
    SharedStore,
    SharedTables,
    rendezvous,
)

INTERVAL_ENV = "ORBIT_CLUSTER_INTERVAL_MS"
# The channels of orbit_store.shared.Listener this module waits on.
TASKS, INBOX, REPLIES, DONE = "orbit_tasks", "orbit_inbox", "orbit_replies", "orbit_done"
# Inbox entries of different executions are applied by this many threads at
# once, so that their commits share groups.
INBOX_THREADS = 16
# Entries read by one round over the whole inbox of a node.
INBOX_ROUND = 200
REPLY_WAIT_S = 10.0
# A task waits in its owner's engine from one to two of these before it goes
# to the shared queue: a poll on the owner takes it with no statement of its
# own (the group that queued it records the dispatch), and the owner's
# workers, which poll again right after each result, take nearly all of
# theirs in that time; a task no worker here can take waits at most 0.1 s.
PUBLISH_S = 0.05
RECHECK_S = 1.0
SHARED = "shared"
# The inbox is swept every so many rounds of entries older than this.
SWEEP_ROUNDS = 60
VACUUM_S = 2.0
SWEEP_AFTER_MS = 60_000
_ERRORS: dict[str, type[OrbitError]] = {
    cls.__name__: cls
    for cls in (NotFoundError, ConflictError, InvalidError, LimitError, StorageError, OrbitError)
}

App = Callable[[dict[str, Any], Any], Iterable[bytes]]


def interval_s() -> float:
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw) / 1000
    return 1.0


def _error_reply(exc: OrbitError) -> dict[str, Any]:
    return {"error": {"type": type(exc).__name__, "code": exc.code, "message": exc.message}}


def _raise_reply(reply: Any) -> Any:
    if isinstance(reply, dict) and "error" in reply:
        error = reply["error"]
        cls = _ERRORS.get(str(error.get("type")), OrbitError)
        raise cls(str(error.get("message", "")), str(error.get("code", "INTERNAL")))
    return reply["ok"] if isinstance(reply, dict) else reply


class SharedEngine(Engine):
    """The engine of a shared-mode server (module docstring): calls about
    executions or tasks this engine does not hold go through the database.
    The worker calls are its `SharedDesk` (`workers`); the handoff steps of
    engine/handoff.py are `handoff`."""

    node: SharedNode
    desk: SharedDesk

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["sharing"] = Sharing(offer_tasks=True, local_first=True, shared_catalog=True)
        super().__init__(*args, **kwargs)
        self.handoff = handoff.of(self)
        self._local = self.workers

    def attach(self, node: SharedNode) -> None:
        self.node = node
        self.desk = SharedDesk(self, self._local, node)
        self.workers = self.desk

    def owner_elsewhere(self, execution_id: str) -> bool:
        """Whether the execution is owned, but not held in this engine."""
        if self.handoff.holds(execution_id):
            return False
        return self.node.tables.owner(execution_id) is not None

    # ---- executions

    def signal(self, execution_id: str, name: str, payload: JsonValue = None) -> SignalAccepted:
        if self.owner_elsewhere(execution_id):
            reply = self.forward(execution_id, "signal", {"name": name, "payload": payload})
            return _raise_reply(reply)  # type: ignore[no-any-return]
        return super().signal(execution_id, name, payload)

    def cancel(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        if self.owner_elsewhere(execution_id):
            reply = self.forward(execution_id, "cancel", {"reason": reason})
            return _raise_reply(reply)  # type: ignore[no-any-return]
        return super().cancel(execution_id, reason)

    def forward(self, execution_id: str, kind: str, payload: Any) -> Any:
        """Puts an entry in the inbox of the execution's owner and waits for
        the owner's reply."""
        tables = self.node.tables
        seq = tables.put(execution_id, kind, payload)
        deadline = time.monotonic() + REPLY_WAIT_S
        seen = self.node.listener.serial(REPLIES)
        while True:
            done, reply = tables.reply(seq)
            if done:
                return reply
            remaining = deadline - time.monotonic()
            if remaining <= 0 and tables.withdraw(seq):
                # Taken back unapplied, so the caller may safely send it again.
                raise StorageError(
                    f"the owner of execution `{execution_id}` did not answer within "
                    f"{REPLY_WAIT_S:g} s; the {kind} was not applied"
                )
            if remaining <= -REPLY_WAIT_S:
                # Applied (it could not be taken back), but its owner stopped
                # before it wrote the reply.
                raise StorageError(
                    f"the owner of execution `{execution_id}` applied the {kind} "
                    "but stopped before it answered"
                )
            seen = self.node.listener.wait(REPLIES, seen, max(0.01, min(remaining, 0.25)))

    def wait(self, execution_id: str, timeout_ms: int = DEFAULT_WAIT_MS) -> ExecutionDoc:
        holds = self.handoff.holds
        if holds(execution_id):
            return super().wait(execution_id, timeout_ms)
        deadline = time.monotonic() + min(max(timeout_ms, 0), MAX_WAIT_MS) / 1000
        doc = self.get(execution_id)
        if _finished(doc) or time.monotonic() >= deadline or self._draining:
            return doc
        # Listed, so that the owner announces the end (else it does not).
        tables = self.node.tables
        watch = tables.watch(execution_id)
        try:
            seen = self.node.listener.serial(DONE)
            while True:
                # Read again once listed, not only after announcements: an
                # end committed before the listing was announced to nobody.
                doc = self.get(execution_id)
                remaining = deadline - time.monotonic()
                if holds(execution_id):
                    return super().wait(execution_id, max(0, int(remaining * 1000)))
                if _finished(doc) or remaining <= 0 or self._draining:
                    return doc
                seen = self.node.listener.wait(DONE, seen, min(remaining, RECHECK_S))
        finally:
            with contextlib.suppress(StorageError):
                tables.unwatch(watch)

    # ---- the inbox

    def apply(self, entry: InboxEntry) -> Any:
        """Applies one inbox entry through the engine's own calls; returns
        the reply for the server that sent it."""
        p = entry.payload
        session: Session | None = None
        if entry.kind == "dispatched":
            row = self.desk.session_row(p["session_id"])
            session = (
                _session(row)
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
                    self.node.tables.post_cancels({p["session_id"]: [p["token"]]})
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
            if entry.kind == "signal":
                return {"ok": Engine.signal(self, entry.execution_id, p["name"], p["payload"])}
            if entry.kind == "cancel":
                return {"ok": Engine.cancel(self, entry.execution_id, p["reason"])}
        except StorageError:
            raise  # not applied: tried again, here or by the next owner
        except OrbitError as exc:
            return _error_reply(exc)
        return _error_reply(OrbitError(f"unknown inbox entry `{entry.kind}`"))


class SharedDesk:
    """The worker calls of a shared-mode server (`WorkerApi`): sessions are
    written to `orbit_sessions`, a poll waits for this engine's tasks and the
    shared queue's at once, and a result for an execution owned elsewhere
    goes to its owner's inbox. `local` is the engine's own desk."""

    def __init__(self, engine: SharedEngine, local: WorkerApi, node: SharedNode) -> None:
        self._engine = engine
        self._local = local
        self._handoff = engine.handoff
        self.node = node
        self.clock = engine.clock
        self._sessions: dict[str, SessionRow] = {}
        self._contacts: dict[str, int] = {}
        self._contacts_lock = threading.Lock()
        # Sessions with a poll waiting here (how many): in contact now.
        self.polls_waiting: dict[str, int] = {}

    def _draining(self) -> bool:
        return self._engine._draining

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
        self.node.tables.put_session(row)
        return reply

    def session_row(self, session_id: str) -> SessionRow | None:
        row = self._sessions.get(session_id)
        if row is None:
            found = self.node.tables.sessions([session_id])
            if not found:
                return None
            row = self._sessions[session_id] = found[0]
            self._handoff.know_sessions([_session(row)])
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
        posted = self.node.tables.take_cancels(session_id)
        if posted:
            reply["cancel"] = sorted({*reply["cancel"], *posted})
        return reply

    def unregister(self, session_id: str, *, worker: str | None = None) -> Accepted:
        self.session_row(session_id)
        reply = self._local.unregister(session_id, worker=worker)
        self.node.tables.drop_session(session_id)
        self._sessions.pop(session_id, None)
        return reply

    def list(self) -> WorkerList:
        """`GET /v1/workers` of the whole cluster: the registry is shared, and
        the sessions of every server come from `orbit_sessions` (in-flight
        counts are this server's own)."""
        listing = self._local.list()
        now = self.clock.now_ms()
        timeout = self._engine.session_timeout_ms
        by_worker: dict[str, list[SessionRow]] = {}
        for row in self.node.tables.sessions_seen_since(now - timeout):
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
        desk = self.node.desk
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
        desk = self.node.desk
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
            if claim is not None and claim.owner == self.node.node_id:
                self.node.tables.unclaim(claim.token)
            elif claim is not None:
                self.undelivered(claim.token)  # after the claim's `dispatched` entry
            return got, None
        if error is not None:
            raise error
        return None, claim

    def _hand_out(self, claim: Claim, row: SessionRow) -> Assignment | None:
        self.node.tasks_claimed += 1
        if claim.owner != self.node.node_id:
            # The owner records StepDispatched from its inbox.
            assignment: dict[str, Any] = {**claim.assignment, "token": claim.token}
            if claim.timeout_ms is not None:
                assignment["deadline_ms"] = self.clock.now_ms() + claim.timeout_ms
                assignment["timeout_ms"] = claim.timeout_ms
            return assignment  # type: ignore[return-value]
        try:
            dispatched = self._handoff.dispatch_offer(
                _session(row),
                execution_id=claim.execution_id,
                unit_key=claim.unit_key,
                offer_seq=claim.offer_seq,
                token=claim.token,
            )
        except StorageError:
            self.node.tables.unclaim(claim.token)
            raise
        if dispatched is None:
            if self._handoff.holds(claim.execution_id):
                # The unit no longer waits for that offer: nobody will take it.
                self.node.tables.drop_claim(claim.token)
            else:
                # The execution left this server meanwhile: its new owner may want it.
                self.node.tables.unclaim(claim.token)
        return dispatched

    def undelivered(self, token: str) -> None:
        eid = token.partition("/")[0]
        if "/" in token and self._engine.owner_elsewhere(eid):
            # After the `dispatched` entry of the claim, so the owner knows it.
            self.node.tables.put(eid, "undelivered", {"token": token})
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

    def _owned_elsewhere(self, token: str) -> bool:
        eid, slash, _ = token.partition("/")
        return bool(slash) and self._engine.owner_elsewhere(eid)

    def _send_result(self, token: str, kind: str, payload: dict[str, Any]) -> Accepted:
        """Sends a result to the inbox of its execution's owner and answers
        what the owner decided (accepted, or why not), as one server would."""
        eid = token.partition("/")[0]
        return _raise_reply(self._engine.forward(eid, kind, payload))  # type: ignore[no-any-return]

    def _moved(self, token: str, reply: Accepted) -> bool:
        """Whether a token this engine did not know belongs to an execution
        that moved to another server while the result was on its way."""
        eid, slash, _ = token.partition("/")
        unknown = not reply.get("accepted") and str(reply.get("reason", "")).startswith(
            "unknown token"
        )
        return bool(slash) and unknown and self._engine.owner_elsewhere(eid)


def _finished(doc: ExecutionDoc) -> bool:
    return str(doc.get("status")) in ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")


def _token(execution_id: str) -> str:
    """Task tokens name their execution, so any server can route a result."""
    return f"{execution_id}/{uuid.uuid4()}"


def _session(row: SessionRow) -> Session:
    return Session(
        row.session_id,
        row.worker_id,
        row.runtime,
        tuple(row.contracts),
        row.sdk,
        row.registered_ms,
        row.last_seen_ms,
    )


class SharedNode:
    """One server of a shared cluster: the WSGI app, the engine and the
    threads of the module docstring."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        node_id: str,
        advertise_addr: str | None,
        build_engine: Callable[[Store, type[Engine]], Engine],
        make_app: Callable[[Engine, SharedNode], App],
        interval: float | None = None,
    ) -> None:
        self.config = config
        self.node_id = node_id
        self.advertise_addr = advertise_addr
        self.interval_s = interval if interval is not None else interval_s()
        self.node_timeout_ms = round(max(2.0, config.node_timeout_s) * 1000)
        self.instance = str(uuid.uuid4())
        self.tasks_claimed = 0
        self._log = logs.logger()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._last_beat = time.monotonic()
        self._conflict = False
        self._lost: list[str] = []
        self._rounds = 0
        self._failing: str | None = None
        self._schedules: tuple[int, ...] | None = None
        self._lost_lock = threading.Lock()
        self._log.info(
            "cluster mode: shared (every server active)",
            node_id=node_id,
            advertise_addr=logs.Quoted(advertise_addr or ""),
            node_timeout_ms=self.node_timeout_ms,
        )
        ca_cert = os.environ.get("ORBIT_DB_CA_CERT") or None
        self.store = SharedStore(config.db, node_id=node_id, ca_cert=ca_cert)
        self.store.on_lost = self._on_lost
        self.tables = SharedTables(self.store, node_id)
        # One connection for each background thread (heartbeat, rounds,
        # vacuum), so that none queues behind requests or behind another.
        self._own_tables = SharedTables(self.store, node_id, connections=3)
        try:
            self._join()
            built = build_engine(self.store, SharedEngine)
        except BaseException:
            self.tables.close()
            self._own_tables.close()
            self.store.close()
            raise
        assert isinstance(built, SharedEngine)
        self.engine: SharedEngine = built
        self.engine.attach(self)
        self.listener = Listener(self.store, node_id)
        self.desk = TaskDesk(
            self.tables,
            _token,
            recheck_s=RECHECK_S,
            on_error=self._claim_failed,
        )
        self.listener.subscribe(TASKS, self.desk.stir)
        self._inbox_cond = threading.Condition()
        self._inbox_due: set[str] = set()
        self._inbox_all = True
        self.listener.subscribe(INBOX, self._inbox_notified)
        self._inbox_pool = ThreadPoolExecutor(INBOX_THREADS, thread_name_prefix="orbit-inbox")
        self._app = make_app(self.engine, self)
        self._log.info(
            "shared: node is serving",
            node_id=node_id,
            resumed=self.engine.recovered_executions,
        )

    def _join(self) -> None:
        """Takes the node id, waiting up to three node timeouts for another
        process that holds it (a quick restart) to stop heartbeating."""
        deadline = time.monotonic() + 3 * self.node_timeout_ms / 1000
        while not self.tables.join(self.advertise_addr, self.instance, self.node_timeout_ms):
            if time.monotonic() > deadline:
                age = next(
                    (
                        n.heartbeat_age_ms
                        for n in self.tables.nodes(10**12)
                        if n.node_id == self.node_id
                    ),
                    0,
                )
                raise StorageError(
                    f"another server with node id `{self.node_id}` is running (it heartbeated "
                    f"{age} ms ago); give every server its own --node-id"
                )
            time.sleep(min(0.5, self.interval_s))

    # ---- health and readiness (resources/health.ClusterView)

    def fields(self) -> dict[str, object]:
        try:
            nodes = self.tables.nodes(self.node_timeout_ms)
        except StorageError:
            nodes = []
        owned = len(self.store.owned())
        return {
            "role": SHARED,
            "node_id": self.node_id,
            "term": None,
            "leader": None,
            "owned_executions": owned,
            "tasks_claimed": self.tasks_claimed,
            "nodes": [
                {
                    "node_id": n.node_id,
                    "addr": n.addr,
                    "live": n.live,
                    "heartbeat_age_ms": n.heartbeat_age_ms,
                    "owned_executions": n.owned_executions,
                }
                for n in nodes
            ],
        }

    def serving(self) -> bool:
        fresh = time.monotonic() - self._last_beat < self.node_timeout_ms / 1000
        return fresh and not self._conflict

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        return self._app(environ, start_response)

    # ---- threads

    def start(self) -> None:
        for target, name in (
            (self._beat_loop, "orbit-heartbeat"),
            (self._loop, "orbit-shared"),
            (self._inbox_loop, "orbit-inbox"),
            (self._vacuum_loop, "orbit-vacuum"),
            (self._publish_loop, "orbit-publish"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def _loop(self) -> None:
        delay = 0.0
        while not self._stop.wait(delay):
            started = time.monotonic()
            try:
                self.round()
                self._failing = None
            except Exception as exc:  # the loop must outlive any one failure
                if str(exc) != self._failing:  # once per distinct failure, not every round
                    self._log.error("shared: round failed", error=str(exc))
                self._failing = str(exc)
            delay = max(0.0, self.interval_s - (time.monotonic() - started))

    def _beat_loop(self) -> None:
        """The heartbeat alone, on a connection of its own: nothing a round
        waits for (the engine, a vacuum) can make the others think this
        node died."""
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception as exc:
                self._log.error("shared: heartbeat failed", error=str(exc))

    def beat(self) -> None:
        if self._own_tables.heartbeat(self.instance):
            self._last_beat = time.monotonic()
            self._conflict = False
        elif not self._conflict:
            self._conflict = True
            self._log.error(
                "shared: another process took this node id; not ready", node_id=self.node_id
            )

    def _publish_loop(self) -> None:
        """Every `PUBLISH_S`, the tasks that waited in the engine's index
        since the last time (no poll here took them) go to the shared queue,
        for the polls of every server (`Engine.publish_stale`)."""
        failing = None
        while not self._stop.wait(PUBLISH_S):
            try:
                self.engine.handoff.publish_stale()
                failing = None
            except Exception as exc:
                if str(exc) != failing:  # once per distinct failure, not 20 times a second
                    self._log.warning("shared: publishing tasks failed", error=str(exc))
                failing = str(exc)

    def _vacuum_loop(self) -> None:
        """Vacuums the queue and the inbox (SharedTables.vacuum) every few
        seconds, on a connection of its own (a vacuum can wait seconds for
        the pages it cleans)."""
        while not self._stop.wait(VACUUM_S):
            try:
                self._own_tables.vacuum()
            except Exception as exc:
                self._log.warning("shared: vacuum failed", error=str(exc))

    def _on_lost(self, execution_ids: list[str]) -> None:
        # Called inside a failing commit: the engine is busy; drop them later.
        with self._lost_lock:
            self._lost.extend(execution_ids)

    def round(self) -> None:
        """One round of clean-up, take-over and sync (the heartbeat has a
        thread of its own)."""
        with self._lost_lock:
            lost, self._lost = self._lost, []
        lost.extend(self._reconcile())
        dropped = self.engine.handoff.release(lost) if lost else 0
        if dropped:
            # (Most of `lost` ended here just now: nothing to drop.)
            self._log.warning("shared: lost executions to another server", executions=dropped)
        self._sync_sessions()
        if self.engine.handoff.reload_definitions():
            self._log.info("shared: loaded definitions deployed through another server")
        mark = self.store.schedules_mark()
        if mark != self._schedules:
            if self._schedules is not None:
                # Changed or fired through another server (the claims keep
                # every occurrence to one server).
                self.engine.schedules.refresh()
            self._schedules = mark
        if self.serving():
            self._take_over()

    def _reconcile(self) -> list[str]:
        """What this node holds but the database gives to another (after it
        lost the database or paused past the node timeout); also sweeps the
        inbox now and then."""
        self._rounds += 1
        if self._rounds % SWEEP_ROUNDS == 0:
            self._own_tables.sweep(SWEEP_AFTER_MS)
        held = self.store.owned()
        rows = self._own_tables.owned_rows()
        # Owned here by the database and this store, but not running in the
        # engine (a take-over whose rebuild failed): rebuilt again.
        stranded = [e for e in rows if e in held and rows[e] == held[e][1]]
        stranded = [e for e in stranded if not self.engine.handoff.holds(e)]
        if stranded:
            self.engine.handoff.take_over(self.store.histories(stranded))
        gone = [eid for eid, (_root, epoch) in held.items() if rows.get(eid) != epoch]
        if gone:
            # Ended just now (the row went with the end) or lost: either way
            # nothing more is written for them here.
            self.store.disown(gone)
        return gone

    def _take_over(self) -> None:
        orphaned = self._own_tables.orphaned_roots(self.node_timeout_ms)
        if not orphaned:
            return
        live = [n.node_id for n in self._own_tables.nodes(self.node_timeout_ms) if n.live]
        if self.node_id not in live:
            return
        by_dead: dict[str, list[str]] = {}
        for root, dead in orphaned:
            if rendezvous(root, live) == self.node_id:
                by_dead.setdefault(dead, []).append(root)
        for dead, roots in by_dead.items():
            self._log.warning(
                "shared: taking over executions of a node that stopped heartbeating",
                **{"from": dead},
                executions=len(roots),
            )
            for start in range(0, len(roots), TAKEOVER_BATCH):
                moved = self._own_tables.take_over(roots[start : start + TAKEOVER_BATCH], dead)
                self.store.adopt(moved)
                histories = self.store.histories([m[0] for m in moved])
                adopted, in_flight = self.engine.handoff.take_over(histories)
                self._inbox_notified(None)  # what was sent to the dead node is ours now
                self._log.info(
                    "shared: took ownership of executions",
                    executions=adopted,
                    in_flight=in_flight,
                    **{"from": dead},
                )

    def _sync_sessions(self) -> None:
        """Contacts made here go to the database; contacts made elsewhere
        with the sessions this engine knows come back."""
        self._own_tables.touch_sessions(self.engine.desk.take_contacts())
        known = self.engine.handoff.session_ids()
        rows = self._own_tables.sessions(known)
        if rows:
            self.engine.handoff.touch_sessions({r.session_id: r.last_seen_ms for r in rows})
        # Attempts owned here that a session polling elsewhere should stop.
        self._own_tables.post_cancels(self.engine.handoff.cancels(known))

    def _claim_failed(self, exc: StorageError) -> None:
        self._log.warning("shared: claiming tasks failed", error=exc.message)

    def _inbox_notified(self, execution_ids: list[str] | None) -> None:
        with self._inbox_cond:
            if execution_ids is None or "" in execution_ids:
                self._inbox_all = True
            else:
                self._inbox_due.update(execution_ids)
            self._inbox_cond.notify()

    def _inbox_loop(self) -> None:
        """Reads the entries of the executions named by notifications, and
        every entry for this node every `RECHECK_S` (a notification can be
        missed, and entries of executions taken over have none)."""
        last_all = 0.0
        while not self._stop.is_set():
            with self._inbox_cond:
                self._inbox_cond.wait_for(
                    lambda: self._inbox_due or self._inbox_all or self._stop.is_set(),
                    max(0.0, last_all + RECHECK_S - time.monotonic()),
                )
                every = self._inbox_all or time.monotonic() - last_all >= RECHECK_S
                due, self._inbox_due, self._inbox_all = self._inbox_due, set(), False
            if every:
                last_all = time.monotonic()
            try:
                applied = self.apply_inbox(None if every else due)
            except Exception as exc:
                self._log.error("shared: inbox round failed", error=str(exc))
                continue
            if every and applied >= INBOX_ROUND:
                self._inbox_notified(None)  # more are waiting

    def apply_inbox(self, execution_ids: Iterable[str] | None = None) -> int:
        """Applies the pending entries of the executions this engine holds
        (of those named, or all): those of one execution in order, different
        executions at once."""
        if execution_ids is None:
            entries = self.tables.pending(INBOX_ROUND)
        else:
            entries = self.tables.pending_for(
                [e for e in execution_ids if self.engine.handoff.holds(e)]
            )
        runs: dict[str, list[InboxEntry]] = {}
        for entry in entries:
            if self.engine.handoff.holds(entry.execution_id):  # else being taken over: later
                runs.setdefault(entry.execution_id, []).append(entry)
        replies = [
            reply
            for applied in self._inbox_pool.map(self._apply_run, runs.values())
            for reply in applied
        ]
        if replies:
            self.tables.done(replies)
        return len(replies)

    def _apply_run(self, entries: list[InboxEntry]) -> list[tuple[InboxEntry, Any]]:
        """Applies one execution's entries in order, up to the first that
        the store refused (tried again in a later round)."""
        replies = []
        for entry in entries:
            try:
                replies.append((entry, self.engine.apply(entry)))
            except StorageError as exc:
                self._log.warning(
                    "shared: inbox entry not applied", seq=entry.seq, error=exc.message
                )
                break
        return replies

    # ---- shutdown

    def drain(self) -> None:
        self.engine.drain()

    def close(self, *, leave: bool = True) -> None:
        """Stops the threads and the engine; leaving sets the heartbeat to 0
        so the others take this server's executions over at once."""
        self._stop.set()
        self._inbox_notified(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=10)
        self.engine.close()
        if leave:
            with contextlib.suppress(StorageError):
                self.tables.leave(self.instance)
                self._log.info(
                    "shared: left the cluster; other servers take over this server's executions"
                )
        self.desk.close()
        self._inbox_pool.shutdown(wait=True)
        self.listener.close()
        self.tables.close()
        self._own_tables.close()
