"""The search: breadth first over the model's nodes, with state hashing.

Breadth first, so the first violation of an invariant found is one of the
shortest (fewest environment choices), which makes its counterexample the
easiest to read; the frontier is one level of the search at a time.

State hashing: a node whose fingerprint (`model.fingerprint`: the folded
state without event numbers and without the order in which units
finished, plus the clock) was seen before is not explored again. That is
also the partial-order reduction: outcomes of concurrent attempts that
commute (A then B, B then A) meet in one state, which is explored once,
in the order met first; choices are listed in a fixed order (units by key,
then signals, cancellation, the clock), so that order is canonical.

Invariants are checked as nodes are reached: the user's (chapter 51
expectations, with conditions) and the built-in ones at the end of an
execution, the built-in liveness one at a node where nothing can happen,
and the kernel's (no second run of a unit, no undeclared contract) on
every event recorded.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from orbit_cli.testrun import check_expectation
from orbit_cli.verify.model import Model, Node, fingerprint
from orbit_core import events as ev
from orbit_core import unitkeys
from orbit_core.api import UNIT_DISPATCHED, UNIT_SCHEDULED, UNIT_SUCCEEDED, UNIT_WAITING
from orbit_core.decide import next_due_ms
from orbit_core.ir import TaskContract
from orbit_lang.testplan import Expectation, Invariant

ENDED_BADLY = frozenset({"FAILED", "CANCELLED", "TIMED_OUT"})
CHECKED_ENDS = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"})
SETTLED = ("SUCCEEDED", "SKIPPED", "FAILED", "CANCELLED")
BUILT_IN = {
    "progress": "the execution always ends or waits on something that can still happen",
    "compensation": "every compensable step that succeeded is compensated when the execution "
    "fails, is cancelled or times out",
    "once": "no step runs twice except through retry or a loop",
    "contracts": "no task is dispatched whose contract the workflow does not declare",
}


@attrs.frozen
class Bounds:
    depth: int = 60
    max_states: int = 200_000
    signals: int = 1
    losses: int = 1
    # Wall-clock seconds before the search stops (None: no limit); the
    # language server's verify-on-save uses it so a save never waits long.
    seconds: float | None = None


@attrs.frozen
class Violation:
    # `invariant:<n>` for the nth user invariant, else a BUILT_IN key.
    key: str
    invariant: str
    message: str
    node: Node
    user: Invariant | None = None


@attrs.define
class Coverage:
    # Unit (normalised key) -> settled statuses seen; None for reached only.
    units: dict[str, set[str]] = attrs.field(factory=dict)
    # Task -> outcome labels explored.
    tasks: dict[str, set[str]] = attrs.field(factory=dict)
    ends: dict[str, int] = attrs.field(factory=dict)


@attrs.frozen
class Result:
    workflow: str
    version: str
    input: Any
    states: int
    transitions: int
    paths: int
    unfinished: int
    max_depth: int
    seconds: float
    # Why the search stopped early: "" when it covered every reachable node.
    truncated: str
    violations: tuple[Violation, ...]
    coverage: Coverage
    declared: tuple[str, ...]


def explore(
    model: Model,
    value: Any,
    invariants: Sequence[Invariant] = (),
    bounds: Bounds = Bounds(),
    clock: Callable[[], float] = time.perf_counter,
) -> Result:
    began = clock()
    checker = _Checker(model, invariants)
    coverage = Coverage()
    root = model.start(value)
    seen = {fingerprint(root)}
    frontier: deque[Node] = deque([root])
    transitions = paths = unfinished = max_depth = 0
    truncated = ""
    found: dict[str, Violation] = {}

    def reach(node: Node) -> bool:
        """Checks `node`; False when it is not to be expanded."""
        nonlocal paths, unfinished, max_depth
        max_depth = max(max_depth, node.depth)
        _cover(coverage, model, node)
        problems = checker.at(node)
        for violation in problems:
            found.setdefault(violation.key, violation)
        state = node.state
        if state.terminal:
            paths += 1
            coverage.ends[state.status] = coverage.ends.get(state.status, 0) + 1
            return False
        if any(v.key in ("progress", "once", "contracts") for v in problems):
            paths += 1
            return False
        return True

    if not reach(root):
        frontier.clear()
    while frontier:
        if bounds.seconds is not None and clock() - began >= bounds.seconds:
            truncated = f"time bound {bounds.seconds:g}s reached"
            break
        node = frontier.popleft()
        choices = model.choices(node)
        if node.depth >= bounds.depth:
            truncated = truncated or f"depth bound {bounds.depth} reached"
            unfinished += 1
            continue
        if not choices:
            unfinished += 1
            paths += 1
            continue
        for choice in choices:
            child = model.take(node, choice)
            transitions += 1
            _cover_outcomes(coverage, model, node, child)
            key = fingerprint(child)
            if key in seen:
                continue
            if len(seen) >= bounds.max_states:
                truncated = f"state bound {bounds.max_states} reached"
                frontier.clear()
                break
            seen.add(key)
            if reach(child):
                frontier.append(child)
    order = {k: i for i, k in enumerate(BUILT_IN)}
    violations = sorted(
        found.values(),
        key=lambda v: (v.key.startswith("invariant:"), order.get(v.key, 0), v.key),
    )
    return Result(
        model.definition.name,
        model.definition.version,
        root.state.input,
        len(seen),
        transitions,
        paths,
        unfinished,
        max_depth,
        clock() - began,
        truncated,
        tuple(violations),
        coverage,
        declared_units(model),
    )


# ---------------------------------------------------------------- invariants


class _Checker:
    def __init__(self, model: Model, invariants: Sequence[Invariant]) -> None:
        self.model = model
        self.plan = model.plan
        self.invariants = invariants
        self.compensated_by: dict[str, str] = {
            name: c.compensated_by
            for name, c in model.definition.contracts.items()
            if isinstance(c, TaskContract) and c.compensated_by
        }

    def at(self, node: Node) -> list[Violation]:
        found = self._events(node)
        state = node.state
        if state.terminal:
            if state.status in CHECKED_ENDS:
                doc: Mapping[str, Any] = state.to_json()
                found += self._user(node, doc)
                if state.status in ENDED_BADLY:
                    found += self._compensation(node)
        elif self._stuck(node):
            found.append(
                Violation(
                    "progress",
                    BUILT_IN["progress"],
                    f"the execution waits on nothing that can still happen (status {state.status})",
                    node,
                )
            )
        return found

    def _user(self, node: Node, doc: Mapping[str, Any]) -> list[Violation]:
        found = []
        for index, invariant in enumerate(self.invariants):
            if any(check_expectation(c, doc) is not None for c in invariant.conditions):
                continue
            problem = check_expectation(invariant.expectation, doc)
            if problem is not None:
                found.append(
                    Violation(f"invariant:{index}", invariant.text, problem, node, invariant)
                )
        return found

    def _compensation(self, node: Node) -> list[Violation]:
        state = node.state
        units = state.units
        found = []
        for key in sorted(units):
            unit = units[key]
            if unit.status != UNIT_SUCCEEDED or not unitkeys.is_main_block(key):
                continue
            if unitkeys.is_event(key):
                continue
            spec = self.plan.spec(key)
            if spec is None or spec.is_child:
                continue
            if spec.step.for_each is not None and not unitkeys.is_element(key):
                continue  # a `for` step is compensated element by element
            if spec.step.compensate is not None:
                if unitkeys.compensation(key) in units:
                    continue
                how = "its `compensate` block never ran"
            else:
                undo = self.compensated_by.get(spec.task or "")
                if undo is None:
                    continue
                if any(self._calls(other, undo) for other in units):
                    continue
                how = (
                    f"its task `{spec.task}` is compensated by `{undo}`, which nothing called "
                    "(the step has no `compensate` block)"
                )
            found.append(
                Violation(
                    "compensation",
                    BUILT_IN["compensation"],
                    f"step `{key}` succeeded and the execution ended {state.status}, but {how}",
                    node,
                )
            )
            break
        return found

    def _calls(self, key: str, task: str) -> bool:
        spec = self.plan.spec(key)
        return spec is not None and spec.task == task

    def _stuck(self, node: Node) -> bool:
        state = node.state
        if next_due_ms(state, self.plan) is not None:
            return False
        for key, unit in state.units.items():
            if unit.status in (UNIT_DISPATCHED, UNIT_SCHEDULED):
                return False  # a worker has it, or may still pick it up
            if unit.status == UNIT_WAITING:
                spec = self.plan.spec(key)
                if spec is not None and spec.step.kind == "await":
                    return False
        return True

    def _events(self, node: Node) -> list[Violation]:
        """The kernel's invariants over the events this node added."""
        parent = node.parent
        start = len(parent.events) if parent is not None else 0
        found: list[Violation] = []
        if parent is None:
            attempts: dict[str, int] = {}
        else:
            attempts = {key: unit.attempt for key, unit in parent.state.units.items()}
        contracts = self.model.definition.contracts
        for event in node.events[start:]:
            if isinstance(event, ev.StepScheduled):
                before = attempts.get(event.step, 0)
                if not event.redelivery and event.attempt <= before:
                    found.append(
                        Violation(
                            "once",
                            BUILT_IN["once"],
                            f"step `{event.step}` was scheduled again as attempt "
                            f"{event.attempt}, neither a retry nor a redelivery",
                            node,
                        )
                    )
                attempts[event.step] = event.attempt
                spec = self.plan.spec(event.step)
                task = spec.task if spec is not None else None
                if spec is None or (task is not None and task not in contracts):
                    found.append(
                        Violation(
                            "contracts",
                            BUILT_IN["contracts"],
                            f"step `{event.step}` was scheduled with task `{task}`, whose "
                            "contract the workflow does not declare",
                            node,
                        )
                    )
        return found


