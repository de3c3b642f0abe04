"""Runs one execution on the embedded engine with simulated time: the
machinery under `orbit test` and `orbit simulate` (chapters 51 and 52).

Each run gets a fresh `orbit_core` engine (in-memory store, simulated clock
from 2026-01-01T00:00:00Z, sequential ids), every workflow deployed children
first, and one simulated worker per language the steps ask for
(`simulator-python` always, `simulator-<lang>` for each `using`), each
announcing every task contract. Only the engine's public API is used, so the
events, retries, timeouts and contract checks are the runtime's own.

The loop: hand every queued task to the workers (all polls first, then all
answers, as independent workers would), answer each with the `Responder`;
send the next signal once a step waits for it (or an event handler accepts
it); when nothing else can happen, jump the clock to the next due time.
It stops when the execution ends, when nothing is due (the run cannot make
progress: the reason is reported), when a task has no answer (an unmocked
task), or after `MAX_SIMULATED_MS` of simulated time.

Built-in tasks (`orbit.http.request`) never leave the runtime; they are
answered through the engine's built-in task port by the same responder, so
no network request is ever made. The port does not say which step a call
belongs to, so a built-in's calls are counted per task rather than per unit.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from orbit_core.engine import Engine
from orbit_core.ir import ChildContract, Definition
from orbit_core.memory_store import MemoryStore
from orbit_core.plan import Plan
from orbit_core.ports import DefinitionRow
from orbit_core.testing import SimulatedClock, simulated_engine

EXECUTION_ID = "sim"
# Sessions of simulated workers never time out: the clock jumps over hours.
_SESSION_TIMEOUT_MS = 1000 * 365 * 24 * 3600 * 1000
MAX_SIMULATED_MS = 100 * 365 * 24 * 3600 * 1000
# Ticks at one instant in a row before the run is declared stuck (a loop
# that never lets time pass).
_MAX_STILL_TICKS = 10_000
_BUILTIN_WAIT_S = 10.0
FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"})


@attrs.frozen
class Succeed:
    output: Any


@attrs.frozen
class Fail:
    code: str
    message: str
    retryable: bool


@attrs.frozen
class Hang:
    pass


@attrs.frozen
class Unanswered:
    """The task cannot be answered; the run stops with `problem`."""

    problem: str


Answer = Succeed | Fail | Hang | Unanswered


@attrs.frozen
class Call:
    """One call of a task: what a worker would receive, and which call of
    its unit this is (1 for the first attempt; redeliveries count)."""

    task: str
    input: Any
    execution_id: str
    workflow: str
    version: str
    step: str | None
    call: int


Responder = Callable[[Call], Answer]


@attrs.frozen
class SignalSend:
    name: str
    payload: Any


@attrs.frozen
class Execution:
    """A finished (or stopped) execution: its state document and history."""

    id: str
    state: dict[str, Any]
    history: list[dict[str, Any]]


@attrs.frozen
class Outcome:
    main: Execution
    children: tuple[Execution, ...]
    simulated_ms: int
    # Why the run stopped before the execution ended (empty if it ended).
    problems: tuple[str, ...]
    unsent_signals: tuple[str, ...]
    # Tasks whose answers came from the responder, by name.
    answered: frozenset[str]

    @property
    def status(self) -> str:
        return str(self.main.state.get("status"))

    @property
    def finished(self) -> bool:
        return self.status in FINAL


def languages(definitions: Iterable[Definition]) -> list[str]:
    """`python` first, then every other language a step asks for, sorted."""
    found: set[str] = set()
    for definition in definitions:
        for step in _all_steps(definition):
            if step.using:
                found.add(step.using.lower())
            if step.compensate is not None and step.compensate.using:
                found.add(step.compensate.using.lower())
    return ["python", *sorted(found - {"python"})]


def _all_steps(definition: Definition) -> Iterable[Any]:
    yield from definition.steps
    for steps in definition.handlers.values():
        yield from steps
    for handler in definition.events:
        yield from handler.steps


def _contracts(definitions: Sequence[Definition]) -> list[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for definition in definitions:
        for name, contract in definition.contracts.items():
            if isinstance(contract, ChildContract) or name.startswith(("workflow:", "orbit.")):
                continue
            pairs.add((name, contract.version))
    return sorted(pairs)


class _Builtins:
    """The engine's built-in task port, answered by the responder on the
    simulation's thread. `supports` is called as the engine dispatches (on
    the committing thread), `run` shortly after on a thread of its own: the
    simulation waits for each `run` it was told about."""

    def __init__(self) -> None:
        self.announced = 0
        self.received = 0
        self.calls: queue.Queue[tuple[str, Any, Callable[[Any, Any], None]]] = queue.Queue()
        self.lock = threading.Lock()

    def supports(self, task_name: str) -> bool:
        with self.lock:
            self.announced += 1
        return True

    def run(
        self,
        task_name: str,
        input: Any,
        timeout_ms: int | None,
        done: Callable[[Any, dict[str, Any] | None], None],
    ) -> None:
        self.calls.put((task_name, input, done))

    def pending(self) -> list[tuple[str, Any, Callable[[Any, Any], None]]]:
        """Every call announced so far, waiting for the ones still on their way."""
        out: list[tuple[str, Any, Callable[[Any, Any], None]]] = []
        while True:
            with self.lock:
                missing = self.announced - self.received
            if missing <= 0:
                return out
            out.append(self.calls.get(timeout=_BUILTIN_WAIT_S))
            with self.lock:
                self.received += 1


class Deployment:
    """Definitions deployed once (validated and hashed by a first engine),
    for many runs: each run's engine starts on a store that already holds
    them and loads them as an engine does on restart, which costs far less
    than deploying again."""

    def __init__(self, definitions: Sequence[Definition]) -> None:
        self.definitions = list(definitions)
        engine = simulated_engine()
        try:
            for definition in self.definitions:
                engine.deploy(definition)
            self.rows = engine.store.load_definitions()
        finally:
            engine.close()
        self.plans = {d.name: Plan(d) for d in self.definitions}
        self.contracts = _contracts(self.definitions)
        self.languages = languages(self.definitions)

    def store(self) -> MemoryStore:
        return _Preloaded(self.rows)


class _Preloaded(MemoryStore):
    def __init__(self, rows: list[DefinitionRow]) -> None:
        super().__init__()
        self._preloaded = rows

    def load_definitions(self) -> list[DefinitionRow]:
        return [*self._preloaded, *super().load_definitions()]


class Simulation:
    def __init__(
        self,
        deployment: Deployment,
        responder: Responder,
        *,
        execution_id: str = EXECUTION_ID,
    ) -> None:
        self.deployment = deployment
        self.plans = deployment.plans
        self.responder = responder
        self.execution_id = execution_id
        self.calls: dict[tuple[str, str], int] = {}
        self.builtin_calls: dict[str, int] = {}
        self.hanging: dict[str, Call] = {}
        self.problems: list[str] = []
        self.answered: set[str] = set()
        self.builtins = _Builtins()
        self.engine: Engine = simulated_engine(
            deployment.store(), session_timeout_ms=_SESSION_TIMEOUT_MS, builtins=self.builtins
        )
        clock = self.engine.clock
        assert isinstance(clock, SimulatedClock)
        self.clock = clock

    def run(
        self, workflow: str, version: str | None, input: Any, signals: Sequence[SignalSend] = ()
    ) -> Outcome:
        """Runs the execution to its end (or until it cannot go on)."""
        engine = self.engine
        try:
            contracts = self.deployment.contracts
            sessions = []
            if contracts:
                for language in self.deployment.languages:
                    registered = engine.workers.register(
                        f"simulator-{language}", language, contracts, sdk="orbit-simulator"
                    )
                    sessions.append(registered["worker_session_id"])
            start = self.clock.now_ms()
            engine.start(workflow, version, input, self.execution_id)
            pending = deque(signals)
            self._loop(sessions, pending, start)
            return self._outcome(start, pending)
        finally:
            engine.close()

    # ---- the loop

    def _loop(self, sessions: list[str], pending: deque[SignalSend], start: int) -> None:
        engine = self.engine
        still = 0
        while True:
            served = self._serve(sessions)
            if self.problems:
                return
            state = engine.get(self.execution_id)
            if state["status"] in FINAL:
                return
            if pending and self._accepts(state, pending[0].name):
                signal = pending.popleft()
                engine.signal(self.execution_id, signal.name, signal.payload)
                continue
            if served:
                continue
            due = engine.next_due_ms()
            if due is None:
                self.problems.append(
                    "the execution cannot make progress: " + self._stuck(state, pending)
                )
                return
            if due - start > MAX_SIMULATED_MS:
                self.problems.append(
                    "the execution did not finish within 100 years of simulated time"
                )
                return
            now = self.clock.now_ms()
            still = still + 1 if due <= now else 0
            if still > _MAX_STILL_TICKS:
                self.problems.append("the execution keeps deciding without time passing")
                return
            self.clock.advance(max(0, due - now))

    def _serve(self, sessions: list[str]) -> bool:
        """Polls every worker until no task is left, then answers them."""
        engine = self.engine
        served = False
        while True:
            tasks = []
            for session in sessions:
                while (task := engine.workers.poll(session, wait_ms=0)) is not None:
                    tasks.append(task)
            builtins = self.builtins.pending()
            if not tasks and not builtins:
                return served
            served = True
            for task in tasks:
                self._answer(task)
                if self.problems:
                    return served
            for name, value, done in builtins:
                self._answer_builtin(name, value, done)
                if self.problems:
                    return served

    def _answer(self, task: Mapping[str, Any]) -> None:
        key = (task["execution_id"], task["step_id"])
        self.calls[key] = count = self.calls.get(key, 0) + 1
        call = Call(
            task["task_name"],
            task["input"],
            task["execution_id"],
            task["workflow"],
            task["workflow_version"],
            task["step_id"],
            count,
        )
        answer = self.responder(call)
        token = task["token"]
        if isinstance(answer, Unanswered):
            self.problems.append(answer.problem)
            return
        self.answered.add(call.task)
        if isinstance(answer, Succeed):
            self.engine.workers.complete(token, answer.output)
        elif isinstance(answer, Fail):
            self.engine.workers.fail(token, answer.code, answer.message, answer.retryable)
        else:
            self.hanging[token] = call

    def _answer_builtin(self, name: str, value: Any, done: Callable[[Any, Any], None]) -> None:
        self.builtin_calls[name] = count = self.builtin_calls.get(name, 0) + 1
        answer = self.responder(Call(name, value, self.execution_id, "", "", None, count))
        if isinstance(answer, Unanswered):
            self.problems.append(answer.problem)
            return
        self.answered.add(name)
        if isinstance(answer, Succeed):
            done(answer.output, None)
        elif isinstance(answer, Fail):
            done(
                None,
                {"code": answer.code, "message": answer.message, "retryable": answer.retryable},
            )
        # A hanging built-in never calls `done`: its attempt times out.

    # ---- signals and stalls

    def _accepts(self, state: Mapping[str, Any], signal: str) -> bool:
        """Whether the execution now waits for `signal` (a step awaits it, or
        an event handler takes it)."""
        plan = self.plans.get(state["workflow"])
        if plan is None:
            return False
        if signal in plan.events:
            return True
        for key, unit in state["units"].items():
            if unit.get("status") == "WAITING":
                spec = plan.spec(key)
                if spec is not None and spec.step.kind == "await" and spec.step.signal == signal:
                    return True
        return False

    def _stuck(self, state: Mapping[str, Any], pending: deque[SignalSend]) -> str:
        plan = self.plans.get(state["workflow"])
        for key, unit in state["units"].items():
            status = unit.get("status")
            spec = plan.spec(key) if plan is not None else None
            if spec is None:
                continue
            if status == "WAITING" and spec.step.kind == "await":
                after = (
                    "no signal is left to send"
                    if not pending
                    else f"the next signal to send is `{pending[0].name}`"
                )
                return f"step `{key}` waits for signal `{spec.step.signal}`, and {after}"
            if status == "DISPATCHED" and unit.get("token") in self.hanging:
                return (
                    f"step `{key}` waits for task `{spec.task}`, whose mock hangs, "
                    "and the step has no timeout"
                )
        return "nothing is due and the execution has not finished"

    # ---- the result

    def _outcome(self, start: int, pending: deque[SignalSend]) -> Outcome:
        engine = self.engine
        state = engine.get(self.execution_id)
        main = Execution(
            self.execution_id, dict(state), engine.history(self.execution_id)["events"]
        )
        listed = engine.list_executions(limit=1000)["executions"]
        prefix = self.execution_id + "."
        children = tuple(
            Execution(
                row["execution_id"],
                dict(engine.get(row["execution_id"])),
                engine.history(row["execution_id"])["events"],
            )
            for row in sorted(listed, key=lambda r: (r["created_at_ms"], r["execution_id"]))
            if row["execution_id"].startswith(prefix)
        )
        end = state.get("finished_at_ms") if state["status"] in FINAL else None
        simulated = (end if isinstance(end, int) else self.clock.now_ms()) - start
        return Outcome(
            main,
            children,
            simulated,
            tuple(self.problems),
            tuple(s.name for s in pending),
            frozenset(self.answered),
        )
