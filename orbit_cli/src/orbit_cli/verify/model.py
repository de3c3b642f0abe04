"""One execution as a transition system over its history.

A `Node` is a point of an execution: its folded state, the history that
led there, the simulated time and how many environment choices were made.
`Model.choices(node)` lists what the world may do next; `Model.take(node,
choice)` records it as the runtime would (the external event: a worker's
result, a lost worker, a signal, a cancellation, or the clock moving on)
and then lets the real decider (`orbit_core.decide.decide`, applied with
`orbit_core.state.apply`) run until it has nothing more to say, handing
every scheduled task to a worker at once, as the engine does when workers
are idle. So every decided event is the kernel's own; the model only plays
the environment, and the history it writes replays consistently.

What the environment may do at a node, each once per choice:

- a dispatched task attempt: succeed with each generated output (the
  `orbit simulate` sample of the contract's output type, and a second one
  of zero values, so both sides of a condition on an output are reached),
  fail retryably (`TEMPORARY`), fail for good (`PERMANENT`), fail with each
  code of the step's `non_retryable` list, or lose its worker (at most
  `losses` times per unit; the attempt is redelivered). A compensation's
  attempt only succeeds or fails retryably while its retry policy has
  attempts left: compensations are assumed to succeed in the end (the saga
  assumption), otherwise every compensable workflow would break the
  built-in compensation invariant through no fault of its own;
- a child workflow's attempt: complete (with each generated output), fail,
  be cancelled or time out, delivered as the engine reports a child's end;
- each declared signal, up to `signals` times per name, with each
  generated payload;
- a task whose step has a `queue_timeout`: waits in its queue until the
  environment picks it up (a worker takes it) or the clock reaches the queue
  deadline first, so the decider's QUEUE_TIMEOUT is explored; a task without
  one is taken at once;
- a cancellation, while nothing has aborted the execution yet;
- the clock moving to the next due time (a timer, a retry, an attempt's or
  an await's deadline, the workflow's timeout): that is how attempts time
  out and how timers race signals.

Not modelled: the history and
fan-out limits, built-in tasks' runtime restarts, the run after a
`continue_as_new` (its end is an end), and the inside of child workflows
(only their outcomes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import orjson

from orbit_cli.simulate import sample
from orbit_core import events as ev
from orbit_core import unitkeys
from orbit_core import values as _values
from orbit_core.api import UNIT_DISPATCHED, UNIT_SCHEDULED
from orbit_core.decide import Limits, decide, next_due_ms
from orbit_core.ir import ChildContract, Definition, TaskContract
from orbit_core.ir.expr import Expr, StepRef
from orbit_core.ir.types import ListType, MapType, OptionalType, Primitive, RecordType, Type
from orbit_core.ir.walk import all_steps, walk
from orbit_core.jsontypes import JsonValue
from orbit_core.plan import Plan, UnitSpec
from orbit_core.state import ExecutionState, Unit, apply

EXECUTION_ID = "verify"
WORKER_ID = "verify-worker"
WORKER_SESSION = "verify-session"
RUNTIME_WORKER = "orbit-runtime"
# 2026-01-01T00:00:00Z, where the simulator's clock starts too.
START_MS = 1_767_225_600_000
CANCEL_REASON = "requested via API"
LOST_REASON = f"worker `{WORKER_ID}` stopped responding"
RETRYABLE_CODE = "TEMPORARY"
PERMANENT_CODE = "PERMANENT"
CHILD_FAILED_CODE = "CHILD_FAILED"
_OWN_CODES = frozenset({RETRYABLE_CODE, PERMANENT_CODE, "TIMEOUT"})
# Decider iterations at one instant before the model gives up (a loop of
# decisions that never settles would be a kernel bug).
_MAX_ITERATIONS = 10_000

_ZERO: dict[str, JsonValue] = {
    "int": 0,
    "float": 0.0,
    "bool": False,
    "bytes": "",
    "duration": 0,
    "timestamp": "1970-01-01T00:00:00Z",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def zero(t: Type) -> JsonValue:
    """The other generated value of `t`: zeros, false, empty lists, nulls."""
    match t:
        case Primitive("string"):
            return ""
        case Primitive("json"):
            return None
        case Primitive(kind):
            return _ZERO[kind]
        case ListType():
            return []
        case MapType():
            return {}
        case OptionalType():
            return None
        case RecordType(fields):
            return {f.name: f.default if f.has_default else zero(f.type) for f in fields}
    raise AssertionError(f"unknown type {t!r}")


def values_of(t: Type) -> list[JsonValue]:
    """The generated values of `t`, each conforming to it, without repeats."""
    found: list[JsonValue] = []
    for candidate in (sample(t), zero(t)):
        try:
            value = _values.conform(candidate, t)
        except _values.ValidationError:
            continue
        if value not in found:
            found.append(value)
    return found


def control_steps(definition: Definition) -> frozenset[str]:
    """The steps whose outputs decide what runs: read by a `when`, a `for`,
    the `continue_as_new` condition, or a compute step that is itself one.
    Only their answers are generated twice (sample and zeros); any other
    output only flows into data, where one value is as good as another."""
    found: set[str] = set()

    def refs(expr: Expr | None) -> set[str]:
        if expr is None:
            return set()
        return {x.name for x in walk(expr) if isinstance(x, StepRef)}

    for step in all_steps(definition):
        found |= refs(step.when)
        if step.for_each is not None:
            found |= refs(step.for_each.over)
    if definition.continue_as_new is not None:
        found |= refs(definition.continue_as_new.when)
    computes = {s.name: s.compute for s in all_steps(definition) if s.compute is not None}
    pending = list(found)
    while pending:
        name = pending.pop()
        for ref in refs(computes.get(name)) - found:
            found.add(ref)
            pending.append(ref)
    return frozenset(found)


@attrs.frozen
class Choice:
    """One thing the environment does. `kind` is succeed, fail, lose, child,
    pickup, signal, cancel or advance; `unit` the unit it answers, if any."""

    kind: str
    unit: str | None = None
    value: Any = None
    code: str | None = None
    retryable: bool = False

    @property
    def label(self) -> str:
        if self.kind == "fail":
            return f"fails {self.code}" + (" (retryable)" if self.retryable else "")
        if self.kind == "child":
            return f"child {self.code}"
        return {"succeed": "succeeds", "lose": "worker lost", "pickup": "picked up"}.get(
            self.kind, self.kind
        )


@attrs.define(slots=True)
class Node:
    state: ExecutionState
    events: tuple[ev.Event, ...]
    now: int
    depth: int
    parent: Node | None = None
    choice: Choice | None = None


class ModelError(RuntimeError):
    """The kernel did something the model cannot follow (never expected)."""


class Model:
    def __init__(
        self,
        definition: Definition,
        *,
        signals: int = 1,
        losses: int = 1,
        limits: Limits | None = None,
        codes: Sequence[str] = (),
    ) -> None:
        self.definition = definition
        # Error codes the invariants name (`error "CARD_DECLINED"`): a worker
        # may report each of them too, as a retryable failure.
        self.codes = tuple(c for c in dict.fromkeys(codes) if c not in _OWN_CODES)
        self.plan = Plan(definition)
        self.signals = signals
        self.losses = losses
        self.limits = (limits or Limits()).effective(self.plan)
        self._outputs: dict[str, list[JsonValue]] = {}
        self.control = control_steps(definition)
        handled = {h.signal for h in definition.events}
        awaited = {step.signal for step in all_steps(definition) if step.name in self.control}
        self._payloads = {
            s.name: values_of(s.payload)
            if s.name in handled or s.name in awaited
            else values_of(s.payload)[:1]
            for s in definition.signals
        }

    # ------------------------------------------------------------ the start

    def start(self, value: JsonValue) -> Node:
        d = self.definition
        value = _values.conform({} if value is None else value, d.input, strict=True)
        state = ExecutionState(EXECUTION_ID)
        node = Node(state, (), START_MS, 0)
        self._record(
            node,
            [
                ev.WorkflowCreated(1, START_MS, d.name, d.version, d.definition_hash, value),
                ev.WorkflowStarted(2, START_MS),
            ],
        )
        self._settle(node)
        return node

    # ------------------------------------------------------------ choices

    def choices(self, node: Node) -> list[Choice]:
        state = node.state
        if state.terminal:
            return []
        found: list[Choice] = []
        for key in sorted(state.units):
            unit = state.units[key]
            if unit.status == UNIT_DISPATCHED:
                found.extend(self._answers(unit))
            elif unit.status == UNIT_SCHEDULED and self._queued(key):
                found.append(Choice("pickup", key))
        for signal in self.definition.signals:
            sent = sum(1 for s in state.signals if s["name"] == signal.name)
            if sent < self.signals:
                found.extend(
                    Choice("signal", None, p, signal.name) for p in self._payloads[signal.name]
                )
        if state.abort is None:
            found.append(Choice("cancel"))
        if next_due_ms(state, self.plan) is not None:
            found.append(Choice("advance"))
        return found

    def _answers(self, unit: Unit) -> Iterator[Choice]:
        spec = self.plan.spec(unit.key)
        if spec is None:
            raise ModelError(f"no unit spec for dispatched unit `{unit.key}`")
        key = unit.key
        if spec.is_child:
            for output in self._output_values(spec):
                yield Choice("succeed", key, output)
            for status in ("FAILED", "CANCELLED", "TIMED_OUT"):
                yield Choice("child", key, None, status)
            return
        for output in self._output_values(spec):
            yield Choice("succeed", key, output)
        retry = spec.retry
        # A retryable failure of the last attempt ends the step as a
        # permanent one does, so it is only offered while a retry remains.
        if unit.attempt < retry.attempts:
            yield Choice("fail", key, None, RETRYABLE_CODE, True)
        if not unitkeys.is_compensation(key):
            yield Choice("fail", key, None, PERMANENT_CODE, False)
            for code in dict.fromkeys((*retry.non_retryable, *self.codes)):
                yield Choice("fail", key, None, code, True)
        if not spec.is_builtin and unit.dispatch_count - unit.attempt < self.losses:
            yield Choice("lose", key)

    def _output_values(self, spec: UnitSpec) -> list[JsonValue]:
        task = spec.task or ""
        found = self._outputs.get(task)
        if found is None:
            contract = self.plan.contract(task)
            if isinstance(contract, (TaskContract, ChildContract)):
                found = values_of(contract.output)
            else:
                found = [{}]
            self._outputs[task] = found
        if spec.step.name in self.control and not unitkeys.is_compensation(spec.step.name):
            return found
        return found[:1]

    # ------------------------------------------------------------ transitions

    def take(self, node: Node, choice: Choice) -> Node:
        """The node after `choice` and everything the decider does about it."""
        child = Node(clone(node.state), node.events, node.now, node.depth + 1, node, choice)
        state = child.state
        seq = state.last_seq + 1
        now = child.now
        kind = choice.kind
        external: ev.Event
        if kind == "succeed":
            assert choice.unit is not None
            unit = state.units[choice.unit]
            external = ev.StepSucceeded(seq, now, choice.unit, unit.attempt, choice.value)
        elif kind == "fail":
            assert choice.unit is not None and choice.code is not None
            unit = state.units[choice.unit]
            spec = self.plan.spec(choice.unit)
            task = spec.task if spec is not None else ""
            error = ev.make_error(choice.code, f"simulated failure of `{task}`", choice.retryable)
            external = ev.StepAttemptFailed(seq, now, choice.unit, unit.attempt, error)
        elif kind == "lose":
            assert choice.unit is not None
            unit = state.units[choice.unit]
            external = ev.StepAttemptUncertain(seq, now, choice.unit, unit.attempt, LOST_REASON)
        elif kind == "child":
            assert choice.unit is not None
            unit = state.units[choice.unit]
            external = ev.StepAttemptFailed(
                seq, now, choice.unit, unit.attempt, self._child_error(choice.unit, choice.code)
            )
        elif kind == "signal":
            assert choice.code is not None
            external = ev.SignalReceived(seq, now, choice.code, choice.value)
        elif kind == "cancel":
            external = ev.CancelRequested(seq, now, CANCEL_REASON)
        elif kind == "pickup":
            assert choice.unit is not None
            self._dispatch(child, picked=choice.unit)
            self._settle(child)
            return child
        else:
            due = next_due_ms(state, self.plan)
            if due is None:
                raise ModelError("nothing is due")
            child.now = max(due, now + 1) if due <= now else due
            self._settle(child)
            return child
        self._record(child, [external])
        self._settle(child)
        return child

    def _child_error(self, key: str, status: str | None) -> ev.ErrorJson:
        spec = self.plan.spec(key)
        name = spec.step.workflow if spec is not None else ""
        cid = unitkeys.child_execution_id(EXECUTION_ID, 1, key)
        details: dict[str, JsonValue] = {"child_execution_id": cid}
        if status == "FAILED":
            return ev.make_error(
                CHILD_FAILED_CODE,
                f"child workflow `{name}` failed: simulated failure",
                False,
                details,
            )
        if status == "CANCELLED":
            return ev.make_error(
                "CHILD_CANCELLED", f"child workflow `{name}` was cancelled", False, details
            )
        return ev.make_error(
            "CHILD_TIMED_OUT", f"child workflow `{name}` timed out", False, details
        )

    # ------------------------------------------------------------ the decider loop

    def _record(self, node: Node, events: list[ev.Event]) -> None:
        for event in events:
            apply(node.state, event)
        node.events = node.events + tuple(events)

    def _settle(self, node: Node) -> None:
        """Decides until the decider is silent, dispatching what it schedules."""
        for _ in range(_MAX_ITERATIONS):
            state = node.state
            batch = decide(state, self.plan, node.now, self.limits)
            if batch:
                self._record(node, batch)
                continue
            if state.terminal:
                return
            dispatched = self._dispatch(node)
            if not dispatched:
                return
        raise ModelError("the decider did not settle")

    def _queued(self, key: str) -> bool:
        """Whether a scheduled unit waits for a worker to pick it up: a
        worker task whose step sets a queue timeout."""
        spec = self.plan.spec(key)
        return (
            spec is not None
            and spec.queue_timeout_ms is not None
            and not spec.is_child
            and not spec.is_builtin
        )

    def _dispatch(self, node: Node, picked: str | None = None) -> bool:
        """Hands every scheduled unit to its worker, except those that wait
        in a queue (`_queued`), which only `picked` names."""
        state = node.state
        batch: list[ev.Event] = []
        for key in sorted(state.units):
            unit = state.units[key]
            if unit.status != UNIT_SCHEDULED:
                continue
            if key != picked and self._queued(key):
                continue
            spec = self.plan.spec(key)
            if spec is None:
                raise ModelError(f"no unit spec for scheduled unit `{key}`")
            deadline = None if spec.timeout_ms is None else node.now + spec.timeout_ms
            token = f"{key}#{unit.dispatch_count + 1}"
            if spec.is_child:
                cid = unitkeys.child_execution_id(EXECUTION_ID, state.run, key)
                worker, session = RUNTIME_WORKER, f"child:{cid}"
            elif spec.is_builtin:
                worker, session = RUNTIME_WORKER, f"builtin:{key}"
            else:
                worker, session = WORKER_ID, WORKER_SESSION
            batch.append(
                ev.StepDispatched(
                    state.last_seq + len(batch) + 1,
                    node.now,
                    key,
                    unit.attempt,
                    token,
                    worker,
                    session,
                    deadline,
                )
            )
        self._record(node, batch)
        return bool(batch)


# ---------------------------------------------------------------- state

_UNIT_FIELDS = tuple(a.name for a in attrs.fields(Unit))
_LIST_FIELDS = ("tokens", "answered")


def clone(state: ExecutionState) -> ExecutionState:
    """A copy of `state` that shares nothing mutable with it (the fold
    mutates its state in place; a copy is far cheaper than folding again)."""
    copy = attrs.evolve(
        state,
        units={key: _clone_unit(unit) for key, unit in state.units.items()},
        compensation_order=None
        if state.compensation_order is None
        else list(state.compensation_order),
        signals=[dict(s) for s in state.signals],  # type: ignore[misc]
        outputs=dict(state.outputs),
        instances=list(state.instances),
        main_scope=None,
    )
    copy.set_status(state.status)
    return copy


def _unit_copier() -> Callable[[Unit], Unit]:
    # Built once from Unit's fields: a positional constructor call copies a
    # unit several times faster than getattr/setattr in a loop.
    args = ", ".join(
        f"list(u.{name}) if u.{name} is not None else None" if name in _LIST_FIELDS else f"u.{name}"
        for name in _UNIT_FIELDS
    )
    namespace: dict[str, Any] = {"Unit": Unit}
    exec(f"def copy(u):\n    return Unit({args})\n", namespace)
    copier: Callable[[Unit], Unit] = namespace["copy"]
    return copier


_clone_unit = _unit_copier()


# Unit fields that only say how the attempt reached a worker (a lost
# worker's redelivery changes them and nothing else) or when something
# happened in the past, which no later decision reads.
_UNIT_IGNORED = (
    "succeeded_seq",
    "dispatch_count",
    "token",
    "tokens",
    "redelivery",
    "worker_id",
    "worker_session",
    "finished_at_ms",
)


def fingerprint(node: Node) -> bytes:
    """What identifies a node for the search: its state, with every time
    relative to the clock and without what no later decision reads (event
    numbers, the order in which units finished, tokens and workers, past
    times), so that independent outcomes reached in either order, a
    redelivery and the dispatch it repeats, and the same situation reached
    at another time all meet."""
    now = node.now
    state = node.state
    doc: dict[str, Any] = dict(state.to_json())
    for name in ("updated_at_ms", "last_seq", "finished_at_ms"):
        doc.pop(name, None)
    doc["created_at_ms"] = state.created_at_ms - now
    units = {}
    for key, unit in doc["units"].items():
        entry: dict[str, Any] = dict(unit)
        for name in _UNIT_IGNORED:
            entry.pop(name, None)
        # A time in the past matters only when it is now (`due` waits a tick
        # after a timer set in the same batch); a time to come, by how far.
        for name in ("scheduled_at_ms", "dispatched_at_ms"):
            if name in entry:
                entry[name] = entry[name] == now
        for name in ("deadline_ms", "wake_at_ms"):
            if entry.get(name) is not None:
                entry[name] -= now
        units[key] = entry
    doc["units"] = units
    if "signals" in doc:
        doc["signals"] = [
            {k: v for k, v in signal.items() if k != "received_at_ms"} for signal in doc["signals"]
        ]
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
