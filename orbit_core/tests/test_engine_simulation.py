"""Deterministic simulation: seeded random workflows (tasks, fan-outs, timers,
signals, compensation, in-process handlers, built-in tasks whose effect the
simulation records) driven by workers that fail, hang,
answer twice or late, lost sessions, and the engine's own faults: commits and
reads the store refuses, exceptions while a group is prepared (a decision
that raises, in a command, a tick or a handler's report), ticks that raise,
handlers that raise, and crashes at random points (the engine is dropped and
rebuilt from its store). The invariants:

- memory is what the store holds: folding an execution's stored history
  gives the engine's live state, and the count of running executions matches;
- no answer is lost: an execution whose start was answered exists, an
  accepted result is a success in the history, an accepted signal is in the
  history at the seq it was given, a dispatched task's token is stored;
- no duplicated success: no unit succeeds twice in a run;
- no effect before its commit: a built-in task runs only once the
  StepDispatched of its attempt is in the store;
- every succeeded unit with a `compensate` block is compensated when its
  execution aborts; histories are gap-free;
- after each run, an engine rebuilt from the store answers exactly what the
  running engine answered.

`ORBIT_SIM_SEEDS` (default 10000) sets how many seeds run; any failure names
its seed, and `ORBIT_SIM_SEED=<n>` replays just that one. The seeds are dealt
out to eight shards (`test_simulation[0]` to `[7]`), so that `pytest -n`
spreads them over the CPUs.
"""

from __future__ import annotations

import contextlib
import os
import random
import types
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from engine_kit import (
    Int,
    Str,
    binop,
    child_contract,
    inp,
    lst,
    obj,
    rec,
    ref,
    step,
    task,
    var,
    workflow,
)

from orbit_core import decide as decide_module
from orbit_core import events as ev
from orbit_core import ir, unitkeys
from orbit_core.engine import Engine, TaskError
from orbit_core.engine import executions as executions_module
from orbit_core.engine import recovery as recovery_module
from orbit_core.engine import service as service_module
from orbit_core.engine.catalog import checked_definition
from orbit_core.errors import OrbitError, StorageError
from orbit_core.flow import keys as flow_keys
from orbit_core.ir import Compensation, ForEach, Retry, Signal
from orbit_core.memory_store import MemoryStore
from orbit_core.plan import Plan
from orbit_core.ports import CommitBatch, ExecutionRow
from orbit_core.state import TERMINAL, ExecutionState, fold
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine

SEEDS = int(os.environ.get("ORBIT_SIM_SEEDS", "10000"))
ONLY = os.environ.get("ORBIT_SIM_SEED")
WORK = task("t.work", rec(n=Int), rec(v=Int))
UNDO = task("t.undo", rec(v=Int), rec(ok=Int))
LOCAL = task("t.local", rec(n=Int), rec(v=Int))
HTTP = task("orbit.http.request", rec(method=(Str, "GET"), url=Str), rec(status=Int))
# The child workflow some steps start: one task, sometimes a timer first.
LEAF = workflow(
    "Leaf",
    [
        step("rest", "sleep", sleep_ms=200, when=binop("gt", inp("n"), 1)),
        step("w", task="t.work", with_=obj(n=inp("n")), after=["rest"]),
    ],
    [WORK],
    input=rec(n=(Int, 0)),
    output=rec(v=Int),
    result=obj(v=ref("w", "v")),
)
# Codes a caller may get back in the simulation.
EXPECTED = {
    "EXECUTION_FINISHED",
    "UNKNOWN_SESSION",
    "NOT_FOUND",
    "INTERNAL",
    "STORAGE_ERROR",
    # A restart (issue 38) of a child execution.
    "CHILD_EXECUTION",
    "ALREADY_PAUSED",
    "NOT_PAUSED",
}
# What may happen to a paused execution (docs/operating-executions.md):
# results of attempts already running, lost workers, signals, stale results,
# and a cancel, which ends the pause.
WHILE_PAUSED = frozenset(
    {
        ev.StepSucceeded,
        ev.StepAttemptFailed,
        ev.StepAttemptUncertain,
        ev.SignalReceived,
        ev.StaleResultIgnored,
        ev.CancelRequested,
        ev.WorkflowResumed,
        # A paused execution waiting for a workflow concurrency slot is let
        # in like any other (it holds the slot, as a paused running one
        # does); it runs nothing until resumed.
        ev.WorkflowAdmitted,
        ev.WorkflowStarted,
    }
)


