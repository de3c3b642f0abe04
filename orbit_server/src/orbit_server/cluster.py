"""Standby mode (`--cluster`, chapter 44): one leader, standbys that take over.

Every server of a cluster runs this in its one worker process. `ClusterNode`
is the WSGI application gunicorn serves; it holds the current engine and the
Falcon app built around it, and a thread (`orbit-cluster`) that runs the
election every `interval_s`:

- A standby holds a read-only engine (`StandbyStore`: it loads no
  execution, and refuses every write), so it answers GET routes from the
  database (`StandbyEngine`: a wait reads it again every second, and the
  workflow routes read the definitions again on each request). What
  that engine keeps in memory follows the database's
  (`Election.mark`): it adds the definitions deployed since it last
  looked, and the schedules' mirror reads its rows again when a schedule
  changed or fired. The engine itself is never rebuilt for either: that
  would end the waits parked on it, and a schedule firing every second
  would rebuild it every second. It never fires a schedule (its claims are
  refused). Every other
  request is answered here, before Falcon and so before authentication, with
  503 NOT_LEADER naming the leader (`orbit_cluster`); with --grpc-addr,
  every gRPC call likewise (`not_leader`: UNAVAILABLE, `NOT_LEADER: ...`). Each round it tries
  for the leader lock (`orbit_store.cluster.Election`) and follows the
  recorded leader.
- Once elected, it opens a store fenced with the new term, builds a full
  engine on it (which recovers every running execution from history; the
  election session's idle timeout is suspended meanwhile), swaps it in and
  serves. Each round it checks its election session; it serves only while
  the last good check is younger than the lease (3 rounds). A failed check
  steps it down at once, in-process: it stops taking writes, installs a
  read-only engine, retires the old one, ends its election session (which
  frees the lock if it still held it) and runs for election again.

Correctness does not rest on this timing: the fenced store makes the
database refuse every write of a leader whose term has passed, so a server
paused past its lease that resumes and writes before its next check gets a
`fenced:` STORAGE_ERROR and changes nothing (the engine updates memory only
after a commit). `ORBIT_CLUSTER_INTERVAL_MS` (for tests; default 1000)
scales the round, the lease and the election session's idle timeout
(5 rounds, at least 2 s) together.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson

from orbit_core import events as ev
from orbit_core.api import ExecutionDoc, WorkflowList
from orbit_core.engine import DEFAULT_WAIT_MS, MAX_WAIT_MS, Engine
from orbit_core.engine.facade import EngineApi, Wrapped
from orbit_core.engine.handoff import Sharing
from orbit_core.errors import OrbitError, StorageError
from orbit_core.jsontypes import JsonObject
from orbit_core.ports import (
    BatchItem,
    BatchRow,
    BatchStore,
    CommitBatch,
    DefinitionRow,
    ExecutionRow,
    IdempotencyRow,
    PauseMark,
    RateRow,
    ScheduleAdvance,
    ScheduleRow,
    Store,
    WorkerRow,
)
from orbit_core.visibility.check import Filter
from orbit_core.visibility.page import SearchQuery
from orbit_server import logs
from orbit_server.batches import Batches
from orbit_server.config import Address, ServerConfig
from orbit_server.retention import Sweeper
from orbit_store.cluster import Election, Leadership, Mark
from orbit_store.postgres import PostgresStore

INTERVAL_ENV = "ORBIT_CLUSTER_INTERVAL_MS"
DEFAULT_INTERVAL_S = 1.0
LEASE_ROUNDS = 3
IDLE_TIMEOUT_ROUNDS = 5
# Short rounds (tests) must not turn a busy moment into a lost session.
MIN_IDLE_TIMEOUT_MS = 2000
# Methods a standby serves (from the database); every other one is refused.
READ_METHODS = frozenset({"GET", "HEAD"})
WAIT_REREAD_S = 1.0
CLAIM_PAUSE_S = 0.25
LEADER = "leader"
STANDBY = "standby"

App = Callable[[dict[str, Any], Any], Iterable[bytes]]


def node_id_default() -> str:
    """$HOSTNAME, then /etc/hostname, then the system's host name."""
    name = os.environ.get("HOSTNAME", "").strip()
    if not name:
        try:
            with open("/etc/hostname", encoding="utf-8") as f:
                name = f.read().strip()
        except OSError:
            name = ""
    return name or socket.gethostname()