# ---------------------------------------------------------------- coverage

_ELEMENT = re.compile(r"\[\d+\]")
_INSTANCE = re.compile(r"@\d+")


def normalise(key: str) -> str:
    """A unit key without element indices or signal numbers."""
    return _INSTANCE.sub("", _ELEMENT.sub("", key))


def declared_units(model: Model) -> tuple[str, ...]:
    """Every unit the definition can run, as `normalise` names them."""
    d = model.definition
    keys = [s.name for s in d.steps]
    keys += [unitkeys.compensation(s.name) for s in d.steps if s.compensate is not None]
    for kind, steps in d.handlers.items():
        keys += [unitkeys.handler_prefix(kind) + s.name for s in steps]
    for handler in d.events:
        keys += [f"{unitkeys.EVENT}{handler.signal}:{s.name}" for s in handler.steps]
    return tuple(keys)


def _cover(coverage: Coverage, model: Model, node: Node) -> None:
    units = coverage.units
    for key, unit in node.state.units.items():
        if unitkeys.is_event(key) and ":" not in key[len(unitkeys.EVENT) :]:
            continue  # the instance itself, not one of its steps
        name = normalise(key)
        seen = units.get(name)
        if seen is None:
            seen = units[name] = set()
        if unit.status in SETTLED:
            seen.add(str(unit.status))