class SimulatedBug(Exception):
    """An exception the simulation injects into the engine."""


class Faults:
    """What the simulation injects next; one instance per seed."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        # Decisions left before one raises (0: none armed).
        self.decide_fuse = 0
        self.tick_raises = False
        self.commits_fail = 0
        self.reads_fail = 0


class FaultyStore(MemoryStore):
    """Refuses the commits and reads it is told to, as a full or failing disk
    would."""

    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults
        # StepDispatched events of built-in tasks committed so far.
        self.builtin_dispatches = 0

    def commit(self, batch: CommitBatch) -> None:
        if self.faults.commits_fail:
            self.faults.commits_fail -= 1
            raise StorageError("disk I/O error (simulated)")
        super().commit(batch)
        self.builtin_dispatches += sum(
            1
            for change in batch.executions
            for event in [*change.archived, *change.events]
            if isinstance(event, ev.StepDispatched) and event.worker_session.startswith("builtin:")
        )

    def _read(self) -> None:
        if self.faults.reads_fail:
            self.faults.reads_fail -= 1
            raise StorageError("read error (simulated)")

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        self._read()
        return super().history(execution_id, run)

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        self._read()
        return super().execution_row(execution_id)

    def clean_history(self, execution_id: str) -> list[ev.Event]:
        return super().history(execution_id) or []

    def every_run(self, execution_id: str) -> list[ev.Event]:
        """The events of all the execution's runs, first run first (a
        restart archives a run whose answers stand)."""
        row = self.execution_row(execution_id)
        if row is None:
            return []
        events: list[ev.Event] = []
        for run in range(1, row.run):
            events += super().history(execution_id, run) or []
        return events + self.clean_history(execution_id)

    def all_finished(self) -> bool:
        """Whether every stored execution (children too) has ended."""
        return all(row.status in TERMINAL for row in self._rows.values())


class SimulatedAdapter:
    """The built-in tasks (the HTTP adapter): each run is an effect, counted
    against the built-in dispatches the store holds at that moment; the
    simulation reports the results later (`pending`)."""

    def __init__(self, store: FaultyStore) -> None:
        self.store = store
        self.effects = 0
        self.early: list[int] = []
        self.pending: list[Any] = []

    def supports(self, task_name: str) -> bool:
        return task_name == "orbit.http.request"

    def run(self, task_name: str, input: Any, timeout_ms: Any, done: Any) -> None:
        self.effects += 1
        if self.effects > self.store.builtin_dispatches:
            self.early.append(self.effects)
        self.pending.append(done)


class InlineThread:
    """Runs the engine's built-in task threads at once, so that an effect
    happens at a deterministic point of the simulation."""

    def __init__(self, target: Any, daemon: bool = False) -> None:
        self._target = target

    def start(self) -> None:
        self._target()


_CURRENT: list[Faults] = [Faults()]
_REAL_DECIDE = decide_module.decide


def _chaotic_decide(state: Any, plan: Any, now: int, limits: Any) -> list[ev.Event]:
    faults = _CURRENT[0]
    if faults.decide_fuse:
        faults.decide_fuse -= 1
        if faults.decide_fuse == 0:
            raise SimulatedBug("decider bug (simulated)")
    return _REAL_DECIDE(state, plan, now, limits)


def random_workflow(rng: random.Random, name: str) -> ir.Definition:
    steps = []
    names: list[str] = []
    for i in range(rng.randint(1, 4)):
        sname = f"s{i}"
        after = rng.sample(names, k=min(len(names), rng.randint(0, 2)))
        kind = rng.choice(
            ["task", "task", "local", "fan", "sleep", "compute", "await", "child", "http"]
        )
        common: dict[str, Any] = {"after": after}
        if rng.random() < 0.2:
            common["when"] = binop("gt", inp("x"), rng.randint(0, 3))
        compensate = (
            Compensation(
                "t.undo",
                obj(v=ref(sname, "v")),
                retry=Retry(attempts=rng.randint(1, 3), initial_delay_ms=100),
            )
            if rng.random() < 0.5
            else None
        )
        policy: dict[str, Any] = {  # keyword arguments of `step`
            "retry": Retry(
                attempts=rng.randint(1, 3),
                backoff=rng.choice(["fixed", "exponential"]),
                initial_delay_ms=rng.choice([100, 500]),
            ),
            "timeout_ms": rng.choice([None, 2000]),
            "queue_timeout_ms": rng.choice([None, None, 20_000]),
        }
        if kind in ("task", "local"):
            steps.append(
                step(
                    sname,
                    task=f"t.{'work' if kind == 'task' else 'local'}",
                    with_=obj(n=i),
                    compensate=compensate if kind == "task" else None,
                    **policy,
                    **common,
                )
            )
        elif kind == "fan":
            steps.append(
                step(
                    sname,
                    task="t.work",
                    for_each=ForEach("it", inp("items")),
                    max_parallel=rng.choice([None, 1, 2]),
                    with_=obj(n=var("it")),
                    compensate=compensate,
                    **policy,
                    **common,
                )
            )
        elif kind == "http":
            steps.append(
                step(
                    sname,
                    task="orbit.http.request",
                    with_=obj(url=f"http://example.test/{i}"),
                    **policy,
                    **common,
                )
            )
        elif kind == "child":
            steps.append(
                step(
                    sname,
                    "workflow",
                    workflow="Leaf",
                    with_=obj(n=i),
                    timeout_ms=rng.choice([None, 1500]),
                    **common,
                )
            )
        elif kind == "sleep":
            steps.append(step(sname, "sleep", sleep_ms=rng.choice([0, 300, 1500]), **common))
        elif kind == "compute":
            steps.append(step(sname, "compute", compute=obj(v=binop("add", inp("x"), i)), **common))
        else:
            steps.append(
                step(sname, "await", signal="go", timeout_ms=rng.choice([1000, 5000]), **common)
            )
        names.append(sname)
    extra: dict[str, Any] = {"signals": (Signal("go", rec()),)}
    if rng.random() < 0.3:
        extra["handlers"] = {"failure": (step("note", "compute", compute=obj(v=1)),)}
    if rng.random() < 0.2:
        extra["timeout_ms"] = rng.choice([3000, 8000])
    return workflow(
        name,
        steps,
        [WORK, UNDO, LOCAL, HTTP, child_contract(LEAF)],
        input=rec(x=Int, items=lst(Int)),
        **extra,
    )


# Definitions are drawn from a fixed pool: checking and decoding a definition
# (on deploy and at every restart) costs more than running a short history,
# and the pool is varied enough.
_POOL_RNG = random.Random(20_260_101)
POOL = [random_workflow(_POOL_RNG, f"Wf{k}") for k in range(48)]


def with_flow(defn: ir.Definition, k: int) -> ir.Definition:
    """Flow control on some of the pool (issue 39): a workflow `concurrency`
    on every third (keyed by `input.x` or not, 1 or 2 running), a step
    `concurrency` of 1 per `input.x` on the task steps of every fourth."""
    flow = defn.flow
    steps = defn.steps
    if k % 3 == 0:
        key = inp("x") if k % 2 == 0 else None
        flow = ir.definition.Flow(concurrency=ir.definition.Concurrency(1 + k % 2, key))
    if k % 4 == 1:
        gated = ir.definition.Flow(concurrency=ir.definition.Concurrency(1, inp("x")))
        steps = tuple(
            attrs.evolve(s, flow=gated) if s.kind == "task" and s.task == "t.work" else s
            for s in steps
        )
    if flow is defn.flow and steps is defn.steps:
        return defn
    changed = attrs.evolve(defn, flow=flow, steps=steps)
    return attrs.evolve(changed, definition_hash=ir.definition_hash(changed))


POOL = [with_flow(d, k) for k, d in enumerate(POOL)]
_CHECKED = {id(d): checked_definition(d) for d in [LEAF, *POOL]}
_DECODED = {d.definition_hash: d for d in [LEAF, *POOL]}


def _checked(definition: Any) -> Any:
    cached = _CHECKED.get(id(definition))
    return cached if cached is not None else checked_definition(definition)


def _decoded(document: dict[str, Any]) -> ir.Definition:
    cached = _DECODED.get(document.get("definition_hash", ""))
    return cached if cached is not None else ir.from_json(document)


# A plan only reads its definition (its unit specs are worked out once and
# kept), so the engines of one process share the pool's: the shared
# simulation builds seven or more engines per seed, each loading every
# definition.
_PLANS = {id(d): Plan(d) for d in [LEAF, *POOL]}


def _plan(defn: ir.Definition) -> Plan:
    cached = _PLANS.get(id(defn))
    return cached if cached is not None and cached.defn is defn else Plan(defn)


class Simulation:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        # Every sixteenth seed commits on the engine's committer thread.
        self.pipeline = seed % 16 == 0
        self.faults = Faults()
        _CURRENT[0] = self.faults
        self.store = FaultyStore(self.faults)
        self.adapter = SimulatedAdapter(self.store)
        self.clock = SimulatedClock()
        self.ids = SequentialIds()
        self.sessions: list[str] = []
        self.held: list[dict[str, Any]] = []
        self.executions: list[str] = []
        self.planned: dict[str, str] = {}
        # What callers were told, to hold the store to it.
        self.started: set[str] = set()
        self.accepted: list[tuple[str, str, int]] = []
        self.signals: list[tuple[str, int]] = []
        self.dispatched: list[tuple[str, str]] = []
        self.engine = self.open()

    def open(self) -> Engine:
        while True:  # a server that cannot recover exits and is restarted
            try:
                engine = simulated_engine(
                    self.store,
                    self.clock,
                    ids=self.ids,
                    session_timeout_ms=3000,
                    pipeline=self.pipeline,
                    random=random.Random(self.rng.random()),
                    builtins=self.adapter,
                )
            except StorageError:
                continue
            break
        real_tick = engine._tick
        faults = self.faults

        def tick(tx: Any) -> None:
            if faults.tick_raises:
                faults.tick_raises = False
                raise SimulatedBug("tick bug (simulated)")
            real_tick(tx)

        engine._tick = tick  # type: ignore[method-assign]
        rng = self.rng

        def local(value: dict[str, Any]) -> dict[str, Any]:
            r = rng.random()
            if r < 0.1:
                raise RuntimeError("handler bug (simulated)")
            if r < 0.15:
                raise TaskError("LOCAL_BUSY", "try again", retryable=True)
            return {"v": value["n"]}

        while True:
            try:
                engine.register_handler("t.local", "1.0.0", local)
                return engine
            except StorageError:
                continue

    def crash(self) -> None:
        """Drops the engine (memory, sessions, its clock subscription) and
        rebuilds one from the store, as a restarted process would; what was
        answered must still hold."""
        self.faults.decide_fuse = 0
        self.faults.reads_fail = 0
        with contextlib.suppress(OrbitError):
            self.engine.close()  # nothing is queued: every call returned
        self.clock = SimulatedClock(self.clock.now_ms() + self.rng.choice([0, 500, 4000]))
        self.adapter.pending = []  # their threads died with the process
        self.engine = self.open()
        self.sessions = []
        self.check_answers()

    def call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except OrbitError as exc:
            assert exc.code in EXPECTED, exc
            if exc.code == "UNKNOWN_SESSION" and args and args[0] in self.sessions:
                self.sessions.remove(args[0])  # expired: its worker registers again
            return None

    def session(self) -> str | None:
        if not self.sessions or self.rng.random() < 0.05:
            reply = self.call(
                self.engine.workers.register,
                f"w{len(self.sessions)}",
                "python",
                [("t.work", "1.0.0"), ("t.undo", "1.0.0")],
            )
            if reply is None:
                return None
            self.sessions.append(reply["worker_session_id"])
        return self.rng.choice(self.sessions)

    def answer(self, task_: dict[str, Any], reliable: bool) -> None:
        rng = self.rng
        undo = task_["task_name"] == "t.undo"
        good = {"ok": 1} if undo else {"v": task_["input"]["n"]}
        r = 0.0 if reliable else rng.random()
        if r < 0.55:
            self.complete(task_, good)
            if rng.random() < 0.1:
                self.complete(task_, good)  # a duplicate
        elif r < 0.65:
            self.fail(task_, "BUSY", True)
        elif r < 0.7:
            self.fail(task_, "BROKEN", False)
        elif r < 0.75:
            self.complete(task_, {"v": "wrong"} if not undo else {"ok": "wrong"})
        else:
            self.held.append(task_)

    def complete(self, task_: dict[str, Any], output: Any) -> None:
        try:
            reply = self.engine.workers.complete(task_["token"], output)
        except OrbitError as exc:
            assert exc.code in EXPECTED, exc
            self.held.append(task_)  # workers retry results until answered
            return
        if reply["accepted"]:
            self.accepted.append((task_["execution_id"], task_["step_id"], task_["attempt"]))

    def fail(self, task_: dict[str, Any], code: str, retryable: bool) -> None:
        try:
            self.engine.workers.fail(task_["token"], code, "simulated", retryable)
        except OrbitError as exc:
            assert exc.code in EXPECTED, exc
            self.held.append(task_)

    def builtin_result(self, reliable: bool) -> None:
        """Reports one built-in task's result, as its thread would."""
        pending = self.adapter.pending
        done = pending.pop(self.rng.randrange(len(pending)))
        if reliable or self.rng.random() < 0.7:
            done({"status": 200}, None)
        else:
            done(None, ev.make_error("HTTP_ERROR", "connection refused (simulated)", True))

    def start(self, eid: str, workflow_name: str) -> None:
        self.planned[eid] = workflow_name
        reply = self.call(
            self.engine.start,
            workflow_name,
            None,
            {"x": self.rng.randint(0, 4), "items": list(range(self.rng.randint(0, 3)))},
            eid,
        )
        if reply is not None:
            self.started.add(eid)
            if eid not in self.executions:
                self.executions.append(eid)

    def restart(self, eid: str, step_name: str) -> None:
        """Restarts with --force: the preview must list every task step the
        new run runs, and the new run must start with the kept outcomes."""
        answer = self.engine.operations.restart(eid, step_name, force=True, reason="chaos")
        defn = self.definitions[answer["workflow"]]
        tasks = {s.name for s in defn.steps if s.task}
        assert {r["step"] for r in answer["effects"]} == tasks & set(answer["rerun"])
        assert step_name in answer["rerun"]
        events = self.engine.events(eid)
        assert isinstance(events[0], ev.WorkflowCreated) and events[0].run == answer["run"]
        restored = {unitkeys.step_name(e.step) for e in events if isinstance(e, ev.StepRestored)}
        assert restored <= set(answer["kept"])

    def step(self, reliable: bool = False) -> None:
        rng, engine = self.rng, self.engine
        action = rng.random()
        if action < 0.3:
            session = self.session()
            if session is not None:
                task_ = self.call(engine.workers.poll, session, 0)
                if task_ is not None:
                    self.dispatched.append((task_["execution_id"], task_["token"]))
                    self.answer(task_, reliable)
        elif action < 0.4 and (self.held or self.adapter.pending):
            if self.adapter.pending and (not self.held or rng.random() < 0.5):
                self.builtin_result(reliable)
            else:
                task_ = self.held.pop(rng.randrange(len(self.held)))
                self.answer(task_, True)
        elif action < 0.55:
            for session in list(self.sessions):
                if rng.random() < 0.8:
                    self.call(engine.workers.heartbeat, session)
            self.clock.advance(rng.choice([50, 100, 400, 1500]))
        elif action < 0.58 and self.executions and not reliable:
            self.call(engine.cancel, rng.choice(self.executions), "chaos")
        elif action < 0.6 and self.executions and not reliable:
            # Issue 38: a restart from a random step, running or finished.
            eid = rng.choice(self.executions)
            defn = self.definitions[self.planned[eid]]
            step_name = rng.choice(defn.steps).name
            self.call(self.restart, eid, step_name)
        elif action < 0.68 and self.executions:
            eid = rng.choice(self.executions)
            reply = self.call(engine.signal, eid, "go", {})
            if reply is not None:
                self.signals.append((eid, reply["seq"]))
        elif action < 0.7:
            self.call(engine.run_handlers)
        elif reliable:
            return
        elif action < 0.73:
            self.faults.commits_fail = rng.randint(1, 3)
        elif action < 0.75:
            self.faults.decide_fuse = rng.randint(1, 6)
        elif action < 0.76:
            self.faults.reads_fail = 1
        elif action < 0.77:
            self.faults.tick_raises = True
        elif action < 0.79:
            self.crash()
        elif action < 0.83 and self.sessions:
            self.call(
                engine.workers.unregister, self.sessions.pop(rng.randrange(len(self.sessions)))
            )
        elif action < 0.845:
            # An operator pauses or resumes an execution at a random point.
            if self.executions:
                held = rng.choice(self.executions)
                self.call(
                    engine.operations.pause if rng.random() < 0.6 else engine.operations.resume,
                    held,
                )
        elif action < 0.86:
            # A retried start: answered `created: false` only if it exists.
            eid = rng.choice(sorted(self.planned))
            self.start(eid, self.planned[eid])
        if engine._pipeline.broken:
            self.crash()  # memory could not be rebuilt: the operator restarts

    def drain_round(self) -> None:
        """Resumes what is paused, answers every task reliably, signals, and
        moves time to the next thing due."""
        engine = self.engine
        for eid in self.executions:
            doc = self.call(engine.get, eid)
            if doc is not None and doc.get("paused"):
                self.call(engine.operations.resume, eid)
        while self.adapter.pending:
            self.builtin_result(True)
        while self.held:
            self.answer(self.held.pop(), True)
        session = self.session()
        while session is not None:
            task_ = self.call(engine.workers.poll, session, 0)
            if task_ is None:
                break
            self.dispatched.append((task_["execution_id"], task_["token"]))
            self.answer(task_, True)
        for session in list(self.sessions):
            self.call(engine.workers.heartbeat, session)
        self.call(engine.run_handlers)
        eid = self.rng.choice(self.executions)
        reply = self.call(engine.signal, eid, "go", {})
        if reply is not None:
            self.signals.append((eid, reply["seq"]))
        due = engine.next_due_ms()
        now = self.clock.now_ms()
        self.clock.advance(min(max(due - now, 1), 1000) if due is not None else 1000)

    # ---- invariants

    def check_memory(self) -> None:
        """Every execution in memory is what its stored history folds to."""
        executions = self.engine._executions
        running = executions.memory
        for live in running.all():
            eid = live.state.id
            events = self.store.clean_history(eid)
            assert events, f"{eid} is in memory but not in the store"
            if live.state.terminal and live.state.status == "CONTINUED_AS_NEW":
                continue
            assert fold(events, eid).to_json() == live.state.to_json(), eid
        top = sum(1 for live in running.all() if live.top_level)
        assert running.active_top == top, (running.active_top, top)
        self.check_flow_limits()
        for live in running.all():
            eid = live.state.id
            # A running child has a parent unit waiting for it, or is cancelled.
            link = live.state.parent
            if link is None or live.state.terminal or live.state.abort is not None:
                continue
            parent = running.get(link["execution_id"])
            unit = parent.state.units.get(link["step"]) if parent is not None else None
            assert (
                parent is not None
                and not parent.state.terminal
                and unit is not None
                and unit.status == "DISPATCHED"
                and unit.worker_session == f"child:{eid}"
            ), f"child {eid} runs though its parent no longer waits for it"

    def check_flow_limits(self) -> None:
        """No key ever has more running executions than its workflow's
        `concurrency` allows, nor more attempts of a step out than the
        step's (counted over what memory holds, which is what the store
        holds: `check_memory`)."""
        running: dict[tuple[str, ...], list[str]] = {}
        out: dict[tuple[str, ...], list[str]] = {}
        limits: dict[tuple[str, ...], int] = {}
        for live in self.engine._executions.memory.all():
            state, defn = live.state, live.plan.defn
            if state.terminal:
                continue
            execution = {"id": state.id, "workflow": state.workflow, "version": state.version}
            if defn.flow is not None and defn.flow.concurrency is not None and state.started:
                limit = defn.flow.concurrency
                scope = (state.workflow, flow_keys.key_text(limit.key, state.input, execution))
                running.setdefault(scope, []).append(state.id)
                limits[scope] = limit.limit
            for step_scope, holder, limit_of_step in step_slots_out(state, live.plan):
                out.setdefault(step_scope, []).append(holder)
                limits[step_scope] = limit_of_step
        for scopes in (running, out):
            for where, ids in scopes.items():
                assert len(ids) <= limits[where], f"over the concurrency limit of {where}: {ids}"

    def check_answers(self) -> None:
        """Everything a caller was told is in the store, and no built-in
        task ran before its dispatch was."""
        assert not self.adapter.early, (
            f"built-in task runs {self.adapter.early} came before their dispatch was committed"
        )
        for eid in self.started:
            assert self.store.execution_row(eid) is not None, f"{eid} was started but is lost"
        histories: dict[str, list[ev.Event]] = {}

        def history(eid: str) -> list[ev.Event]:
            if eid not in histories:
                histories[eid] = self.store.every_run(eid)
            return histories[eid]

        for eid, unit, attempt in self.accepted:
            assert any(
                isinstance(e, ev.StepSucceeded) and e.step == unit and e.attempt == attempt
                for e in history(eid)
            ), (eid, unit, attempt)
        for eid, seq in self.signals:
            assert any(isinstance(e, ev.SignalReceived) and e.seq == seq for e in history(eid)), (
                eid,
                seq,
            )
        for eid, token in self.dispatched:
            assert any(getattr(e, "token", None) == token for e in history(eid)), (eid, token)

    def check(self, execution_id: str) -> None:
        events = self.engine.events(execution_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1)), execution_id
        assert isinstance(events[0], ev.WorkflowCreated)
        # (WorkflowWaiting: held back by a workflow concurrency limit.)
        assert isinstance(events[1], (ev.WorkflowStarted, ev.WorkflowWaiting))
        succeeded = [e.step for e in events if isinstance(e, ev.StepSucceeded)]
        assert len(succeeded) == len(set(succeeded)), f"{execution_id}: a unit succeeded twice"
        # Nothing is dispatched, started, scheduled or fired while paused.
        paused = False
        for e in events:
            if paused:
                assert type(e) in WHILE_PAUSED, f"{execution_id}: #{e.seq} {e.TYPE} while paused"
            if isinstance(e, ev.WorkflowPaused):
                paused = True
            elif isinstance(e, ev.WorkflowResumed):
                paused = False
        folded = fold(events, execution_id).to_json()
        assert folded == self.engine.get(execution_id), execution_id

    def check_final(self, execution_id: str) -> None:
        state = self.engine.get(execution_id)
        assert state["status"] in TERMINAL, (execution_id, state["status"])
        units = state["units"]
        if state["status"] == "COMPLETED":
            assert not any(k.startswith("compensate:") for k in units)
            return
        defn = self.definitions[state["workflow"]]
        compensable = {s.name for s in defn.steps if s.compensate is not None}
        for key, unit in units.items():
            base = key.partition("[")[0]
            if ":" in key or base not in compensable or unit.get("status") != "SUCCEEDED":
                continue
            spec = defn.step(base)
            if "[" not in key and spec is not None and spec.for_each is not None:
                continue  # the aggregate; its elements are compensated
            comp = units.get(f"compensate:{key}")
            assert comp is not None and comp.get("status") in ("SUCCEEDED", "FAILED"), (
                execution_id,
                key,
            )
        comps = [u for k, u in units.items() if k.startswith("compensate:")]
        if state.get("compensation") == "completed":
            assert all(u["status"] == "SUCCEEDED" for u in comps)
        if state.get("compensation") == "failed":
            assert any(u["status"] == "FAILED" for u in comps)

    definitions: dict[str, ir.Definition]