def advertise_default(config: ServerConfig, bound: Address) -> str | None:
    """http(s)://<the bound address>, unless it is a wildcard address."""
    if config.advertise_addr is not None:
        return config.advertise_addr
    if bound.host in ("0.0.0.0", "::"):
        return None
    return f"{'https' if config.tls else 'http'}://{bound}"


def interval_s() -> float:
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw) / 1000
    return DEFAULT_INTERVAL_S


class NotLeader(OrbitError):
    """A write refused by a standby: 503 NOT_LEADER over HTTP, UNAVAILABLE
    with the same code over gRPC; `leader_addr` is the leader's advertised
    address, when it has one."""

    code = "NOT_LEADER"

    def __init__(self, message: str, leader_node: str | None, leader_addr: str | None) -> None:
        super().__init__(message)
        self.leader_node = leader_node
        self.leader_addr = leader_addr


class StandbyStore:
    """A standby engine's store: reads go to the database, nothing is
    loaded into memory, and every write is refused (the request gate stops
    clients first; this stops the engine's own threads)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def _refuse(self) -> StorageError:
        return StorageError("this server is a cluster standby and does not write")

    def load_definitions(self) -> list[DefinitionRow]:
        return self.inner.load_definitions()

    def load_active(self) -> list[tuple[str, list[ev.Event]]]:
        return []

    def commit(self, batch: CommitBatch) -> None:
        raise self._refuse()

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        return self.inner.history(execution_id, run)

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        return self.inner.execution_row(execution_id)

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        return self.inner.execution_hashes(execution_ids)

    def find_idempotency(self, key: str, now_ms: int) -> IdempotencyRow | None:
        return self.inner.find_idempotency(key, now_ms)

    def load_rates(self) -> list[RateRow]:
        return self.inner.load_rates()

    def list_executions(
        self, status: str | None, workflow: str | None, limit: int
    ) -> list[ExecutionRow]:
        return self.inner.list_executions(status, workflow, limit)

    def search_executions(self, query: SearchQuery) -> list[ExecutionRow]:
        return self.inner.search_executions(query)

    def pauses(self, execution_ids: list[str]) -> dict[str, PauseMark]:
        return self.inner.pauses(execution_ids)

    def list_workers(self) -> list[WorkerRow]:
        return self.inner.list_workers()

    def load_schedules(self) -> list[ScheduleRow]:
        return self.inner.load_schedules()

    def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        return self.inner.get_schedule(schedule_id)

    def insert_schedule(self, row: ScheduleRow) -> bool:
        raise self._refuse()

    def update_schedule(self, row: ScheduleRow) -> bool:
        raise self._refuse()

    def delete_schedule(self, schedule_id: str) -> bool:
        raise self._refuse()

    def claim_schedules(
        self, claims: list[tuple[str, int]], owner: str, until_ms: int, now_ms: int
    ) -> list[str]:
        # Only the leader fires schedules. The scheduler reads a refused
        # occurrence again and, while the leader has not advanced it (the
        # leader is gone), would ask again at once: pace it.
        time.sleep(CLAIM_PAUSE_S)
        return []

    def advance_schedules(self, advances: list[ScheduleAdvance], owner: str) -> list[str]:
        return []

    def record_schedule_trigger(self, schedule_id: str, execution_id: str, now_ms: int) -> bool:
        raise self._refuse()

    def record_schedule_skip(self, schedule_id: str, now_ms: int) -> bool:
        raise self._refuse()

    def release_schedule_claims(self) -> None:
        return None  # the claims are the leader's

    def write_problem(self) -> str | None:
        return None

    # Batch operations (orbit_server/batches.py): a standby shows them, the
    # leader runs them.

    def _batches(self) -> BatchStore:
        found: BatchStore = self.inner  # type: ignore[assignment]
        return found

    def prepare_batches(self) -> None:
        raise self._refuse()

    def has_batches(self) -> bool:
        return self._batches().has_batches()

    def insert_batch(self, row: BatchRow) -> None:
        raise self._refuse()

    def batch_targets(
        self,
        workflow: str | None,
        status: str | None,
        after: tuple[int, str] | None,
        limit: int,
        where: Filter | None = None,
    ) -> list[tuple[int, str]]:
        return self._batches().batch_targets(workflow, status, after, limit, where)

    def add_batch_items(
        self, batch_id: str, first: int, execution_ids: Sequence[str], now_ms: int
    ) -> bool:
        raise self._refuse()

    def set_batch(self, batch_id: str, *, state: str, total: int, now_ms: int) -> None:
        raise self._refuse()

    def batch(self, batch_id: str) -> BatchRow | None:
        return self._batches().batch(batch_id)

    def batches(self, limit: int) -> list[BatchRow]:
        return self._batches().batches(limit)

    def open_batches(self) -> list[BatchRow]:
        return self._batches().open_batches()

    def batch_items(
        self, batch_id: str, *, pending: bool, after: int, limit: int
    ) -> list[BatchItem]:
        return self._batches().batch_items(batch_id, pending=pending, after=after, limit=limit)

    def batch_outcomes(self, batch_id: str) -> dict[str, int]:
        return self._batches().batch_outcomes(batch_id)

    def claim_batch_items(self, batch_id: str, positions: Sequence[int], now_ms: int) -> None:
        raise self._refuse()

    def finish_batch_items(
        self, batch_id: str, items: Sequence[BatchItem], now_ms: int, done: bool
    ) -> None:
        raise self._refuse()

    def close(self) -> None:
        self.inner.close()


class StandbyEngine(Wrapped):
    """A standby's engine: an execution's wait cannot park on commits this
    server never makes, so it reads the database again every second; the
    workflow routes read the definitions again on each request (the
    leader may have registered one since the last election round)."""

    def list_workflows(self) -> WorkflowList:
        self.reload_definitions()
        return super().list_workflows()

    def get_workflow(self, name: str, version: str | None = None) -> JsonObject:
        self.reload_definitions()
        return super().get_workflow(name, version)

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._stop = threading.Event()

    def wait(self, execution_id: str, timeout_ms: int = DEFAULT_WAIT_MS) -> ExecutionDoc:
        deadline = time.monotonic() + min(max(timeout_ms, 0), MAX_WAIT_MS) / 1000
        while True:
            doc = self.get(execution_id)
            remaining = deadline - time.monotonic()
            if self.state(execution_id).terminal or remaining <= 0 or self.draining:
                return doc
            if self._stop.wait(min(WAIT_REREAD_S, remaining)):
                return doc

    def close(self) -> None:
        self._stop.set()
        super().close()


class ClusterNode:
    """One server of a standby-mode cluster: the WSGI app and the election
    loop (module docstring)."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        node_id: str,
        advertise_addr: str | None,
        build_engine: Callable[[Store, Sharing | None], Engine],
        make_app: Callable[[EngineApi, ClusterNode], App],
        interval: float | None = None,
        sweeper: Sweeper | None = None,
        batches: Batches | None = None,
    ) -> None:
        self.config = config
        # --retention: sweeps the leader's fenced store while it leads.
        self._sweeper = sweeper
        # Batch operations: run by the leader on its fenced store, read
        # from the database by a standby (a standby refuses their POST as
        # any write).
        self._batches = batches
        self.node_id = node_id
        self.advertise_addr = advertise_addr
        self.interval_s = interval if interval is not None else interval_s()
        self.lease_s = LEASE_ROUNDS * self.interval_s
        self._build_engine = build_engine
        self._make_app = make_app
        self._ca_cert = os.environ.get("ORBIT_DB_CA_CERT") or None
        self._log = logs.logger()
        self.role = STANDBY
        self.term: int | None = None
        self.leader: Leadership | None = None
        self._last_ok = float("-inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._draining = False
        self._mark: Mark | None = None
        self._stale = False
        self._unreachable: str | None = None
        # The election's own store: it only lends its URL and TLS rules.
        self._election_store = PostgresStore(config.db, ca_cert=self._ca_cert)
        self.election = Election(
            self._election_store,
            node_id,
            advertise_addr,
            idle_timeout_ms=max(
                MIN_IDLE_TIMEOUT_MS, round(IDLE_TIMEOUT_ROUNDS * self.interval_s * 1000)
            ),
        )
        self.engine: EngineApi = self._standby_engine()
        self._app = make_app(self.engine, self)

    # ---- what health and readiness show (resources/health.ClusterView)

    def fields(self) -> dict[str, object]:
        leader = self.leader
        return {
            "role": self.role,
            "node_id": self.node_id,
            "term": self.term,
            "leader": None
            if leader is None or leader.leader_node is None
            else {"node_id": leader.leader_node, "addr": leader.leader_addr},
        }

    def serving(self) -> bool:
        return self.role == LEADER and time.monotonic() - self._last_ok < self.lease_s

    # ---- WSGI

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        app = self._app
        if environ.get("REQUEST_METHOD") not in READ_METHODS and not self.serving():
            return self._not_leader(start_response)
        return app(environ, start_response)

    def not_leader(self) -> NotLeader:
        """The refusal of a write while this server does not lead, naming
        the leader it follows (HTTP and the gRPC binding)."""
        leader = self.leader
        node = leader.leader_node if leader is not None else None
        addr = leader.leader_addr if leader is not None else None
        if node is not None and node != self.node_id:
            where = f" at {addr}" if addr else " (it advertises no address)"
            return NotLeader(f"this server is a standby; the leader is `{node}`{where}", node, addr)
        return NotLeader("this server is a standby; no leader is serving now", None, None)

    def _not_leader(self, start_response: Any) -> list[bytes]:
        refusal = self.not_leader()
        addr = refusal.leader_addr
        body = orjson.dumps(
            {
                "error": {
                    "code": refusal.code,
                    "message": refusal.message,
                    "leader_node": refusal.leader_node,
                    "leader_addr": addr,
                }
            }
        )
        headers = [
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            ("retry-after", "1"),
        ]
        if addr:
            headers.append(("x-orbit-leader", addr))
        start_response("503 Service Unavailable", headers)
        return [body]

    # ---- the election loop

    def start(self) -> None:
        self._log.info(
            "cluster mode: standby until elected",
            node_id=self.node_id,
            advertise_addr=logs.Quoted(self.advertise_addr or ""),
        )
        self._thread = threading.Thread(target=self._loop, name="orbit-cluster", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        delay = 0.0
        while not self._stop.wait(delay):
            started = time.monotonic()
            try:
                self.round()
            except Exception as exc:  # the loop must outlive any one failure
                self._log.error("cluster: election round failed", error=str(exc))
            delay = max(0.0, self.interval_s - (time.monotonic() - started))

    def round(self) -> None:
        """One round of the election (the loop's body; tests call it directly)."""
        if self._draining:
            return
        if self.role == LEADER:
            assert self.term is not None
            reason = self.election.check(self.term)
            if reason is None:
                self._last_ok = time.monotonic()
            else:
                self.step_down(reason)
            return
        try:
            term = self.election.try_lead()
            if term is None:
                self._follow(self.election.leadership())
        except StorageError as exc:
            if exc.message != self._unreachable:
                self._log.warning("cluster: cannot take part in the election", error=exc.message)
            self._unreachable = exc.message
            return
        self._unreachable = None
        if term is not None:
            self._become_leader(term)

    def _follow(self, seen: Leadership) -> None:
        before = self.leader
        self.term, self.leader = seen.term, seen
        changed = before is None or (before.term, before.leader_node) != (
            seen.term,
            seen.leader_node,
        )
        if changed and seen.leader_node is not None:
            self._log.info(
                "cluster: standby; following the leader",
                term=seen.term,
                leader=logs.Quoted(seen.leader_node),
            )
        mark = self.election.mark()
        last = self._mark
        if self._stale:
            # No standby engine since a step-down the database was gone for.
            self._install_standby()
        else:
            # Also on the first round: something may have changed since the
            # engine was built.
            if last is None or mark.definitions != last.definitions:
                self.engine.reload_definitions()
            if last is None or mark.schedules != last.schedules:
                self.engine.schedules.refresh()
        self._mark = mark

    def _install_standby(self) -> None:
        """A new read-only engine in place of the current one; on failure
        (the database is gone), `_stale` makes the next round try again."""
        self._stale = True
        old, self.engine = self.engine, self._standby_engine()
        self._app = self._make_app(self.engine, self)
        self._stale = False
        _retire(old)

    def _standby_engine(self) -> EngineApi:
        store = StandbyStore(PostgresStore(self.config.db, ca_cert=self._ca_cert))
        engine = StandbyEngine(self._build_engine(store, None))
        if self._batches is not None:
            self._batches.attach(engine, store, runs=False)
        return engine

    def _become_leader(self, term: int) -> None:
        self._log.info(
            "cluster: elected leader; recovering executions from history",
            node_id=self.node_id,
            term=term,
        )
        self.term = term
        self.leader = Leadership(term, self.node_id, self.advertise_addr)
        started = time.monotonic()
        try:
            self.election.suspend_idle_timeout(True)
            store = PostgresStore(self.config.db, ca_cert=self._ca_cert, fence_term=term)
            engine = self._build_engine(store, None)
        except OrbitError as exc:
            self._log.error("cluster: could not take over; standing by", error=exc.message)
            self.election.close()  # frees the lock for another server
            return
        # If this fails, the next check finds the session gone and steps down.
        with contextlib.suppress(StorageError):
            self.election.suspend_idle_timeout(False)
        self._log.info(
            "recovered active executions from history",
            executions=engine.recovered_executions,
            in_flight=engine.recovered_in_flight,
        )
        old = self.engine
        self.engine = engine
        self._app = self._make_app(engine, self)
        self._last_ok = time.monotonic()
        self.role = LEADER
        _retire(old)
        if self._batches is not None:
            # The jobs the last leader left go on from the store.
            self._batches.attach(engine, store)
        if self._sweeper is not None:
            try:
                self._sweeper.attach(store)
            except OrbitError as exc:  # the leader serves; the next election retries
                self._log.warning("retention: cannot sweep", error=exc.message)
        self._log.info(
            "cluster: leader is serving",
            node_id=self.node_id,
            term=term,
            active_executions=engine.recovered_executions,
            recovery_ms=round((time.monotonic() - started) * 1000),
        )

    def step_down(self, reason: str) -> None:
        """Stops leading at once: writes are refused from here on."""
        self.role = STANDBY
        if self._sweeper is not None:
            self._sweeper.detach()
        if self._batches is not None:
            self._batches.hold()
        self._last_ok = float("-inf")
        self._log.error(
            "cluster: lost leadership; stepped down to standby",
            node_id=self.node_id,
            reason=reason,
        )
        self.election.close()
        try:
            self._install_standby()
        except OrbitError as exc:
            # Reads keep going to the old engine until a round rebuilds it.
            self._log.warning("cluster: no read-only engine yet", error=exc.message)

    # ---- shutdown

    def drain(self) -> None:
        """Shutting down: parked polls and waits end now, no more elections."""
        self._draining = True
        self.engine.drain()

    def close(self) -> None:
        """Stops the loop and the engine; ending the election session lets
        a standby take over at once."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self.role = STANDBY
        if self._sweeper is not None:
            self._sweeper.detach()
        if self._batches is not None:
            self._batches.detach()
        self.election.close()
        self.engine.close()
        self._election_store.close()


def _retire(engine: EngineApi) -> None:
    """Ends an engine that is no longer served, on a thread of its own
    (closing waits for its threads and its last commit)."""

    def run() -> None:
        engine.drain()
        engine.close()

    threading.Thread(target=run, name="orbit-retire", daemon=True).start()
