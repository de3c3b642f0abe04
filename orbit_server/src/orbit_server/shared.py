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
  occurrence fires on one server), and putting back on the queue the
  claims whose dispatch failed while the database was away.
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
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orbit_core.coordination import INBOX, TASKS, InboxEntry, rendezvous
from orbit_core.engine import Engine
from orbit_core.engine.facade import EngineApi
from orbit_core.engine.flow_gates import is_gate
from orbit_core.engine.handoff import Sharing
from orbit_core.engine.shared import RECHECK_S, SharedEngine
from orbit_core.engine.task_desk import TaskDesk
from orbit_core.errors import StorageError
from orbit_core.ports import Store
from orbit_server import logs
from orbit_server.batches import Batches
from orbit_server.config import ServerConfig
from orbit_server.retention import Sweeper
from orbit_store.shared import (
    TAKEOVER_BATCH,
    Listener,
    SharedStore,
    SharedTables,
)
from orbit_store.sweeplock import BatchLock, SweepLock

INTERVAL_ENV = "ORBIT_CLUSTER_INTERVAL_MS"
# Inbox entries of different executions are applied by this many threads at
# once, so that their commits share groups.
INBOX_THREADS = 16
# Entries read by one round over the whole inbox of a node.
INBOX_ROUND = 200
# A task waits in its owner's engine from one to two of these before it goes
# to the shared queue: a poll on the owner takes it with no statement of its
# own (the group that queued it records the dispatch), and the owner's
# workers, which poll again right after each result, take nearly all of
# theirs in that time; a task no worker here can take waits at most 0.1 s.
PUBLISH_S = 0.05
SHARED = "shared"
# The inbox is swept every so many rounds of entries older than this.
SWEEP_ROUNDS = 60
VACUUM_S = 2.0
SWEEP_AFTER_MS = 60_000
App = Callable[[dict[str, Any], Any], Iterable[bytes]]


def interval_s() -> float:
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw) / 1000
    return 1.0


def _token(execution_id: str) -> str:
    """Task tokens name their execution, so any server can route a result."""
    return f"{execution_id}/{uuid.uuid4()}"


