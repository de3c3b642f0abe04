"""Deterministic simulation: seeded random workflows, workers that fail, hang,
answer twice or late, lost sessions, storage errors and crashes at random
commit points (the engine is dropped and rebuilt from its store). After every
action and at the end, the invariants must hold:

- no lost or duplicated success: every accepted success is in the history,
  and no unit succeeds twice in a run;
- every succeeded unit with a `compensate` block is compensated when its
  execution aborts;
- histories are gap-free (`seq` 1..n, created then started);
- folding the history reproduces the engine's live state.

`ORBIT_SIM_SEEDS` (default 1000) sets how many seeds run; any failure names its
seed, and `ORBIT_SIM_SEED=<n>` replays just that one.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from engine_kit import (
    Int,
    binop,
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

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.errors import OrbitError, StorageError
from orbit_core.ir import Compensation, ForEach, Retry, Signal
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch
from orbit_core.state import TERMINAL, fold
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine

SEEDS = int(os.environ.get("ORBIT_SIM_SEEDS", "1000"))
ONLY = os.environ.get("ORBIT_SIM_SEED")
WORK = task("t.work", rec(n=Int), rec(v=Int))
UNDO = task("t.undo", rec(v=Int), rec(ok=Int))


class FlakyMemoryStore(MemoryStore):
    """Fails the commits it is told to, as a full disk would."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_next = 0

    def commit(self, batch: CommitBatch) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise StorageError("disk I/O error (simulated)")
        super().commit(batch)