def run_seed(seed: int) -> int:
    sim = Simulation(seed)
    rng = sim.rng
    sim.definitions = {}
    for defn in [LEAF, *rng.sample(POOL, k=rng.randint(1, 2))]:
        sim.definitions[defn.name] = defn
        while True:
            try:
                sim.engine.deploy(defn)
                break
            except StorageError:
                continue
    for i in range(rng.randint(1, 4)):
        sim.start(f"x-{seed}-{i}", rng.choice(list(sim.definitions)[1:]))
    for _ in range(rng.randint(4, 24)):
        sim.step()
        if rng.random() < 0.1:
            sim.check_memory()
    sim.faults.clear()
    sim.check_memory()
    # Drain: reliable workers and signals until every execution finished.
    for _ in range(200):
        if sim.store.all_finished():
            break
        sim.drain_round()
    assert sim.store.all_finished(), "an execution (or a child) is still running"
    for eid in sim.executions:
        sim.check(eid)
        sim.check_final(eid)
    sim.check_memory()
    sim.check_answers()
    # A restart answers exactly what the running engine answered.
    answered = {eid: sim.engine.get(eid) for eid in sim.executions}
    sim.crash()
    assert {eid: sim.engine.get(eid) for eid in sim.executions} == answered
    sim.engine.close()
    return len(sim.executions)