def _cover_outcomes(coverage: Coverage, model: Model, before: Node, after: Node) -> None:
    """Records the attempt outcomes the transition added, by task."""
    dispatched = {key for key, unit in before.state.units.items() if unit.status == UNIT_DISPATCHED}
    for event in after.events[len(before.events) :]:
        if not isinstance(event, (ev.StepSucceeded, ev.StepAttemptFailed, ev.StepAttemptUncertain)):
            continue
        if event.step not in dispatched:
            continue
        dispatched.discard(event.step)
        if isinstance(event, ev.StepSucceeded):
            label = "succeeds"
        elif isinstance(event, ev.StepAttemptUncertain):
            label = "worker lost"
        elif event.error["code"] == "TIMEOUT":
            label = "times out"
        else:
            label = f"fails {event.error['code']}"
        spec = model.plan.spec(event.step)
        task = (spec.task if spec is not None else None) or event.step
        coverage.tasks.setdefault(task, set()).add(label)


def expectation_text(e: Expectation) -> str:
    """An expectation as `expect` would be written (for generated tests)."""
    from orbit_cli.verify.literal import literal

    if e.kind == "status":
        return f"status {e.value}"
    if e.kind == "output":
        return f"output {literal(e.value)}"
    if e.kind == "error":
        return f'error "{e.value}"'
    if e.kind == "step_status":
        return f"step {e.step} {e.value}"
    if e.kind == "step_output":
        return f"step {e.step} output {literal(e.value)}"
    if e.kind == "step_attempts":
        return f"step {e.step} attempts {e.value}"
    if e.kind == "compensated":
        return f"compensated {e.step}"
    return f"runs {e.value}"