def random_workflow(rng: random.Random, name: str) -> Any:
    steps = []
    names: list[str] = []
    for i in range(rng.randint(1, 5)):
        sname = f"s{i}"
        after = rng.sample(names, k=min(len(names), rng.randint(0, 2)))
        kind = rng.choice(["task", "task", "task", "fan", "sleep", "compute", "await"])
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
        policy = {
            "retry": Retry(
                attempts=rng.randint(1, 3),
                backoff=rng.choice(["fixed", "exponential"]),
                initial_delay_ms=rng.choice([100, 500]),
            ),
            "timeout_ms": rng.choice([None, 2000]),
            "queue_timeout_ms": rng.choice([None, None, 20_000]),
        }
        if kind == "task":
            steps.append(
                step(
                    sname, task="t.work", with_=obj(n=i), compensate=compensate, **policy, **common
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
        [WORK, UNDO],
        input=rec(x=Int, items=lst(Int)),
        **extra,
    )


class Simulation:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        # Every fourth seed commits on the engine's committer thread.
        self.pipeline = seed % 4 == 0
        self.store = FlakyMemoryStore()
        self.clock = SimulatedClock()
        self.ids = SequentialIds()
        self.engine = self.open()
        self.sessions: list[str] = []
        self.held: list[dict[str, Any]] = []
        self.accepted: list[tuple[str, str, int]] = []
        self.executions: list[str] = []

    def open(self) -> Engine:
        while True:  # a server that cannot recover exits and is restarted
            try:
                return simulated_engine(
                    self.store,
                    self.clock,
                    ids=self.ids,
                    session_timeout_ms=3000,
                    pipeline=self.pipeline,
                )
            except StorageError:
                continue

    def crash(self) -> None:
        """Drops the engine (memory, sessions, its clock subscription) and
        rebuilds one from the store, as a restarted process would."""
        self.clock = SimulatedClock(self.clock.now_ms() + self.rng.choice([0, 500, 4000]))
        self.engine = self.open()
        self.sessions = []

    def call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except StorageError:
            return None
        except OrbitError as exc:
            assert exc.code in {
                "EXECUTION_FINISHED",
                "UNKNOWN_SESSION",
                "NOT_FOUND",
                "INVALID_REQUEST",
            }, exc
            return None

    def session(self) -> str | None:
        if not self.sessions or self.rng.random() < 0.05:
            reply = self.call(
                self.engine.register_worker,
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
            reply = self.engine.complete(task_["token"], output)
        except StorageError:
            self.held.append(task_)  # workers retry results until answered
            return
        if reply["accepted"]:
            self.accepted.append((task_["execution_id"], task_["step_id"], task_["attempt"]))

    def fail(self, task_: dict[str, Any], code: str, retryable: bool) -> None:
        try:
            self.engine.fail(task_["token"], code, "simulated", retryable)
        except StorageError:
            self.held.append(task_)

    def step(self, reliable: bool = False) -> None:
        rng, engine = self.rng, self.engine
        action = rng.random()
        if action < 0.35:
            session = self.session()
            if session is not None:
                task_ = self.call(engine.poll, session, 0)
                if task_ is not None:
                    self.answer(task_, reliable)
        elif action < 0.45 and self.held:
            task_ = self.held.pop(rng.randrange(len(self.held)))
            self.answer(task_, True)
        elif action < 0.6:
            for session in list(self.sessions):
                if rng.random() < 0.8:
                    self.call(engine.heartbeat, session)
            self.call(self.clock.advance, rng.choice([50, 100, 400, 1500]))
        elif action < 0.65 and self.executions and not reliable:
            self.call(engine.cancel, rng.choice(self.executions), "chaos")
        elif action < 0.75 and self.executions:
            self.call(engine.signal, rng.choice(self.executions), "go", {})
        elif action < 0.78 and not reliable:
            self.store.fail_next = 1
        elif action < 0.8 and not reliable:
            self.crash()
        elif action < 0.85 and self.sessions and not reliable:
            self.call(engine.unregister, self.sessions.pop(rng.randrange(len(self.sessions))))

    def check(self, execution_id: str) -> None:
        events = self.engine.events(execution_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1)), execution_id
        assert isinstance(events[0], ev.WorkflowCreated)
        assert isinstance(events[1], ev.WorkflowStarted)
        succeeded = [e.step for e in events if isinstance(e, ev.StepSucceeded)]
        assert len(succeeded) == len(set(succeeded)), f"{execution_id}: a unit succeeded twice"
        folded = fold(events, execution_id).to_json()
        assert folded == self.engine.get(execution_id), execution_id

    def check_final(self, execution_id: str, definitions: dict[str, Any]) -> None:
        state = self.engine.get(execution_id)
        assert state["status"] in TERMINAL, (execution_id, state["status"])
        units = state["units"]
        if state["status"] == "COMPLETED":
            assert not any(k.startswith("compensate:") for k in units)
            return
        defn = definitions[state["workflow"]]
        compensable = {s.name for s in defn.steps if s.compensate is not None}
        for key, unit in units.items():
            base = key.partition("[")[0]
            if ":" in key or base not in compensable or unit.get("status") != "SUCCEEDED":
                continue
            if "[" not in key and defn.step(base).for_each is not None:
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


def run_seed(seed: int) -> int:
    sim = Simulation(seed)
    rng = sim.rng
    definitions = {}
    for k in range(rng.randint(1, 3)):
        defn = random_workflow(rng, f"Wf{k}")
        definitions[defn.name] = defn
        while True:
            try:
                sim.engine.deploy(defn)
                break
            except StorageError:
                continue
    for i in range(rng.randint(3, 12)):
        eid = f"x-{seed}-{i}"
        wf = rng.choice(list(definitions))
        reply = sim.call(
            sim.engine.start,
            wf,
            None,
            {"x": rng.randint(0, 4), "items": list(range(rng.randint(0, 3)))},
            eid,
        )
        if reply is not None:
            sim.executions.append(eid)
    for _ in range(rng.randint(20, 120)):
        sim.step()
        if sim.executions and rng.random() < 0.3:
            sim.check(rng.choice(sim.executions))
    # Drain: reliable workers and signals until every execution finished.
    for _ in range(3000):
        if all(sim.engine.get(eid)["status"] in TERMINAL for eid in sim.executions):
            break
        sim.step(reliable=True)
        if rng.random() < 0.2:
            sim.call(sim.clock.advance, 1000)
    for eid in sim.executions:
        sim.check(eid)
        sim.check_final(eid, definitions)
    for eid, unit, _attempt in sim.accepted:
        state = sim.engine.get(eid)
        assert state["units"][unit]["status"] == "SUCCEEDED", (eid, unit)
    return len(sim.executions)


@pytest.mark.timeout(300)
def test_simulation() -> None:
    seeds = [int(ONLY)] if ONLY else range(SEEDS)
    executions = 0
    for seed in seeds:
        try:
            executions += run_seed(seed)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from exc
    assert executions > 0
