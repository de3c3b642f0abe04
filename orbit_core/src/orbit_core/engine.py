"""The `Engine` application service: the durable runtime as a library.

Every operation is a command. Commands are grouped: whichever caller finds no
group in progress becomes the leader, takes every pending command, applies
them to the in-memory states, runs the decider to a fixpoint, matches waiting
pollers with the tasks that became available, and commits everything in ONE
store transaction. Only then are callers answered, so no caller learns of an
event that is not durable. If the commit fails, the executions it touched are
rebuilt from the store and every writer of the group gets STORAGE_ERROR.
Reads run after the group's commit, so they only ever see committed state.

The HTTP server is a thin adapter over the public methods below, which return
JSON-shaped values (dicts ready to serialise) and raise `OrbitError`s.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import heapq
import inspect
import queue
import re
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
import orjson

from orbit_core import evaluate as _evaluate
from orbit_core import events as ev
from orbit_core import ir
from orbit_core import values as _values
from orbit_core.decide import Limits, decide, next_due_ms
from orbit_core.dispatch import QueuedTask, Session, TaskIndex
from orbit_core.errors import (
    ConflictError,
    InvalidError,
    LimitError,
    NotFoundError,
    OrbitError,
    StorageError,
    not_found,
    payload_too_large,
    unknown_session,
    workflow_not_found,
)
from orbit_core.memory_store import MemoryStore
from orbit_core.plan import Plan, child_id
from orbit_core.ports import (
    BuiltinTasks,
    Clock,
    CommitBatch,
    DefinitionRow,
    ExecutionChange,
    ExecutionRow,
    IdSource,
    Store,
    SystemClock,
    UuidIds,
    WorkerRow,
)
from orbit_core.semver import semver_key
from orbit_core.state import (
    CONTINUED_AS_NEW,
    DISPATCHED,
    SCHEDULED,
    ExecutionState,
    apply,
    fold,
    is_main_key,
)

RUNTIME_WORKER = "orbit-runtime"
DEFAULT_POLL_MS = 20_000
MAX_POLL_MS = 60_000
DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 300_000
TICK_MS = 100
DEFAULT_CANCEL_REASON = "requested via API"
ADAPTER_DISABLED = "the HTTP adapter is disabled; start the server with --enable-http-adapter"
RESTART_REASON = "runtime restarted and no worker reported the result"
BUILTIN_RESTART_REASON = "runtime restarted while the built-in task was running"
_EXECUTION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
_PENDING: Any = object()


def tune_process() -> None:
    """Configures CPython for a long-running engine process (the server and
    the benchmarks call it once at startup). It changes process-wide settings,
    which is why the engine does not do it by itself.

    - The cyclic garbage collector collects young objects less often. The
      engine keeps every active execution in memory as many small, long-lived
      objects, and with the default thresholds the collector rescans them ever
      more often as their number grows, so the cost of a step would grow with
      the number of executions in flight.
    - The interpreter switches threads every millisecond instead of every five.
      The committer thread gives up the GIL while the database writes; a
      shorter interval lets it take the GIL back sooner to answer the waiting
      callers, which shortens every group commit.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    sys.setswitchinterval(0.001)