class SharedNode:
    """One server of a shared cluster: the WSGI app, the engine and the
    threads of the module docstring."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        node_id: str,
        advertise_addr: str | None,
        build_engine: Callable[[Store, Sharing | None], Engine],
        make_app: Callable[[EngineApi, SharedNode], App],
        interval: float | None = None,
        sweeper: Sweeper | None = None,
        batches: Batches | None = None,
    ) -> None:
        self.config = config
        # --retention: every server's sweeper sweeps while it holds the lock.
        self._sweeper = sweeper
        # Batch operations: every server creates and shows them; the one
        # holding the batch lock runs them, acting through this engine (so
        # each action goes to its execution's owner).
        self._batches = batches
        self.node_id = node_id
        self.advertise_addr = advertise_addr
        self.interval_s = interval if interval is not None else interval_s()
        self.node_timeout_ms = round(max(2.0, config.node_timeout_s) * 1000)
        self.instance = str(uuid.uuid4())
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
        # The engine's group thread takes step slots on a connection of its
        # own (orbit_core/engine/step_slots.py).
        self._slot_tables = SharedTables(self.store, node_id, connections=1)
        try:
            self._join()
            sharing = Sharing(
                offer_tasks=True,
                local_first=True,
                shared_catalog=True,
                step_slots=self._slot_tables,
            )
            built = build_engine(self.store, sharing)
        except BaseException:
            self.tables.close()
            self._own_tables.close()
            self._slot_tables.close()
            self.store.close()
            raise
        self.listener = Listener(self.store, node_id)
        self.desk = TaskDesk(
            self.tables,
            _token,
            recheck_s=RECHECK_S,
            on_error=self._claim_failed,
        )
        self.listener.subscribe(TASKS, self.desk.stir)
        self.engine = SharedEngine(
            built,
            node_id=node_id,
            tables=self.tables,
            announcements=self.listener,
            tasks=self.desk,
            adopt=self.store.adopt,
        )
        # The flow gates this node held before it restarted (resumed with
        # its executions by the engine's recovery).
        self.engine.handoff.hold_gates(list(self.store.owned()))
        self._inbox_cond = threading.Condition()
        self._inbox_due: set[str] = set()
        self._inbox_all = True
        self.listener.subscribe(INBOX, self._inbox_notified)
        self._inbox_pool = ThreadPoolExecutor(INBOX_THREADS, thread_name_prefix="orbit-inbox")
        self._app = make_app(self.engine, self)
        if sweeper is not None:
            sweeper.attach(self.store, SweepLock(self.store, node_id))
        if batches is not None:
            batches.attach(self.engine, self.store, gate=BatchLock(self.store, node_id))
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
        owned = sum(1 for eid in self.store.owned() if not is_gate(eid))
        return {
            "role": SHARED,
            "node_id": self.node_id,
            "term": None,
            "leader": None,
            "owned_executions": owned,
            "tasks_claimed": self.engine.tasks_claimed,
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
        try:
            lost.extend(self._reconcile())
            owns = self.store.owns
            dropped = self.engine.handoff.release(lost, unless=owns) if lost else 0
        except BaseException:
            # Tried again next round: the store has let them go already, and
            # forgotten here they would stay in memory for ever, a stale copy
            # answering reads and inbox entries (issue 40's shared campaign).
            with self._lost_lock:
                self._lost[:0] = lost
            raise
        if dropped:
            # (Most of `lost` ended here just now: nothing to drop.)
            self._log.warning("shared: lost executions to another server", executions=dropped)
        self._own_tables.sweep_step_rows()
        self._sync_sessions()
        if self.engine.reload_definitions():
            self._log.info("shared: loaded definitions deployed through another server")
        mark = self.store.schedules_mark()
        if mark != self._schedules:
            if self._schedules is not None:
                # Changed or fired through another server (the claims keep
                # every occurrence to one server).
                self.engine.schedules.refresh()
            self._schedules = mark
        # Claims a failed dispatch could not put back (the database was away).
        self.engine.desk.release_pending()
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
        missing = [e for e in rows if e not in held]
        if missing:
            # Owned here by the database but not by this store: a commit
            # that created them was taken, though its answer was lost (the
            # database went away during COMMIT). Left so, they would run
            # nowhere: this node is live, so nobody takes them over.
            found = self._own_tables.owners(missing)
            self.store.adopt(
                (e, root, epoch)
                for e, (node, epoch, root) in found.items()
                if node == self.node_id and epoch == rows[e]
            )
            held = self.store.owned()
        # Owned here by the database and this store, but not running in the
        # engine (a take-over whose rebuild failed, or the above): rebuilt.
        stranded = [e for e in rows if e in held and rows[e] == held[e][1]]
        stranded = [e for e in stranded if not self.engine.handoff.holds(e)]
        if stranded:
            self.engine.handoff.take_over(self.store.histories(stranded))
            self.engine.handoff.hold_gates(stranded)  # (the flow gates among them)
        gone = [eid for eid, (_root, epoch) in held.items() if rows.get(eid) != epoch]
        if gone:
            # Ended just now (the row went with the end) or lost: either way
            # nothing more is written for them here.
            self.store.disown(gone)
        return gone + self._strays(held, rows)

    def _strays(self, held: dict[str, tuple[str, int]], rows: dict[str, int]) -> list[str]:
        """Executions in the engine's memory that this node does not own: the
        store has them, and their ownership row names another node or is
        gone with their end. A group undone after the loss was noted reads
        them back from the store, and a round that failed after the store
        let them go never released them; such a copy falls behind the
        store, answers reads with a stale state and would apply inbox
        entries. The store's row is read before the ownership row, so an
        execution whose creation commits meanwhile is seen owned here."""
        candidates = [
            e for e in self.engine.handoff.executions() if e not in held and e not in rows
        ]
        if not candidates:
            return []
        stored = [e for e in candidates if self.store.execution_row(e) is not None]
        owners = self._own_tables.owners(stored)
        return [e for e in stored if owners.get(e, ("",))[0] != self.node_id]

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
                # Flow gates, once every execution of theirs is in memory.
                self.engine.handoff.hold_gates([m[0] for m in moved])
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
        # Contacts made elsewhere, then the attempts owned here that a
        # session polling elsewhere should stop: one command.
        seen = {r.session_id: r.last_seen_ms for r in rows}
        self._own_tables.post_cancels(self.engine.handoff.sync_sessions(seen, known))

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
                if logs.enabled(logging.DEBUG):
                    self._log.debug(
                        "shared: inbox entry applied",
                        seq=entry.seq,
                        kind=logs.Quoted(entry.kind),
                        execution_id=entry.execution_id,
                        reply=logs.Quoted(str(replies[-1][1])[:200]),
                    )
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
        if self._sweeper is not None:
            self._sweeper.detach()
        if self._batches is not None:
            self._batches.detach()
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
        self._slot_tables.close()