def patch_chaos(setattr: Callable[[object, str, Any], None]) -> None:
    """Puts the simulation's faulty pieces into the engine's modules (with
    pytest's monkeypatch here, with the builtin in sim_long.py's processes)."""
    setattr(executions_module, "decide", _chaotic_decide)
    setattr(executions_module, "threading", types.SimpleNamespace(Thread=InlineThread))
    patch_definitions(setattr)


def patch_definitions(setattr: Callable[[object, str, Any], None]) -> None:
    """Deploys and loads of the pool's definitions use the copies checked,
    decoded and planned once per process (a definition is immutable: the
    same document always checks and decodes to the same value)."""
    setattr(service_module, "checked_definition", _checked)
    setattr(recovery_module, "ir", types.SimpleNamespace(from_json=_decoded, IRError=ir.IRError))
    setattr(recovery_module, "Plan", _plan)


@pytest.fixture
def chaos(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    patch_chaos(monkeypatch.setattr)
    yield
    _CURRENT[0] = Faults()


# The seeds are dealt out to shards (seed % SHARDS), which pytest-xdist runs
# side by side.
SHARDS = 8


@pytest.mark.timeout(900)
@pytest.mark.parametrize("shard", range(SHARDS))
def test_simulation(chaos: None, shard: int) -> None:
    if ONLY and int(ONLY) % SHARDS != shard:
        pytest.skip(f"ORBIT_SIM_SEED={ONLY} runs in shard {int(ONLY) % SHARDS}")
    seeds = [int(ONLY)] if ONLY else range(shard, SEEDS, SHARDS)
    if not seeds:
        pytest.skip(f"ORBIT_SIM_SEEDS={SEEDS} leaves shard {shard} empty")
    executions = 0
    for seed in seeds:
        try:
            executions += run_seed(seed)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from exc
    assert executions > 0


def step_slots_out(
    state: ExecutionState, plan: Plan
) -> Iterator[tuple[tuple[str, str, str], str, int]]:
    """The attempts of `state` out (DISPATCHED) under a step `concurrency`:
    (scope: workflow, step, key text), holder `<execution>/<unit>`, limit."""
    execution = {"id": state.id, "workflow": state.workflow, "version": state.version}
    for unit in state.units.values():
        spec = plan.spec(unit.key)
        if spec is None or unit.status != "DISPATCHED" or ":" in unit.key:
            continue
        gate = spec.step.flow.concurrency if spec.step.flow is not None else None
        if gate is None:
            continue
        key = flow_keys.key_text(gate.key, state.input, execution)
        yield (state.workflow, spec.step.name, key), f"{state.id}/{unit.key}", gate.limit
