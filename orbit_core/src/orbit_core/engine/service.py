"""The `Engine` façade: the public API of docs/embedding.md. Each method is
one command handed to the group-commit pipeline (or a read of memory); the
work itself is done by the components it assembles."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import cast

from orbit_core import events as ev
from orbit_core import ir, limits
from orbit_core.api import (
    EXEC_RUNNING,
    Assignment,
    Deployed,
    ExecutionDoc,
    ExecutionList,
    ExecutionPage,
    ExecutionSummary,
    HistoryPage,
    QueryAnswer,
    SignalAccepted,
    Started,
    StartRequest,
    WorkflowList,
)
from orbit_core.decide import Limits
from orbit_core.engine import recovery
from orbit_core.engine.backoff import Backoff
from orbit_core.engine.catalog import Catalog, checked_definition
from orbit_core.engine.commands import Command, Tx
from orbit_core.engine.control import DEFAULT_CANCEL_REASON, Control
from orbit_core.engine.counters import Counters
from orbit_core.engine.executions import Executions
from orbit_core.engine.handlers import Handler, Handlers, Report
from orbit_core.engine.handoff import Handoff, Sharing
from orbit_core.engine.idempotency import DEFAULT_RETENTION_MS as DEFAULT_IDEMPOTENCY_RETENTION_MS
from orbit_core.engine.idempotency import Idempotency
from orbit_core.engine.migrations import MigrationDesk, Migrations
from orbit_core.engine.operations import Operations, OperatorApi
from orbit_core.engine.pipeline import Group, GroupCommit, PrepareFailed, internal_error
from orbit_core.engine.polling import Polling
from orbit_core.engine.reads import DEFAULT_WAIT_MS, MAX_WAIT_MS, STORED, Reads
from orbit_core.engine.restarts import Restarts
from orbit_core.engine.results import Results
from orbit_core.engine.scheduler import Scheduler
from orbit_core.engine.worker_desk import WorkerApi, WorkerDesk
from orbit_core.engine.workers import Workers
from orbit_core.errors import OrbitError, StorageError
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import (
    BuiltinTasks,
    Clock,
    CommitBatch,
    FaultLog,
    Faults,
    IdSource,
    RandomSource,
    RateRow,
    Store,
    SystemClock,
    UuidIds,
    system_random,
)
from orbit_core.state import ExecutionState
from orbit_core.visibility import query as visibility
from orbit_core.visibility.check import Filter as TypedFilter

TICK_MS = 100


class Engine:
    """The ORBIT runtime engine. Thread-safe: every call is a command, run
    with the others of its group and answered once the group is durable."""

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
        faults: Faults | None = None,
        random: RandomSource | None = None,
        sharing: Sharing | None = None,
        idempotency_retention_ms: int = DEFAULT_IDEMPOTENCY_RETENTION_MS,
    ) -> None:
        """`idempotency_retention_ms`: how long a start's idempotency key
        names its execution. `sharing`: only for the engine of a server that shares executions
        with others (engine/handoff.py), which reaches the steps it needs
        through `handoff.of(engine)`; an embedding program leaves it out."""
        self.store: Store = store if store is not None else MemoryStore()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.ids: IdSource = ids if ids is not None else UuidIds()
        # Where failures the engine handles itself are reported (FaultLog
        # only remembers them), and the jitter of its retry delays.
        self.faults: Faults = faults if faults is not None else FaultLog()
        self.random: RandomSource = random if random is not None else system_random()
        self.limits = limits or Limits()
        self.max_active_executions = max_active_executions
        self.session_timeout_ms = session_timeout_ms
        self.builtins = builtins
        self.counters = Counters()
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

        self._pipeline = GroupCommit(
            self.store,
            self.counters,
            prepare=self._prepare,
            publish=self._publish,
            rollback=self._rollback,
            # Measured on CPython: the leader committing its own group costs
            # less CPU than a committer thread, whose overlap with the next
            # group's preparation is eaten by GIL hand-offs (docs/embedding.md).
            threaded=bool(pipeline),
            faults=self.faults,
        )
        self._catalog = Catalog()
        if sharing is not None and sharing.shared_catalog:
            self._catalog.load_missing = self._load_definitions
        self._executions = Executions(
            store=self.store,
            ids=self.ids,
            limits=self.limits,
            catalog=self._catalog,
            counters=self.counters,
            builtins=builtins,
            report_builtin=self._report_builtin,
            offer_tasks=sharing is not None and sharing.offer_tasks,
            local_first=sharing is not None and sharing.local_first,
            step_slots=sharing.step_slots if sharing is not None else None,
        )
        self._control = Control(
            self._executions,
            max_active_executions,
            Idempotency(self.store, idempotency_retention_ms),
        )
        # Versions in production (engine/migrations.py): another audience's API.
        self.migrations = MigrationDesk(
            self._pipeline, self.store, Migrations(self._executions, self._catalog)
        )
        self._restarts = Restarts(self._executions, self._control)
        self._workers = Workers(self._executions, session_timeout_ms)
        # Set by drain(): polls and waits are answered without parking.
        self._draining = False
        self._polling = Polling(self._executions, self._workers, self._pipeline)
        self._results = Results(self._executions, self._workers)
        self._reads = Reads(self._executions, self._pipeline)
        # The worker calls (engine/worker_desk.py): another audience's API.
        self._desk = WorkerDesk(
            pipeline=self._pipeline,
            workers=self._workers,
            polling=self._polling,
            results=self._results,
            store=self.store,
            clock=self.clock,
            draining=lambda: self._draining,
            start=self._start_command,
        )
        self.workers: WorkerApi = self._desk
        # The operator's calls (engine/operations.py): pause, resume, restart, fork.
        self.operations: OperatorApi = Operations(self._pipeline, self._control, self._restarts)
        self._handoff: Handoff | None = None
        if sharing is not None:
            self._handoff = Handoff(
                pipeline=self._pipeline,
                executions=self._executions,
                workers=self._workers,
                polling=self._polling,
                desk=self._desk,
                load_definitions=self._load_definitions,
            )
        self._handlers = Handlers(
            host=_InProcess(self),
            exchange=self._exchange,
            threads=handler_threads,
            spawn=self._spawn,
            stop=self._stop,
            faults=self.faults,
            random=self.random,
        )

        self.recovered_executions, self.recovered_in_flight = recovery.load(
            self._executions, self._workers, self.clock.now_ms()
        )
        if len(self._executions.memory):
            self._pipeline.submit(lambda tx: recovery.resume(tx, self._executions, self._workers))
        if not self.clock.subscribe(self._on_clock_advance) and auto_tick:
            self._spawn(self._ticker, "orbit-tick")
        # Schedules (engine/scheduler.py): fired on the clock, started through Control.start.
        self.schedules = Scheduler(
            store=self.store,
            clock=self.clock,
            counters=self.counters,
            catalog=self._catalog,
            control=self._control,
            executions=self._executions,
            submit=self._pipeline.submit,
            threaded=auto_tick,
            faults=self.faults,
            # Shared mode: fires once the SharedEngine routes gated starts.
            routed=sharing is not None,
        )

    # ---- definitions

    def deploy(self, definition: ir.Definition | JsonObject, *, replace: bool = False) -> Deployed:
        """Registers a definition (a `Definition` or its IR JSON document).
        `replace` (a development server only) lets it take the place of a
        different definition of the same version that no unfinished
        execution uses; the answer then carries `replaced: true`."""
        defn, document = checked_definition(definition)
        users = self._users if replace else None
        return self._pipeline.submit(lambda tx: self._catalog.deploy(tx, defn, document, users))

    def _users(self, definition_hash: str) -> list[str]:
        """The unfinished executions (all are in memory) running `definition_hash`."""
        return sorted(
            live.state.id
            for live in self._executions.memory.all()
            if live.state.definition_hash == definition_hash and not live.state.terminal
        )

    def list_workflows(self) -> WorkflowList:
        return self._catalog.list_workflows()

    def get_workflow(self, name: str, version: str | None = None) -> JsonObject:
        """The IR document of `name@version`, or of the highest version."""
        return ir.to_json(self._catalog.find(name, version).defn)

    def definition(self, name: str, version: str | None = None) -> ir.Definition:
        return self._catalog.find(name, version).defn

    # ---- executions

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
        """Starts an execution: `{"execution_id", "created"}` (RULINGS §18's
        check order). With `idempotency_key`, a start repeated with the same
        key, workflow and input within the retention window answers with the
        execution the first made (`created: false`)."""
        request = StartRequest(workflow, version, input, execution_id, schedule_id, idempotency_key)
        return cast(Started, self._pipeline.run(self._start_command(request)))

    def start_many(self, requests: Sequence[StartRequest]) -> list[Started | OrbitError]:
        """Starts several executions with one wait: each exactly as `start`
        would (its own checks, its own answer), but submitted together, so
        they share a group and its commit and the caller is woken once. The
        answers are in the order of `requests`: what `start` returns, or the
        `OrbitError` it would raise."""
        answers: list[Started | OrbitError | None] = [None] * len(requests)
        commands: list[tuple[int, Command]] = []
        for i, request in enumerate(requests):
            try:
                commands.append((i, self._start_command(request)))
            except OrbitError as exc:
                answers[i] = exc
        self._pipeline.run_all([cmd for _, cmd in commands])
        for i, cmd in commands:
            if cmd.error is None:
                answers[i] = cast(Started, cmd.result)
            elif isinstance(cmd.error, OrbitError):
                answers[i] = cmd.error
            else:
                raise cmd.error
        return cast(list[Started | OrbitError], answers)

    def _start_command(self, request: StartRequest) -> Command:
        """The command of one start, once the checks made before any
        command (the sizes of its input and schedule id) have passed; they
        raise `OrbitError`. Running it is the start: its `result` is what
        `start` returns, its `error` what `start` raises."""
        limits.admit(request.input, "workflow input", "INVALID_INPUT")
        if request.schedule_id is not None:
            limits.admit_strings("INVALID_INPUT", schedule_id=request.schedule_id)
        run = functools.partial(
            self._control.start,
            workflow=request.workflow,
            version=request.version,
            input=request.input,
            execution_id=request.execution_id,
            schedule_id=request.schedule_id,
            idempotency_key=request.idempotency_key,
        )
        return Command(run, lookup=request.execution_id)

    def get(self, execution_id: str) -> ExecutionDoc:
        """The execution state document (`GET /v1/executions/{id}`), with
        `waiting_for` while tasks are queued (see `Workers.waiting_for`)."""

        def read(tx: Tx) -> ExecutionDoc | None:
            live = self._executions.memory.get(execution_id)
            if live is None:
                return None
            doc = live.state.to_json()
            waiting = self._workers.waiting_for(live.state)
            if waiting:
                doc["waiting_for"] = waiting
            held = self._executions.gate.waiting_of(live)
            if held is not None and "waiting" not in doc:
                doc["waiting"] = held
            return doc

        doc = self._pipeline.submit(read, read=True)
        if doc is None:  # not in memory: the store's, read outside the group (see `reads`)
            return self._executions.stored_state(execution_id).to_json()
        return doc

    def state(self, execution_id: str) -> ExecutionState:
        """The execution's state object (a copy for finished executions)."""
        live = self._pipeline.submit(
            lambda tx: self._executions.memory.get(execution_id), read=True
        )
        if live is None:
            return self._executions.stored_state(execution_id)
        return live.state

    # Store-only reads run on the caller's thread, outside any group (see `reads`).

    def history(self, execution_id: str, run: int | None = None) -> HistoryPage:
        self._pipeline.check_open()
        return self._reads.history(execution_id, run)

    def events(self, execution_id: str, run: int | None = None) -> list[ev.Event]:
        self._pipeline.check_open()
        return self._reads.events(execution_id, run)

    def list_executions(
        self, status: str | None = None, workflow: str | None = None, limit: int = 50
    ) -> ExecutionList:
        limit = min(max(limit, 1), 1000)
        self._pipeline.check_open()
        rows = self.store.list_executions(status.upper() if status else None, workflow, limit)
        listed = [r.to_json() for r in rows]
        self._mark_paused(listed)
        return {"executions": listed}

    def _mark_paused(self, rows: list[ExecutionSummary]) -> None:
        """Adds the pause fields to the listed rows of paused executions
        (only to those: untouched rows print as before)."""
        running = [r["execution_id"] for r in rows if r["status"] == EXEC_RUNNING]
        marks = self.store.pauses(running) if running else {}
        for row in rows:
            mark = marks.get(row["execution_id"])
            if mark is not None:
                row["paused"] = True
                row["paused_at_ms"] = mark.paused_at_ms
                if mark.reason is not None:
                    row["pause_reason"] = mark.reason

    def search_executions(
        self,
        where: str | None = None,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """A page of executions passing the filter `where` (docs/language/
        visibility.md); raises FilterError (INVALID_FILTER) for a bad one."""
        self._pipeline.check_open()
        typed = None if where is None else self.typed_filter(where, workflow)
        page = visibility.search(
            self.store,
            typed,
            status=status,
            workflow=workflow,
            limit=limit,
            cursor=cursor,
        )
        self._mark_paused(page["executions"])
        return page

    def typed_filter(self, where: str, workflow: str | None = None) -> TypedFilter:
        """`where` typed against the search fields of the deployed
        definitions (of `workflow` when named): what the live listing, the
        archive's listing and batches run. A filter they refuse is typed
        again after the store's definitions were loaded (deployed through
        another server a moment ago); raises FilterError (INVALID_FILTER)."""
        return visibility.type_filter(
            where, workflow, self._catalog.all_definitions, self.reload_definitions
        )

    def wait(self, execution_id: str, timeout_ms: int = DEFAULT_WAIT_MS) -> ExecutionDoc:
        """Blocks until the execution is terminal (not continued-as-new) or the
        timeout passes, then returns its state document."""
        timeout_ms = 0 if self._draining else min(max(timeout_ms, 0), MAX_WAIT_MS)
        cmd = Command(lambda tx: self._reads.park_wait(execution_id, cmd))
        result = self._pipeline.run(cmd)
        if result is STORED:
            return self._executions.stored_state(execution_id).to_json()
        if cmd.parked is None:
            return cast(ExecutionDoc, result).copy()
        if self._pipeline.await_parked(cmd, timeout_ms):
            return cast(ExecutionDoc, cmd.result).copy()
        return self.get(execution_id)

    def cancel(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        limits.admit_strings("INVALID_REQUEST", reason=reason)
        return self._pipeline.submit(
            lambda tx: self._control.cancel(tx, execution_id, reason or DEFAULT_CANCEL_REASON)
        )

    def signal(self, execution_id: str, name: str, payload: JsonValue = None) -> SignalAccepted:
        """Records a signal: `{"execution_id", "signal", "accepted", "seq"}`."""
        limits.admit(payload, f"payload for signal `{name}`", "SIGNAL_PAYLOAD_INVALID")
        return self._pipeline.submit(
            lambda tx: self._control.signal(tx, execution_id, name, payload)
        )

    def query(self, execution_id: str, name: str) -> QueryAnswer:
        return self._pipeline.submit(lambda tx: self._reads.query(execution_id, name), read=True)

    def reload_definitions(self) -> int:
        """Adds the stored definitions this engine does not know (deployed
        through another server on the same store: a standby's leader, a
        shared cluster's other servers); returns how many were added.

        Servers call this every round, and it nearly always finds nothing
        new: the store is read and the rows are matched against the catalog
        outside the groups (the catalog's hash lookup is one dict read), and
        a command runs only to add what is missing, so an idle round neither
        queues a group nor reads the store while holding memory."""
        try:
            rows = self.store.load_definitions()
        except Exception:
            # Read again inside a command, which reports the failure as
            # every failed command does.
            return self._pipeline.submit(lambda tx: self._load_definitions())
        missing = [row for row in rows if self._catalog.by_hash(row.definition_hash) is None]
        if not missing:
            return 0
        # (`add_definitions` looks each one up again: a deploy may have
        # added it since.)
        return self._pipeline.submit(lambda tx: recovery.add_definitions(self._catalog, missing))

    def _load_definitions(self) -> int:
        return recovery.add_definitions(self._catalog, self.store.load_definitions())

    # ---- in-process handlers

    def register_handler(
        self,
        task_name: str,
        version: str,
        fn: Handler,
        runtime: str | None = None,
    ) -> None:
        """Serves `task_name@version` with `fn(input)` or `fn(input, ctx)` (the
        SDK's handler shape; see `handlers.TaskContext`), run on the engine's
        handler threads through the normal dispatch path. Without `runtime`,
        the handler takes the task whatever runtime the step's `using` names."""
        self._handlers.register(task_name, version, fn, runtime)
        self._pipeline.submit(self._polling.match)

    def run_handlers(self) -> int:
        """Runs queued in-process tasks on the calling thread until none is
        left (for `handler_threads=0`, e.g. under a simulated clock)."""
        return self._handlers.run_all()

    # ---- time, health, lifecycle

    def tick(self) -> None:
        """The periodic work of chapter 39 (every 100 ms, or on `advance`)."""
        self._pipeline.submit(self._tick, origin="tick")

    def next_due_ms(self) -> int | None:
        """When the next timer, retry or timeout falls due (for time skipping)."""
        candidates = [
            t
            for t in (
                self._executions.next_due_ms(),
                self._workers.next_due_ms(),
                self.schedules.next_due_ms(),
            )
            if t is not None
        ]
        return min(candidates) if candidates else None

    def health(self) -> dict[str, int]:
        return {
            "active_executions": len(self._executions.memory),
            "worker_sessions": len(self._workers.sessions),
            **self.counters.as_dict(),
        }

    @property
    def draining(self) -> bool:
        """Whether `drain` was called: polls and waits no longer park."""
        return self._draining

    def drain(self) -> None:
        """For a server that is shutting down: ends every parked long poll
        (no task) and wait (the state as it is now) at once, and answers
        later ones without parking, so no request holds the shutdown. The
        engine keeps working otherwise (results are still recorded)."""
        self._draining = True
        self._polling.expire_all()
        self._reads.expire_all()

    def close(self) -> None:
        # A simulated clock outlives the engines of a simulated restart: a
        # closed one stops being called at each advance.
        self.clock.unsubscribe(self._on_clock_advance)
        self.schedules.close()
        self._pipeline.close()
        self._stop.set()
        self._polling.expire_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)
        self._pipeline.join()
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the engine side of a group commit

    def _prepare(self, batch: list[Command]) -> Group:
        """Applies a group's commands to memory and decides; nothing is
        answered yet. Reads see the group's own writes, and are answered only
        once those are durable. An unexpected exception raises
        `PrepareFailed`, naming the command whose run raised it: the pipeline
        undoes the group and runs the other commands again."""
        tx = Tx(self.clock.now_ms())
        current: Command | None = None
        try:
            if self._executions.lost:
                self._executions.reload_lost()
            if len(batch) > 1:
                self._control.look_up(tx, batch)
            for cmd in batch:
                if not cmd.read:
                    current = cmd
                    last = tx.last_event
                    cmd.run(tx)
                    if cmd.error is not None and tx.last_event is not last:
                        # It refused after it had changed executions (a store
                        # read that failed midway): undo it like a failure.
                        assert isinstance(cmd.error, OrbitError)
                        raise PrepareFailed(tx, cmd, cmd.error)
            current = None
            self._executions.fill_gate(tx)
            if tx.new_tasks and self._polling.waiting:
                self._polling.match(tx)
            for cmd in batch:
                if cmd.read:
                    self._read(cmd, tx)
            self._executions.stamp_rows(tx.changes.values())
            freed = self._executions.gate.freed(tx.changes)
            left = self._executions.gate.left(tx.changes)
            if freed:
                tx.after_commit.append(lambda: self._executions.gate.committed(freed))
        except PrepareFailed:
            raise
        except Exception as exc:
            raise PrepareFailed(tx, current, internal_error(exc)) from exc
        commit = CommitBatch(
            tx.definitions,
            list(tx.changes.values()),
            tx.workers,
            tx.offers,
            tx.receipts,
            [RateRow(w, k, tat, tx.now) for (w, k), tat in tx.rates.items()] if tx.rates else [],
            freed,
            left,
            tx.messages,
        )
        return Group(tx, commit, batch)

    def _read(self, cmd: Command, tx: Tx) -> None:
        """Runs a read; reads change nothing, so one that raises fails alone."""
        try:
            cmd.run(tx)
        except Exception as exc:
            self.faults.report(cmd.origin, exc)
            self.faults.recovered(cmd.origin)
            cmd.error = internal_error(exc)

    def _publish(self, tx: Tx) -> None:
        """After a commit: the deferred session and timer changes, and
        forgetting the executions that finished."""
        for action in tx.after_commit:
            action()
        for live in tx.terminal:
            self._workers.forget(self._executions.forget(live))
            self._reads.finished(live)

    def _rollback(self, tx: Tx) -> None:
        """Makes memory what the store holds for everything `tx` changed."""
        for plan in tx.new_plans:
            self._catalog.remove(plan)
        self._control.idempotency.forget(tx)
        self._workers.drop(self._executions.rollback(tx))
        self._workers.unrecorded(tx.reported, tx.now)
        self._workers.unconfirmed(tx)

    # ---- threads and time

    def _tick(self, tx: Tx) -> None:
        self._executions.children.tick(tx)
        self._polling.keep_alive(tx)
        self._workers.tick(tx)
        self._executions.tick(tx)

    def _ticker(self) -> None:
        """Ticks every TICK_MS; after a failure it waits longer each time
        (a failing store, or an execution whose decision raises) and goes on."""
        backoff = Backoff(self.random, first_s=TICK_MS / 1000.0)
        delay = TICK_MS / 1000.0
        failed = False
        while not self._stop.wait(delay):
            try:
                self.tick()
            except OrbitError:
                # Reported where it was caught (the store, the group).
                delay = max(TICK_MS / 1000.0, backoff.next_s())
                continue
            except Exception as exc:
                self.faults.report("tick", exc)
                failed = True
                delay = max(TICK_MS / 1000.0, backoff.next_s())
                continue
            if failed:
                failed = False
                self.faults.recovered("tick")
            backoff.reset()
            delay = TICK_MS / 1000.0

    def _on_clock_advance(self) -> None:
        """The ticker of a simulated clock: a failed tick is reported where
        it failed (or here) and does not stop the clock."""
        if self._pipeline.closed:
            return
        try:
            self.tick()
        except OrbitError:
            pass
        except Exception as exc:
            self.faults.report("tick", exc)
            self.faults.recovered("tick")
        if self._handlers.threads == 0:
            try:
                self.run_handlers()
            except Exception as exc:
                self.faults.report("handler", exc)
                self.faults.recovered("handler")

    def _exchange(
        self, session_id: str, reports: list[Report], limit: int, wait_ms: int
    ) -> list[Assignment]:
        """One command that reports results and claims up to `limit` tasks
        for the session, waiting up to `wait_ms` for some to be queued: the
        batched path of the in-process handlers."""

        def run(tx: Tx) -> object:
            for token, output, error in reports:
                try:
                    if error is None:
                        self._results.complete(tx, token, output)
                    else:
                        self._results.fail(tx, token, error)
                except OrbitError:
                    continue  # as `complete` and `fail` answer: nothing to retry
            return self._polling.claim(tx, session_id, cmd, limit, wait_ms > 0)

        cmd = Command(run, origin="handler")
        result = self._pipeline.run(cmd)
        if cmd.parked is None:
            return cast(list[Assignment], result)
        if self._pipeline.await_parked(cmd, wait_ms):
            return cast(list[Assignment], cmd.result)
        return []

    def _report_builtin(self, token: str, output: JsonValue, error: ev.ErrorJson | None) -> None:
        """Records a built-in task's result, retrying while the store fails
        (the attempt has no worker to report it again)."""
        backoff = Backoff(self.random)
        while True:
            try:
                if error is None:
                    self._desk.complete(token, output)
                else:
                    self._desk.fail(
                        token,
                        error["code"],
                        error.get("message", ""),
                        error.get("retryable", True),
                        error.get("details"),
                    )
                return
            except StorageError:
                # A closed engine (or one that broke) never takes it.
                if self._pipeline.closed or self._stop.wait(backoff.next_s()):
                    return
            except OrbitError:
                return  # refused (reported where it failed): nothing to retry
            except Exception as exc:
                self.faults.report("builtin", exc)
                self.faults.recovered("builtin")
                return

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()


class _InProcess:
    """The in-process handlers' worker (engine/handlers.py `Host`): the
    worker calls, and the local session's own, made as commands so that the
    sessions stay `Workers`'."""

    def __init__(self, engine: Engine) -> None:
        self.clock = engine.clock
        self._engine = engine
        self.poll = engine._desk.poll
        self.undelivered = engine._desk.undelivered

    def register_local(self, worker_id: str, runtime: str, contracts: list[tuple[str, str]]) -> str:
        reply = self._engine._pipeline.submit(
            lambda tx: self._engine._workers.register(
                tx, worker_id, runtime, contracts, None, local=True
            )
        )
        return reply["worker_session_id"]

    def serve(self, session_id: str, contracts: list[tuple[str, str]]) -> None:
        self._engine._pipeline.submit(lambda tx: self._engine._workers.serve(session_id, contracts))