class TaskError(Exception):
    """Raised by an in-process handler to fail its attempt with a code."""

    def __init__(
        self, code: str, message: str = "", retryable: bool = True, details: Any = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details


@attrs.define(slots=True, eq=False)
class _Live:
    state: ExecutionState
    plan: Plan
    limits: Limits
    top_level: bool
    finalized: bool = False
    due_at: int | None = None


class _Signal:
    """A one-shot wake-up, cheaper than `threading.Event` (no Condition): the
    group commit wakes one waiting caller per command."""

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False

    def set(self) -> None:
        if not self._set:
            self._set = True
            try:
                self._lock.release()
            except RuntimeError:  # a racing set() released it first
                return

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        if self._lock.acquire(timeout=-1 if timeout is None else timeout):
            self._lock.release()
        return self._set


class _Cmd:
    """One caller's request, run by whichever thread leads its group."""

    __slots__ = ("answered", "done", "error", "event", "fn", "parked", "read", "result", "session")

    def __init__(self, fn: Callable[[_Tx], Any], read: bool = False) -> None:
        self.fn = fn
        self.read = read
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.answered = False
        self.event: _Signal | None = None
        # Long polls and waits: "waiting" until claimed by a group or expired.
        self.parked: str | None = None
        self.session: Session | None = None


class _Tx:
    """What one group changes, committed as one transaction."""

    __slots__ = (
        "after_commit",
        "changes",
        "claimed",
        "definitions",
        "new_plans",
        "new_tasks",
        "now",
        "terminal",
        "workers",
    )

    def __init__(self, now: int) -> None:
        self.now = now
        self.changes: dict[str, ExecutionChange] = {}
        self.definitions: list[DefinitionRow] = []
        self.workers: list[WorkerRow] = []
        self.terminal: list[_Live] = []
        self.new_tasks = False
        self.claimed: list[_Cmd] = []
        self.new_plans: list[Plan] = []
        # Changes to sessions and timers that must not happen if the commit fails.
        self.after_commit: list[Callable[[], None]] = []


class _Group:
    """A prepared group: its changes, what to commit, and whom to answer.
    `parked` are its long polls and waits that found nothing yet: another
    group will complete them, after that group's own commit."""

    __slots__ = ("batch", "commit", "parked", "tx")

    def __init__(self, tx: _Tx, commit: CommitBatch, batch: list[_Cmd]) -> None:
        self.tx = tx
        self.commit = commit
        self.batch = batch
        self.parked = [cmd for cmd in batch if cmd.result is _PENDING]


_STOP_GROUP = _Group(_Tx(0), CommitBatch(), [])


class _TwoRuns(Exception):
    """Two runs of one execution ended within one commit window."""


def _merge(batches: list[CommitBatch]) -> CommitBatch:
    """One batch with the changes of several, in order."""
    if len(batches) == 1:
        return batches[0]
    merged = CommitBatch()
    changes: dict[str, ExecutionChange] = {}
    for batch in batches:
        merged.definitions.extend(batch.definitions)
        merged.workers.extend(batch.workers)
        for change in batch.executions:
            into = changes.get(change.execution_id)
            if into is None:
                changes[change.execution_id] = ExecutionChange(
                    change.execution_id,
                    change.row,
                    list(change.events),
                    change.archive_run,
                    list(change.archived),
                    change.new,
                )
                continue
            if change.archive_run is not None:
                if into.archive_run is not None:
                    raise _TwoRuns
                # A run ended: what came before joins the archived run.
                into.archived = into.events + change.archived
                into.archive_run = change.archive_run
                into.events = list(change.events)
            else:
                into.events.extend(change.events)
            into.row = change.row
    merged.executions = list(changes.values())
    return merged


@attrs.define(slots=True)
class _ChildLink:
    parent_id: str
    unit_key: str
    token: str


class Engine:
    """The ORBIT runtime engine. Thread-safe; see the module docstring."""

    def __init__(
        self,
        store: Store | None = None,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        *,
        limits: Limits | None = None,
        max_active_executions: int | None = None,
        session_timeout_ms: int = 30_000,
        builtins: BuiltinTasks | None = None,
        handler_threads: int = 4,
        auto_tick: bool = True,
        pipeline: bool | None = None,
    ) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.ids: IdSource = ids if ids is not None else UuidIds()
        self.limits = limits or Limits()
        self.max_active_executions = max_active_executions
        self.session_timeout_ms = session_timeout_ms
        self.builtins = builtins
        self._handler_threads = handler_threads

        self._mu = threading.Lock()
        # Held while memory is changed: by the group leader while it prepares
        # a group, and by the committer while it publishes or rolls back.
        self._state_lock = threading.RLock()
        self._commits: queue.SimpleQueue[_Group] = queue.SimpleQueue()
        self._committer: threading.Thread | None = None
        self._pending: list[_Cmd] = []
        self._leading = False
        self._closed = False

        self._plans: dict[tuple[str, str], Plan] = {}
        self._by_hash: dict[str, Plan] = {}
        self._live: dict[str, _Live] = {}
        self._active_top = 0
        self._tokens: dict[str, tuple[str, str, int]] = {}
        self._holders: dict[str, str] = {}
        self._index = TaskIndex()
        self._sessions: dict[str, Session] = {}
        self._pollers: deque[_Cmd] = deque()
        self._waiters: dict[str, list[_Cmd]] = {}
        self._due: list[tuple[int, str]] = []
        self._recovered_tokens: dict[str, int] = {}
        self._links: dict[str, _ChildLink] = {}
        self._children: dict[str, set[str]] = {}
        self._builtin_serial = 0
        self._child_starts: list[tuple[str, str, int]] = []
        self._handlers: dict[tuple[str, str], tuple[Callable[..., Any], bool]] = {}
        self._local_sessions: dict[str, Session] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.counters = {"started": 0, "continued_as_new": 0, "commits": 0, "events": 0}
        self.recovered_executions = 0
        self.recovered_in_flight = 0

        if pipeline if pipeline is not None else getattr(self.store, "durable", True):
            # Durable commits wait for the disk: the next group is prepared
            # while the previous one is being written.
            self._committer = threading.Thread(
                target=self._commit_loop, name="orbit-commit", daemon=True
            )
            self._committer.start()
        self._recover()
        subscribe = getattr(self.clock, "subscribe", None)
        if subscribe is not None:
            subscribe(self._on_clock_advance)
        elif auto_tick:
            self._spawn(self._ticker, "orbit-tick")

    # ================================================================ public API

    # ---- definitions

    def deploy(self, definition: ir.Definition | dict[str, Any]) -> dict[str, Any]:
        """Registers a definition (a `Definition` or its IR JSON document)."""
        if isinstance(definition, dict):
            document = definition
            try:
                defn = ir.from_json(document)
            except ir.IRError as exc:
                raise InvalidError(str(exc), "INVALID_IR") from None
        else:
            defn = definition
            document = ir.to_json(defn)
        if not defn.definition_hash:
            raise InvalidError("definition_hash is missing", "INVALID_IR")
        if ir.hash_document(document) != defn.definition_hash:
            raise InvalidError(
                "definition_hash does not match the IR content (was the file modified?)",
                "INVALID_IR",
            )
        if defn.ir_version == ir.IR_V1 and ir.needs_ir_v2(defn):
            raise InvalidError(
                f"{defn.key} uses features of orbit-ir/2 but declares orbit-ir/1", "INVALID_IR"
            )
        result: dict[str, Any] = self._submit(lambda tx: self._deploy(tx, defn, document))
        return result

    def list_workflows(self) -> dict[str, Any]:
        rows = []
        for plan in sorted(
            self._plans.values(), key=lambda p: (p.defn.name, semver_key(p.defn.version))
        ):
            d = plan.defn
            rows.append(
                {
                    "name": d.name,
                    "version": d.version,
                    "description": d.description,
                    "definition_hash": d.definition_hash,
                    "steps": [s.name for s in d.steps],
                    "tasks": plan.tasks(),
                }
            )
        return {"workflows": rows}

    def get_workflow(self, name: str, version: str | None = None) -> dict[str, Any]:
        """The IR document of `name@version`, or of the highest version."""
        return ir.to_json(self._find_plan(name, version).defn)

    def definition(self, name: str, version: str | None = None) -> ir.Definition:
        return self._find_plan(name, version).defn

    # ---- executions

    def start(
        self,
        workflow: str,
        version: str | None = None,
        input: Any = None,
        execution_id: str | None = None,
        *,
        schedule_id: str | None = None,
    ) -> dict[str, Any]:
        """Starts an execution: `{"execution_id", "created"}` (RULINGS §18's check order)."""
        result: dict[str, Any] = self._submit(
            lambda tx: self._start(
                tx,
                workflow=workflow,
                version=version,
                input=input,
                execution_id=execution_id,
                schedule_id=schedule_id,
            )
        )
        return result

    def get(self, execution_id: str) -> dict[str, Any]:
        """The execution state document (`GET /v1/executions/{id}`)."""
        result: dict[str, Any] = self._submit(
            lambda tx: self._state_of(execution_id).to_json(), read=True
        )
        return result

    def state(self, execution_id: str) -> ExecutionState:
        """The execution's state object (a copy for finished executions)."""
        result: ExecutionState = self._submit(lambda tx: self._state_of(execution_id), read=True)
        return result

    def history(self, execution_id: str, run: int | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self._submit(
            lambda tx: self._history(execution_id, run), read=True
        )
        return result

    def events(self, execution_id: str, run: int | None = None) -> list[ev.Event]:
        result: list[ev.Event] = self._submit(lambda tx: self._events(execution_id, run), read=True)
        return result

    def list_executions(
        self, status: str | None = None, workflow: str | None = None, limit: int = 50
    ) -> dict[str, Any]:
        limit = min(max(limit, 1), 1000)
        rows = self._submit(
            lambda tx: self.store.list_executions(
                status.upper() if status else None, workflow, limit
            ),
            read=True,
        )
        return {"executions": [r.to_json() for r in rows]}

    def wait(self, execution_id: str, timeout_ms: int = DEFAULT_WAIT_MS) -> dict[str, Any]:
        """Blocks until the execution is terminal (not continued-as-new) or the
        timeout passes, then returns its state document."""
        timeout_ms = min(max(timeout_ms, 0), MAX_WAIT_MS)
        cmd = _Cmd(lambda tx: self._park_wait(execution_id, cmd_ref[0]))
        cmd_ref = [cmd]
        result = self._run(cmd)
        if cmd.parked is None:
            return dict(result)
        finished = self._await_parked(cmd, timeout_ms)
        if finished:
            return dict(cmd.result)
        return self.get(execution_id)

    def cancel(self, execution_id: str, reason: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self._submit(
            lambda tx: self._cancel(tx, execution_id, reason or DEFAULT_CANCEL_REASON)
        )
        return result

    def signal(self, execution_id: str, name: str, payload: Any = None) -> dict[str, Any]:
        """Records a signal: `{"execution_id", "signal", "accepted", "seq"}`."""
        result: dict[str, Any] = self._submit(
            lambda tx: self._signal(tx, execution_id, name, payload)
        )
        return result

    def query(self, execution_id: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._submit(lambda tx: self._query(execution_id, name), read=True)
        return result

    # ---- workers

    def register_worker(
        self,
        worker_id: str,
        runtime: str,
        contracts: list[dict[str, str]] | list[tuple[str, str]],
        sdk: str | None = None,
    ) -> dict[str, Any]:
        pairs = [
            (c["task_name"], c["contract_version"]) if isinstance(c, dict) else (c[0], c[1])
            for c in contracts
        ]
        result: dict[str, Any] = self._submit(
            lambda tx: self._register(tx, worker_id, runtime, pairs, sdk)
        )
        return result

    def poll(self, session_id: str, wait_ms: int | None = None) -> dict[str, Any] | None:
        """A task assignment, or None when nothing arrived within `wait_ms`."""
        wait = DEFAULT_POLL_MS if wait_ms is None or wait_ms < 0 else min(wait_ms, MAX_POLL_MS)
        cmd = _Cmd(lambda tx: self._poll(tx, session_id, cmd_ref[0], wait > 0))
        cmd_ref = [cmd]
        result = self._run(cmd)
        if cmd.parked is None:
            return dict(result) if result is not None else None
        if self._await_parked(cmd, wait):
            return dict(cmd.result)
        return None

    def heartbeat(self, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._submit(lambda tx: self._heartbeat(tx, session_id))
        return result

    def unregister(self, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._submit(lambda tx: self._unregister(tx, session_id))
        return result

    def complete(self, token: str, output: Any = None) -> dict[str, Any]:
        """Reports a success: `{"accepted": bool, "reason"?}`."""
        if not token:
            raise InvalidError("token is required", "INVALID_REQUEST")
        result: dict[str, Any] = self._submit(lambda tx: self._complete(tx, token, output))
        return result

    def fail(
        self,
        token: str,
        error_code: str,
        error_message: str = "",
        retryable: bool = True,
        details: Any = None,
    ) -> dict[str, Any]:
        if not token:
            raise InvalidError("token is required", "INVALID_REQUEST")
        if not error_code:
            raise InvalidError("error_code is required", "INVALID_REQUEST")
        error = ev.make_error(error_code, error_message, retryable, details)
        result: dict[str, Any] = self._submit(lambda tx: self._fail(tx, token, error))
        return result

    def list_workers(self) -> dict[str, Any]:
        rows = self._submit(lambda tx: self.store.list_workers(), read=True)
        now = self.clock.now_ms()
        out = []
        for row in rows:
            live = [
                s for s in self._sessions.values() if s.worker_id == row.worker_id and not s.lost
            ]
            last_seen = max([row.last_seen_ms] + [s.last_seen_ms for s in live])
            inflight = sum(1 for s in live for t in s.held if self._is_current(t))
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

    # ---- in-process handlers

    def register_handler(
        self,
        task_name: str,
        version: str,
        fn: Callable[..., Any],
        runtime: str = "python",
    ) -> None:
        """Serves `task_name@version` with `fn(input)` (or `fn(input, task)`),
        run on the engine's handler threads through the normal dispatch path."""
        takes_task = len(inspect.signature(fn).parameters) >= 2
        self._handlers[(task_name, version)] = (fn, takes_task)
        runtime = runtime.lower()
        session = self._local_sessions.get(runtime)
        contracts = sorted(k for k in self._handlers)
        if session is None:
            reply = self.register_worker(f"in-process-{runtime}", runtime, contracts)
            session = self._sessions[reply["worker_session_id"]]
            session.local = True
            self._local_sessions[runtime] = session
            if self._handler_threads > 0 and not self._threads_started():
                for i in range(self._handler_threads):
                    self._spawn(self._handler_loop, f"orbit-handler-{i}")
        else:
            session.contracts = tuple(contracts)
        self._submit(self._match_pollers)

    def run_handlers(self) -> int:
        """Runs queued in-process tasks on the calling thread until none is
        left (for `handler_threads=0`, e.g. under a simulated clock)."""
        ran = 0
        progress = True
        while progress:
            progress = False
            for session in list(self._local_sessions.values()):
                task = self.poll(session.session_id, 0)
                if task is not None:
                    self._run_handler(task)
                    ran += 1
                    progress = True
        return ran

    # ---- time, health, lifecycle

    def tick(self) -> None:
        """The periodic work of chapter 39 (every 100 ms, or on `advance`)."""
        self._submit(self._tick)

    def next_due_ms(self) -> int | None:
        """When the next timer, retry or timeout falls due (for time skipping)."""
        with self._mu:
            due = [t for t, eid in list(self._due) if eid in self._live]
        candidates = [min(due)] if due else []
        if self._recovered_tokens:
            candidates.append(min(self._recovered_tokens.values()))
        return min(candidates) if candidates else None

    def health(self) -> dict[str, Any]:
        return {
            "active_executions": len(self._live),
            "worker_sessions": len(self._sessions),
            **self.counters,
        }

    def recovery_log(self) -> str:
        return (
            "recovered active executions from history "
            f"executions={self.recovered_executions} in_flight={self.recovered_in_flight}"
        )

    def close(self) -> None:
        self._closed = True
        self._stop.set()
        with self._mu:
            parked = list(self._pollers)
            self._pollers.clear()
        for cmd in parked:
            self._expire(cmd)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)
        if self._committer is not None:
            self._commits.put(_STOP_GROUP)
            self._committer.join(timeout=30)
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ================================================================ group commit

    def _submit(self, fn: Callable[[_Tx], Any], read: bool = False) -> Any:
        return self._run(_Cmd(fn, read=read))

    def _run(self, cmd: _Cmd) -> Any:
        if self._closed:
            raise StorageError("the engine is closed")
        with self._mu:
            self._pending.append(cmd)
            lead = not self._leading
            if lead:
                self._leading = True
            if not lead or self._committer is not None:
                cmd.event = _Signal()
        if lead:
            self._lead()
        while not cmd.answered:
            assert cmd.event is not None
            cmd.event.wait()
        if cmd.error is not None:
            raise cmd.error
        return cmd.result

    def _lead(self) -> None:
        while True:
            with self._mu:
                batch = self._pending
                self._pending = []
                if not batch:
                    self._leading = False
                    return
            try:
                with self._state_lock:
                    group = self._prepare(batch)
                if self._committer is None:
                    self._settle_group(group)
                else:
                    self._commits.put(group)
            except BaseException as exc:  # never leave callers hanging
                for cmd in batch:
                    if not cmd.done:
                        cmd.error = exc
                        self._finish(cmd)
                raise

    def _prepare(self, batch: list[_Cmd]) -> _Group:
        """Applies a group's commands to memory and decides; nothing is
        answered yet. Reads see the group's own writes, and are answered only
        once those are durable."""
        tx = _Tx(self.clock.now_ms())
        for cmd in batch:
            if not cmd.read:
                try:
                    cmd.result = cmd.fn(tx)
                except OrbitError as exc:
                    cmd.error = exc
        if tx.new_tasks and self._pollers:
            self._match_pollers(tx)
        for cmd in batch:
            if cmd.read:
                try:
                    cmd.result = cmd.fn(tx)
                except OrbitError as exc:
                    cmd.error = exc
        return _Group(tx, self._batch(tx), batch)

    def _settle_group(self, group: _Group) -> None:
        self._settle_groups([group])

    def _settle_groups(self, groups: list[_Group]) -> bool:
        """Commits prepared groups in one transaction, then publishes their
        effects and answers their callers, in order."""
        try:
            commit = _merge([g.commit for g in groups])
        except _TwoRuns:
            # A run ended twice in this window: one transaction per group.
            for i, group in enumerate(groups):
                if not self._settle_groups([group]):
                    self._fail_groups(groups[i + 1 :], StorageError("an earlier commit failed"))
                    return False
            return True
        if commit:
            try:
                self.store.commit(commit)
            except Exception as exc:
                self._fail_groups(groups, StorageError(str(exc)))
                return False
            self.counters["commits"] += 1
        for group in groups:
            if group.tx.after_commit or group.tx.terminal:
                with self._state_lock:
                    self._publish(group.tx)
            for cmd in group.batch:
                if group.parked and cmd in group.parked:
                    self._answer(cmd)
                else:
                    self._finish(cmd)
            for cmd in group.tx.claimed:
                self._finish(cmd)
        return True

    def _fail_groups(self, groups: list[_Group], error: StorageError) -> None:
        """Undoes failed groups in memory (rebuilding what they touched from the
        store) and answers their callers with the storage error."""
        with self._state_lock:
            if self._committer is not None:
                # Later groups were prepared on top of the failed one.
                while True:
                    try:
                        groups.append(self._commits.get_nowait())
                    except queue.Empty:
                        break
            for group in groups:
                self._rollback(group.tx)
        for group in groups:
            for cmd in [*group.batch, *group.tx.claimed]:
                with self._mu:
                    cmd.parked = None if cmd.parked is None else "expired"
                cmd.error, cmd.result = error, None
                self._finish(cmd)

    def _commit_loop(self) -> None:
        while True:
            groups = [self._commits.get()]
            while True:  # everything prepared meanwhile joins this commit
                try:
                    groups.append(self._commits.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP_GROUP in groups
            groups = [g for g in groups if g is not _STOP_GROUP]
            if groups:
                self._settle_groups(groups)
            if stop:
                return

    def _finish(self, cmd: _Cmd) -> None:
        cmd.done = True
        cmd.answered = True
        if cmd.event is not None:
            cmd.event.set()

    def _answer(self, cmd: _Cmd) -> None:
        """Hands a parked command back to its caller, who then waits on it."""
        with self._mu:
            cmd.answered = True
            event = cmd.event
            if cmd.parked == "waiting":
                cmd.event = _Signal()
        if event is not None:
            event.set()

    def _batch(self, tx: _Tx) -> CommitBatch:
        for change in tx.changes.values():
            live = self._live.get(change.execution_id)
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
        return CommitBatch(tx.definitions, list(tx.changes.values()), tx.workers)

    def _rollback(self, tx: _Tx) -> None:
        for plan in tx.new_plans:
            self._plans.pop((plan.defn.name, plan.defn.version), None)
            self._by_hash.pop(plan.defn.definition_hash, None)
        for eid, change in tx.changes.items():
            live = self._live.pop(eid, None)
            if live is not None and live.top_level and not live.state.terminal:
                self._active_top -= 1
            for token in [t for t, ref in self._tokens.items() if ref[0] == eid]:
                del self._tokens[token]
            if change.new:
                continue
            events = self.store.history(eid)
            if events:
                self._adopt(fold(events, eid))

    def _publish(self, tx: _Tx) -> None:
        for action in tx.after_commit:
            action()
        if not tx.terminal:
            return
        for live in tx.terminal:
            eid = live.state.id
            if self._live.get(eid) is live:
                del self._live[eid]
                if live.top_level:
                    self._active_top -= 1
            for unit in live.state.units.values():
                for token, _attempt in unit.tokens or ():
                    self._tokens.pop(token, None)
                    self._holders.pop(token, None)
            self._children.pop(eid, None)
            waiters = self._waiters.pop(eid, None)
            if waiters:
                doc = live.state.to_json()
                for cmd in waiters:
                    if self._claim(cmd):
                        cmd.result = doc
                        self._finish(cmd)

    # ---- parking (long polls and waits)

    def _claim(self, cmd: _Cmd) -> bool:
        with self._mu:
            if cmd.parked != "waiting":
                return False
            cmd.parked = "claimed"
            return True

    def _expire(self, cmd: _Cmd) -> bool:
        """Gives up on a parked command; True unless a group already claimed it."""
        with self._mu:
            if cmd.parked == "waiting":
                cmd.parked = "expired"
            expired = cmd.parked == "expired"
            event = cmd.event
        if expired and event is not None:
            event.set()
        return expired

    def _await_parked(self, cmd: _Cmd, timeout_ms: int) -> bool:
        """Waits for a parked command; True when it got a result."""
        with self._mu:
            event = cmd.event
        if event is not None and not cmd.done:
            event.wait(timeout_ms / 1000.0)
        if self._expire(cmd) and not cmd.done:
            return False
        while not cmd.done:
            with self._mu:
                event = cmd.event
            if event is not None:
                event.wait(0.005)
        if cmd.error is not None:
            raise cmd.error
        return cmd.result is not None

    def _match_pollers(self, tx: _Tx) -> None:
        if not self._pollers:
            return
        still: deque[_Cmd] = deque()
        while self._pollers:
            cmd = self._pollers.popleft()
            if cmd.parked != "waiting" or cmd.session is None:
                continue
            if cmd.session.session_id not in self._sessions:
                continue
            task = self._next_task(cmd.session)
            if task is None:
                still.append(cmd)
                continue
            if not self._claim(cmd):
                continue
            cmd.result = self._dispatch(tx, cmd.session, task)
            tx.claimed.append(cmd)
        self._pollers = still

    # ================================================================ commands

    def _deploy(self, tx: _Tx, defn: ir.Definition, document: dict[str, Any]) -> dict[str, Any]:
        key = (defn.name, defn.version)
        existing = self._plans.get(key)
        answer = {
            "name": defn.name,
            "version": defn.version,
            "definition_hash": defn.definition_hash,
        }
        if existing is not None:
            if existing.defn.definition_hash == defn.definition_hash:
                return {**answer, "created": False}
            raise ConflictError(
                f"{defn.key} is already registered with a different definition "
                f"({existing.defn.definition_hash}); workflow definitions are immutable, "
                "bump the version",
                "DEFINITION_CONFLICT",
            )
        for contract in defn.contracts.values():
            if isinstance(contract, ir.ChildContract):
                child = self._by_hash.get(contract.definition_hash)
                if child is None or child.defn.name != contract.name:
                    raise InvalidError(
                        f"child workflow {contract.name}@{contract.version} "
                        f"({contract.definition_hash}) is not registered; register it first",
                        "CHILD_NOT_REGISTERED",
                    )
        plan = Plan(defn)
        self._add_plan(plan)
        tx.new_plans.append(plan)
        tx.definitions.append(
            DefinitionRow(defn.name, defn.version, defn.definition_hash, dict(document), tx.now)
        )
        return {**answer, "created": True}

    def _add_plan(self, plan: Plan) -> None:
        self._plans[(plan.defn.name, plan.defn.version)] = plan
        self._by_hash[plan.defn.definition_hash] = plan

    def _find_plan(self, name: str, version: str | None) -> Plan:
        if version is not None:
            plan = self._plans.get((name, version))
            if plan is None:
                raise workflow_not_found(name, version)
            return plan
        versions = [p for (n, _v), p in self._plans.items() if n == name]
        if not versions:
            raise workflow_not_found(name, None)
        return max(versions, key=lambda p: semver_key(p.defn.version))

    def _start(
        self,
        tx: _Tx,
        *,
        workflow: str,
        version: str | None,
        input: Any,
        execution_id: str | None,
        schedule_id: str | None,
    ) -> dict[str, Any]:
        if execution_id is not None and not _EXECUTION_ID.match(execution_id):
            raise InvalidError(
                "execution_id must be 1 to 200 letters, digits, `-`, `_`, `.` or `:`",
                "INVALID_EXECUTION_ID",
            )
        plan = self._find_plan(workflow, version)
        if execution_id is None:
            execution_id = self.ids.execution_id()
        else:
            existing_hash = self._existing_hash(execution_id)
            if existing_hash is not None:
                if existing_hash == plan.defn.definition_hash:
                    return {"execution_id": execution_id, "created": False}
                raise ConflictError(
                    f"execution `{execution_id}` already exists for a different workflow",
                    "EXECUTION_EXISTS",
                )
        limits = self.limits.effective(plan)
        raw = {} if input is None else input
        try:
            value = _values.conform(raw, plan.defn.input, strict=True)
            error = None
        except _values.ValidationError as exc:
            value, error = raw, exc
        if limits.max_payload_bytes is not None:
            size = len(orjson.dumps(value))
            if size > limits.max_payload_bytes:
                raise payload_too_large("execution input", size, limits.max_payload_bytes)
        if error is not None:
            raise InvalidError(f"workflow input is invalid at {error}", "INVALID_INPUT")
        if (
            self.max_active_executions is not None
            and self._active_top >= self.max_active_executions
        ):
            raise LimitError(
                f"{self._active_top} executions are already running (--max-active-executions)",
                "RESOURCE_EXHAUSTED",
            )
        live = self._create(tx, execution_id, plan, value, parent=None, schedule_id=schedule_id)
        self.counters["started"] += 1
        self._decide(tx, live)
        return {"execution_id": execution_id, "created": True}

    def _existing_hash(self, execution_id: str) -> str | None:
        live = self._live.get(execution_id)
        if live is not None:
            return live.state.definition_hash
        row = self.store.execution_row(execution_id)
        return row.definition_hash if row is not None else None

    def _create(
        self,
        tx: _Tx,
        execution_id: str,
        plan: Plan,
        value: Any,
        *,
        parent: dict[str, str] | None,
        schedule_id: str | None,
    ) -> _Live:
        d = plan.defn
        state = ExecutionState(execution_id)
        live = _Live(state, plan, self.limits.effective(plan), parent is None)
        self._live[execution_id] = live
        if live.top_level:
            self._active_top += 1
        tx.changes[execution_id] = ExecutionChange(execution_id, _NO_ROW, new=True)
        self._append(
            tx,
            live,
            ev.WorkflowCreated(
                1, tx.now, d.name, d.version, d.definition_hash, value, parent, schedule_id
            ),
        )
        self._append(tx, live, ev.WorkflowStarted(2, tx.now))
        return live

    def _live_or_raise(self, execution_id: str) -> _Live:
        live = self._live.get(execution_id)
        if live is None:
            row = self.store.execution_row(execution_id)
            if row is None:
                raise not_found(execution_id)
            raise ConflictError(f"execution is already {row.status}", "EXECUTION_FINISHED")
        if live.state.terminal:
            raise ConflictError(f"execution is already {live.state.status}", "EXECUTION_FINISHED")
        return live

    def _cancel(self, tx: _Tx, execution_id: str, reason: str) -> dict[str, Any]:
        live = self._live_or_raise(execution_id)
        if live.state.abort is None:
            self._append(tx, live, ev.CancelRequested(live.state.last_seq + 1, tx.now, reason))
            self._decide(tx, live)
        return live.state.to_json()

    def _signal(self, tx: _Tx, execution_id: str, name: str, payload: Any) -> dict[str, Any]:
        live = self._live_or_raise(execution_id)
        defn = live.plan.defn
        declared = defn.signal(name)
        if declared is None:
            names = ", ".join(s.name for s in defn.signals)
            detail = f"declared: {names}" if names else ""
            message = (
                f"{defn.key} has no signal `{name}`; {detail}"
                if names
                else f"{defn.key} declares no signals"
            )
            raise NotFoundError(message, "UNKNOWN_SIGNAL")
        payload = {} if payload is None else payload
        limit = live.limits.max_payload_bytes
        if limit is not None:
            size = len(orjson.dumps(payload))
            if size > limit:
                raise payload_too_large("signal payload", size, limit)
        try:
            value = _values.conform(payload, declared.payload)
        except _values.ValidationError as exc:
            raise InvalidError(
                f"payload for signal `{name}` is invalid at {exc}", "SIGNAL_PAYLOAD_INVALID"
            ) from None
        seq = live.state.last_seq + 1
        self._append(tx, live, ev.SignalReceived(seq, tx.now, name, value))
        self._decide(tx, live)
        return {"execution_id": execution_id, "signal": name, "accepted": True, "seq": seq}

    def _register(
        self,
        tx: _Tx,
        worker_id: str,
        runtime: str,
        contracts: list[tuple[str, str]],
        sdk: str | None,
    ) -> dict[str, Any]:
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
            used = sorted(
                {
                    c.version
                    for p in self._plans.values()
                    for key, c in p.defn.contracts.items()
                    if key == task
                }
            )
            if used and version not in used:
                warnings.append(
                    f"`{task}` is announced at version {version} but registered workflows "
                    f"use {', '.join(used)}; this worker will not receive those tasks"
                )
        session = Session(
            self.ids.session_id(),
            worker_id,
            runtime.lower(),
            tuple(contracts),
            sdk,
            tx.now,
            tx.now,
        )
        self._sessions[session.session_id] = session
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

    def _session(self, tx: _Tx, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise unknown_session()
        session.last_seen_ms = max(session.last_seen_ms, tx.now)
        session.lost = False
        return session

    def _poll(self, tx: _Tx, session_id: str, cmd: _Cmd, may_wait: bool) -> Any:
        session = self._session(tx, session_id)
        task = self._next_task(session)
        if task is not None:
            return self._dispatch(tx, session, task)
        if not may_wait:
            return None
        cmd.session = session
        with self._mu:
            cmd.parked = "waiting"
            if cmd.event is None:
                cmd.event = _Signal()
        pollers = self._pollers
        while pollers and pollers[0].parked != "waiting":
            pollers.popleft()  # polls that timed out while nothing was queued
        pollers.append(cmd)
        return _PENDING

    def _next_task(self, session: Session) -> QueuedTask | None:
        return self._index.pop(session.contracts, session.runtime, self._valid_task)

    def _valid_task(self, task: QueuedTask) -> bool:
        live = self._live.get(task.execution_id)
        if live is None or live.state.terminal:
            return False
        unit = live.state.units.get(task.unit_key)
        return unit is not None and unit.status == SCHEDULED and unit.offer_seq == task.offer_seq

    def _dispatch(self, tx: _Tx, session: Session, task: QueuedTask) -> dict[str, Any]:
        live = self._live[task.execution_id]
        state = live.state
        unit = state.units[task.unit_key]
        spec = live.plan.spec(task.unit_key)
        assert spec is not None
        token = self.ids.token()
        timeout = spec.timeout_ms
        deadline = None if timeout is None else tx.now + timeout
        self._append(
            tx,
            live,
            ev.StepDispatched(
                state.last_seq + 1,
                tx.now,
                unit.key,
                unit.attempt,
                token,
                session.worker_id,
                session.session_id,
                deadline,
            ),
        )
        self._tokens[token] = (state.id, unit.key, unit.attempt)
        self._holders[token] = session.session_id
        session.held.add(token)
        if live.plan.timed:
            self._push_due(live)
        assignment = {
            "token": token,
            "execution_id": state.id,
            "workflow": state.workflow,
            "workflow_version": state.version,
            "step_id": unit.key,
            "task_name": spec.task,
            "contract_version": spec.contract_version,
            "input": unit.input,
            "idempotency_key": unit.idempotency_key,
            "attempt": unit.attempt,
            "redelivery": unit.redelivery,
        }
        if deadline is not None:
            assignment["deadline_ms"] = deadline
            assignment["timeout_ms"] = timeout
        return assignment

    def _heartbeat(self, tx: _Tx, session_id: str) -> dict[str, Any]:
        session = self._session(tx, session_id)
        cancel = []
        for token in list(session.held):
            if token in session.cancel_sent:
                if token not in self._tokens:
                    session.held.discard(token)
                continue
            if not self._still_wanted(token):
                cancel.append(token)
                session.cancel_sent.add(token)
                if not self._is_current(token):
                    session.held.discard(token)
        return {"accepted": True, "cancel": cancel}

    def _still_wanted(self, token: str) -> bool:
        ref = self._tokens.get(token)
        if ref is None:
            return False
        live = self._live.get(ref[0])
        if live is None or live.state.terminal:
            return False
        unit = live.state.units.get(ref[1])
        if unit is None or unit.status != DISPATCHED or unit.token != token:
            return False
        return not (live.state.abort is not None and _aborts_with_execution(unit.key))

    def _is_current(self, token: str) -> bool:
        ref = self._tokens.get(token)
        if ref is None:
            return False
        live = self._live.get(ref[0])
        if live is None:
            return False
        unit = live.state.units.get(ref[1])
        return unit is not None and unit.status == DISPATCHED and unit.token == token

    def _unregister(self, tx: _Tx, session_id: str) -> dict[str, Any]:
        session = self._sessions.get(session_id)
        if session is None:
            raise NotFoundError("unknown worker session", "UNKNOWN_SESSION")
        self._lose(tx, session, "worker unregistered")
        tx.after_commit.append(functools.partial(_discard, self._sessions, session_id))
        return {"accepted": True}

    def _lose(self, tx: _Tx, session: Session, reason: str) -> None:
        """Marks the attempts a session holds as uncertain; they are redelivered."""
        for token in sorted(session.held):
            self._make_uncertain(tx, token, reason)

        def forget() -> None:
            session.held.clear()
            session.lost = True

        tx.after_commit.append(forget)

    def _make_uncertain(self, tx: _Tx, token: str, reason: str) -> None:
        if not self._is_current(token):
            return
        eid, key, attempt = self._tokens[token]
        live = self._live[eid]
        self._append(
            tx, live, ev.StepAttemptUncertain(live.state.last_seq + 1, tx.now, key, attempt, reason)
        )
        self._decide(tx, live)

    def _resolve_token(self, tx: _Tx, token: str) -> tuple[_Live, str, int] | dict[str, Any]:
        ref = self._tokens.get(token)
        live = self._live.get(ref[0]) if ref is not None else None
        if ref is None or live is None or live.state.terminal:
            return {
                "accepted": False,
                "reason": "unknown token (execution finished or token invalid)",
            }
        holder = self._sessions.get(self._holders.get(token, ""))
        if holder is not None:
            holder.last_seen_ms = max(holder.last_seen_ms, tx.now)

            def settle(session: Session = holder) -> None:
                session.held.discard(token)
                self._holders.pop(token, None)

            tx.after_commit.append(settle)
        return live, ref[1], ref[2]

    def _complete(self, tx: _Tx, token: str, output: Any) -> dict[str, Any]:
        resolved = self._resolve_token(tx, token)
        if isinstance(resolved, dict):
            return resolved
        live, key, attempt = resolved
        state = live.state
        unit = state.units[key]
        if unit.done:
            self._stale(tx, live, key, token, "duplicate")
            return {"accepted": False, "reason": "duplicate result; step already resolved"}
        output = {} if output is None else output
        limit = live.limits.max_payload_bytes
        if limit is not None:
            size = len(orjson.dumps(output))
            if size > limit:
                raise payload_too_large("task result", size, limit)
        spec = live.plan.spec(key)
        contract = live.plan.contract(spec.task or "") if spec is not None else None
        if contract is not None:
            try:
                output = _values.conform(output, contract.output)
            except _values.ValidationError as exc:
                error = ev.make_error(
                    "OUTPUT_CONTRACT_VIOLATION",
                    f"worker output for `{spec.task if spec else ''}` does not match its "
                    f"contract at {exc}",
                    False,
                )
                if unit.status == DISPATCHED and unit.token == token:
                    self._append(
                        tx,
                        live,
                        ev.StepAttemptFailed(state.last_seq + 1, tx.now, key, attempt, error),
                    )
                    self._decide(tx, live)
                else:
                    self._stale(tx, live, key, token, "failure")
                return {"accepted": False, "reason": "output violates the task contract"}
        self._append(tx, live, ev.StepSucceeded(state.last_seq + 1, tx.now, key, attempt, output))
        self._decide(tx, live)
        return {"accepted": True}

    def _fail(self, tx: _Tx, token: str, error: dict[str, Any]) -> dict[str, Any]:
        resolved = self._resolve_token(tx, token)
        if isinstance(resolved, dict):
            return resolved
        live, key, attempt = resolved
        unit = live.state.units[key]
        if unit.done:
            self._stale(tx, live, key, token, "duplicate")
            return {"accepted": False, "reason": "duplicate result; step already resolved"}
        if unit.status != DISPATCHED or unit.token != token:
            self._stale(tx, live, key, token, "failure")
            return {"accepted": False, "reason": "stale attempt"}
        self._append(
            tx,
            live,
            ev.StepAttemptFailed(live.state.last_seq + 1, tx.now, key, attempt, error),
        )
        self._decide(tx, live)
        return {"accepted": True}

    def _stale(self, tx: _Tx, live: _Live, key: str, token: str, outcome: str) -> None:
        self._append(
            tx, live, ev.StaleResultIgnored(live.state.last_seq + 1, tx.now, key, token, outcome)
        )

    def _tick(self, tx: _Tx) -> None:
        now = tx.now
        starts, self._child_starts = self._child_starts, []
        for eid, key, offer in starts:
            parent = self._live.get(eid)
            unit = parent.state.units.get(key) if parent is not None else None
            if (
                parent is not None
                and unit is not None
                and unit.status == SCHEDULED
                and unit.offer_seq == offer
                and not parent.state.terminal
            ):
                self._start_child(tx, parent, key)
                self._decide(tx, parent)
        timeout = self.session_timeout_ms
        for session in list(self._sessions.values()):
            if session.local:
                continue
            silent = now - session.last_seen_ms
            if silent > timeout and not session.lost:
                self._lose(tx, session, f"worker `{session.worker_id}` stopped responding")
            if silent > 4 * timeout:
                tx.after_commit.append(
                    functools.partial(_discard, self._sessions, session.session_id)
                )
        if self._recovered_tokens:
            for token, deadline in list(self._recovered_tokens.items()):
                if now >= deadline:
                    self._make_uncertain(tx, token, RESTART_REASON)
                    tx.after_commit.append(
                        functools.partial(_discard, self._recovered_tokens, token)
                    )
        due: dict[str, None] = {}
        while self._due and self._due[0][0] <= now:
            _, eid = heapq.heappop(self._due)
            due[eid] = None
        # Entries pushed while these are decided wait for the next tick.
        for eid in due:
            live = self._live.get(eid)
            if live is None:
                continue
            if live.due_at is not None and live.due_at <= now:
                live.due_at = None
            if not live.state.terminal:
                self._decide(tx, live)

    # ================================================================ deciding

    def _append(self, tx: _Tx, live: _Live, event: ev.Event) -> None:
        apply(live.state, event)
        change = tx.changes.get(live.state.id)
        if change is None:
            change = tx.changes[live.state.id] = ExecutionChange(live.state.id, _NO_ROW)
        change.events.append(event)

    def _decide(self, tx: _Tx, live: _Live) -> None:
        state = live.state
        plan = live.plan
        while not state.terminal:
            batch = decide(state, plan, tx.now, live.limits)
            if not batch:
                break
            settled = True
            for event in batch:
                self._append(tx, live, event)
                if type(event) not in _WAITING_EVENTS:
                    settled = False
            last = state.last_seq
            for event in batch:
                if type(event) is ev.StepScheduled:
                    self._route(tx, live, event.step)
            if settled and state.last_seq == last:
                # Only waiting states were entered (queued tasks, timers):
                # nothing else can change before new input or time arrives.
                break
        if state.terminal:
            if state.status == CONTINUED_AS_NEW:
                self._continue_as_new(tx, live)
            else:
                self._finalize(tx, live)
        else:
            if plan.timed:
                self._push_due(live)
            if live.state.id in self._children:
                self._check_children(tx, live)

    def _push_due(self, live: _Live) -> None:
        due = next_due_ms(live.state, live.plan)
        if due is not None and (live.due_at is None or due < live.due_at):
            live.due_at = due
            heapq.heappush(self._due, (due, live.state.id))

    def _route(self, tx: _Tx, live: _Live, key: str) -> None:
        unit = live.state.units[key]
        if unit.status != SCHEDULED:
            return
        spec = live.plan.spec(key)
        if spec is None:
            return
        if spec.is_child:
            # Children start on the next tick, as the book's histories show.
            self._child_starts.append((live.state.id, key, unit.offer_seq))
            heapq.heappush(self._due, (tx.now, live.state.id))
        elif spec.is_builtin:
            self._run_builtin(tx, live, key)
        else:
            self._index.push(
                (spec.task or "", spec.contract_version or ""),
                spec.using,
                live.state.id,
                key,
                unit.offer_seq,
            )
            tx.new_tasks = True

    def _run_builtin(self, tx: _Tx, live: _Live, key: str) -> None:
        state = live.state
        unit = state.units[key]
        spec = live.plan.spec(key)
        assert spec is not None
        self._builtin_serial += 1
        token = self.ids.token()
        deadline = None if spec.timeout_ms is None else tx.now + spec.timeout_ms
        self._append(
            tx,
            live,
            ev.StepDispatched(
                state.last_seq + 1,
                tx.now,
                key,
                unit.attempt,
                token,
                RUNTIME_WORKER,
                f"builtin:{self._builtin_serial}",
                deadline,
            ),
        )
        self._tokens[token] = (state.id, key, unit.attempt)
        builtins = self.builtins
        if builtins is None or not builtins.supports(spec.task or ""):
            error = ev.make_error("ADAPTER_DISABLED", ADAPTER_DISABLED, False)
            self._append(
                tx,
                live,
                ev.StepAttemptFailed(state.last_seq + 1, tx.now, key, unit.attempt, error),
            )
            return

        def done(output: Any, error: dict[str, Any] | None) -> None:
            if error is None:
                self.complete(token, output)
            else:
                self.fail(
                    token,
                    error["code"],
                    error.get("message", ""),
                    error.get("retryable", True),
                    error.get("details"),
                )

        task, value, timeout = spec.task or "", unit.input, spec.timeout_ms
        threading.Thread(
            target=lambda: builtins.run(task, value, timeout, done), daemon=True
        ).start()

    # ---- children

    def _start_child(self, tx: _Tx, parent: _Live, key: str) -> None:
        state = parent.state
        unit = state.units[key]
        spec = parent.plan.spec(key)
        assert spec is not None
        contract = parent.plan.contract(spec.task or "")
        cid = child_id(state.id, state.run, key)
        token = self.ids.token()
        deadline = None if spec.timeout_ms is None else tx.now + spec.timeout_ms
        self._append(
            tx,
            parent,
            ev.StepDispatched(
                state.last_seq + 1,
                tx.now,
                key,
                unit.attempt,
                token,
                RUNTIME_WORKER,
                f"child:{cid}",
                deadline,
            ),
        )
        self._tokens[token] = (state.id, key, unit.attempt)
        name = spec.step.workflow or ""
        plan = (
            self._by_hash.get(contract.definition_hash)
            if isinstance(contract, ir.ChildContract)
            else None
        )
        if plan is None:
            self._child_failed(
                tx,
                parent,
                key,
                ev.make_error(
                    "CHILD_NOT_REGISTERED", f"child workflow `{name}` is not registered", False
                ),
            )
            return
        self._links[cid] = _ChildLink(state.id, key, token)
        self._children.setdefault(state.id, set()).add(cid)
        existing = self._live.get(cid)
        if existing is not None:
            return
        row = self.store.execution_row(cid)
        if row is not None:
            self._deliver_child(tx, fold(self.store.history(cid) or [], cid))
            return
        try:
            value = _values.conform(unit.input, plan.defn.input)
        except _values.ValidationError as exc:
            self._child_failed(
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
        child = self._create(
            tx, cid, plan, value, parent={"execution_id": state.id, "step": key}, schedule_id=None
        )
        self._decide(tx, child)

    def _child_failed(self, tx: _Tx, parent: _Live, key: str, error: dict[str, Any]) -> None:
        unit = parent.state.units[key]
        self._append(
            tx,
            parent,
            ev.StepAttemptFailed(parent.state.last_seq + 1, tx.now, key, unit.attempt, error),
        )

    def _deliver_child(self, tx: _Tx, child: ExecutionState) -> None:
        link = self._links.pop(child.id, None)
        if link is None:
            return
        self._children.get(link.parent_id, set()).discard(child.id)
        parent = self._live.get(link.parent_id)
        if parent is None or parent.state.terminal:
            return
        unit = parent.state.units.get(link.unit_key)
        if unit is None or unit.status != DISPATCHED or unit.token != link.token:
            return
        name = child.workflow
        if child.status == "COMPLETED":
            self._append(
                tx,
                parent,
                ev.StepSucceeded(
                    parent.state.last_seq + 1, tx.now, unit.key, unit.attempt, child.output
                ),
            )
        else:
            if child.status == "FAILED":
                cause = child.error or {}
                details = cause.get("details")
                merged = dict(details) if isinstance(details, dict) else {}
                merged["child_execution_id"] = child.id
                error = ev.make_error(
                    str(cause.get("code", "CHILD_FAILED")),
                    f"child workflow `{name}` failed: {cause.get('message', '')}",
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
            self._child_failed(tx, parent, unit.key, error)
        self._decide(tx, parent)

    def _check_children(self, tx: _Tx, parent: _Live) -> None:
        """Cancels children their parent no longer waits for."""
        state = parent.state
        for cid in list(self._children.get(state.id, ())):
            link = self._links.get(cid)
            child = self._live.get(cid)
            if link is None or child is None or child.state.abort is not None:
                continue
            unit = state.units.get(link.unit_key)
            waiting = unit is not None and unit.status == DISPATCHED and unit.token == link.token
            if waiting and state.abort is None:
                continue
            reason = (
                "parent workflow aborted" if state.abort is not None else "parent step timed out"
            )
            self._append(tx, child, ev.CancelRequested(child.state.last_seq + 1, tx.now, reason))
            self._decide(tx, child)

    # ---- run ends

    def _finalize(self, tx: _Tx, live: _Live) -> None:
        if live.finalized:
            return
        live.finalized = True
        tx.terminal.append(live)
        if live.state.id in self._links:
            self._deliver_child(tx, live.state)

    def _continue_as_new(self, tx: _Tx, live: _Live) -> None:
        old = live.state
        change = tx.changes[old.id]
        change.archive_run = old.run
        change.archived = change.events
        change.events = []
        for unit in old.units.values():
            for token, _attempt in unit.tokens or ():
                self._tokens.pop(token, None)
        new = ExecutionState(old.id)
        live.state = new
        self.counters["continued_as_new"] += 1
        d = live.plan.defn
        self._append(
            tx,
            live,
            ev.WorkflowCreated(
                1,
                tx.now,
                d.name,
                d.version,
                d.definition_hash,
                old.input if old.next_run is None else _next_input(change.archived),
                old.parent,
                old.schedule_id,
                old.run + 1,
            ),
        )
        self._append(tx, live, ev.WorkflowStarted(2, tx.now))
        for sig in old.signals:
            if "delivered_to" not in sig:
                self._append(
                    tx,
                    live,
                    ev.SignalReceived(new.last_seq + 1, tx.now, sig["name"], sig["payload"]),
                )
        # The new run is decided on the next tick, so a run that always
        # continues at once advances one run per tick.
        live.due_at = tx.now
        heapq.heappush(self._due, (tx.now, old.id))

    # ================================================================ reads

    def _state_of(self, execution_id: str) -> ExecutionState:
        live = self._live.get(execution_id)
        if live is not None:
            return live.state
        events = self.store.history(execution_id)
        if not events:
            raise not_found(execution_id)
        return fold(events, execution_id)

    def _events(self, execution_id: str, run: int | None) -> list[ev.Event]:
        row = self.store.execution_row(execution_id)
        if row is None:
            raise not_found(execution_id)
        if run is not None and not 1 <= run <= row.run:
            raise NotFoundError(
                f"execution `{execution_id}` has runs 1 to {row.run}; there is no run {run}",
                "RUN_NOT_FOUND",
            )
        return self.store.history(execution_id, run) or []

    def _history(self, execution_id: str, run: int | None) -> dict[str, Any]:
        events = self._events(execution_id, run)
        out: dict[str, Any] = {
            "execution_id": execution_id,
            "events": [ev.to_json(e) for e in events],
        }
        current = events[0].run if events and isinstance(events[0], ev.WorkflowCreated) else None
        if run is not None or (current or 1) > 1:
            out["run"] = run if run is not None else current
        return out

    def _query(self, execution_id: str, name: str) -> dict[str, Any]:
        state = self._state_of(execution_id)
        plan = self._by_hash.get(state.definition_hash)
        if plan is None:
            raise not_found(execution_id)
        defn = plan.defn
        query = defn.query(name)
        if query is None:
            names = ", ".join(q.name for q in defn.queries)
            message = (
                f"{defn.key} has no query `{name}`; declared: {names}"
                if names
                else f"{defn.key} declares no queries"
            )
            raise NotFoundError(message, "UNKNOWN_QUERY")
        scope = _evaluate.Scope(
            input=state.input,
            execution={"id": state.id, "workflow": state.workflow, "version": state.version},
            steps=state.outputs,
        )
        try:
            value = _evaluate.evaluate(query.expr, scope)
        except _evaluate.EvalError as exc:
            raise InvalidError(f"evaluating query `{name}`: {exc}", "QUERY_FAILED") from None
        return {"execution_id": execution_id, "query": name, "value": value}

    def _park_wait(self, execution_id: str, cmd: _Cmd) -> Any:
        live = self._live.get(execution_id)
        if live is None or (live.state.terminal and live.state.status != CONTINUED_AS_NEW):
            return self._state_of(execution_id).to_json()
        with self._mu:
            cmd.parked = "waiting"
            if cmd.event is None:
                cmd.event = _Signal()
        waiters = [c for c in self._waiters.get(execution_id, ()) if c.parked == "waiting"]
        waiters.append(cmd)
        self._waiters[execution_id] = waiters
        return _PENDING

    # ================================================================ recovery

    def _recover(self) -> None:
        for row in self.store.load_definitions():
            try:
                self._add_plan(Plan(ir.from_json(row.ir)))
            except ir.IRError:
                continue
        now = self.clock.now_ms()
        deadline = now + self.session_timeout_ms
        for eid, events in self.store.load_active():
            state = fold(events, eid)
            if self._adopt(state) is None:
                continue
            self.recovered_executions += 1
            for unit in state.units.values():
                if unit.status == DISPATCHED and unit.token is not None:
                    session = unit.worker_session or ""
                    if not session.startswith(("child:", "builtin:")):
                        self.recovered_in_flight += 1
                        self._recovered_tokens[unit.token] = deadline
        if self._live:
            self._submit(self._resume)

    def _adopt(self, state: ExecutionState) -> _Live | None:
        """Takes a folded execution into memory and re-indexes its tokens and tasks."""
        plan = self._by_hash.get(state.definition_hash)
        if plan is None:
            return None
        live = _Live(state, plan, self.limits.effective(plan), state.parent is None)
        self._live[state.id] = live
        if live.top_level:
            self._active_top += 1
        for unit in state.units.values():
            for token, attempt in unit.tokens or ():
                self._tokens[token] = (state.id, unit.key, attempt)
            if unit.status == SCHEDULED:
                self._route_existing(live, unit.key)
            elif unit.status == DISPATCHED and (unit.worker_session or "").startswith("child:"):
                cid = (unit.worker_session or "")[len("child:") :]
                self._links[cid] = _ChildLink(state.id, unit.key, unit.token or "")
                self._children.setdefault(state.id, set()).add(cid)
        self._push_due(live)
        return live

    def _route_existing(self, live: _Live, key: str) -> None:
        spec = live.plan.spec(key)
        unit = live.state.units[key]
        if spec is not None and not spec.is_child and not spec.is_builtin:
            self._index.push(
                (spec.task or "", spec.contract_version or ""),
                spec.using,
                live.state.id,
                key,
                unit.offer_seq,
            )

    def _resume(self, tx: _Tx) -> None:
        for live in list(self._live.values()):
            state = live.state
            for unit in list(state.units.values()):
                if unit.status == DISPATCHED and (unit.worker_session or "").startswith("builtin:"):
                    self._make_uncertain(tx, unit.token or "", BUILTIN_RESTART_REASON)
                elif unit.status == SCHEDULED:
                    spec = live.plan.spec(unit.key)
                    if spec is not None and (spec.is_child or spec.is_builtin):
                        self._route(tx, live, unit.key)
        for cid in list(self._links):
            if cid not in self._live and self.store.execution_row(cid) is not None:
                self._deliver_child(tx, fold(self.store.history(cid) or [], cid))
        for live in list(self._live.values()):
            if not live.state.terminal:
                self._decide(tx, live)

    # ================================================================ threads

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _threads_started(self) -> bool:
        return any(t.name.startswith("orbit-handler") for t in self._threads)

    def _ticker(self) -> None:
        while not self._stop.wait(TICK_MS / 1000.0):
            try:
                self.tick()
            except OrbitError:
                continue

    def _on_clock_advance(self) -> None:
        if not self._closed:
            self.tick()
            if self._handler_threads == 0:
                self.run_handlers()

    def _handler_loop(self) -> None:
        while not self._stop.is_set():
            sessions = list(self._local_sessions.values())
            wait = 1000 if len(sessions) == 1 else 100
            for session in sessions:
                try:
                    task = self.poll(session.session_id, wait)
                except OrbitError:
                    continue
                if task is not None:
                    self._run_handler(task)

    def _run_handler(self, task: dict[str, Any]) -> None:
        handler = self._handlers.get((task["task_name"], task["contract_version"]))
        if handler is None:
            return
        fn, takes_task = handler
        token = task["token"]
        try:
            output = fn(task["input"], task) if takes_task else fn(task["input"])
        except TaskError as exc:
            failure = (exc.code, exc.message, exc.retryable, exc.details)
        except Exception as exc:
            failure = (
                "UNHANDLED_EXCEPTION",
                f"{type(exc).__name__}: {exc}",
                True,
                {"traceback": traceback.format_exc()},
            )
        else:
            with contextlib.suppress(OrbitError):
                self.complete(token, output)
            return
        with contextlib.suppress(OrbitError):
            self.fail(token, *failure)


_NO_ROW = ExecutionRow("", "", "", "", "", 0, 0, 0)
# Events after which the decider has nothing more to do in the same batch.
_WAITING_EVENTS = frozenset({ev.StepScheduled, ev.TimerStarted, ev.StepDispatched})


def _discard(mapping: dict[str, Any], key: str) -> None:
    mapping.pop(key, None)


def _aborts_with_execution(key: str) -> bool:
    """Units whose in-flight attempts are told to stop when the execution aborts."""
    return is_main_key(key) or key.endswith("]") or key.startswith("on_event:")


def _next_input(archived: list[ev.Event]) -> Any:
    for event in reversed(archived):
        if isinstance(event, ev.WorkflowContinuedAsNew):
            return event.input
    return None
