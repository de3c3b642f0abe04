"""What a restart or a fork keeps, what it runs again, and the effects it
repeats (issue 38, docs/restart-and-fork.md). Pure: a function of one run's
state and the definitions involved.

Restarting from step `S` runs `S` and every main step that depends on it,
directly or through others, again. Every other main step keeps its recorded
outcome when that outcome is a success or a skip, it was not compensated
(its effect was undone, so the value no longer stands for anything), and
every step it depends on is kept too. Anything else (a failure, a step
cancelled or still running, a step never reached) runs in the new run.

The effect preview lists every task step the new run will run, with its
task `name@version`, the contract's effect class (`unknown` when the
contract declares none), and whether its idempotency key stays the same:
a declared `idempotency_key` is computed again from the step's values,
while the default key names the run (and the execution), so a restart or a
fork gives it a new one. A step that ran before and whose task is `once`,
or `unknown` with a new key, is refused unless the caller forces it.

A fork may run on another version of the workflow. Its kept steps must then
mean the same in both versions, by the part of `orbit compat`'s rules that
applies to recorded values: the step exists in both, with the same kind,
the same task at the same contract version (workers are routed by exact
`name@version`) and output type, the same dependencies, and the
execution's input still fits the new version's input.
"""

from __future__ import annotations

import attrs

from orbit_core import unitkeys
from orbit_core import values as _values
from orbit_core.api import UNIT_SKIPPED, UNIT_SUCCEEDED, RepeatDoc
from orbit_core.ir import Definition, Step, TaskContract
from orbit_core.ir.codec import type_to_json
from orbit_core.jsontypes import JsonValue
from orbit_core.state import ExecutionState

UNKNOWN = "unknown"
SAME = "same"
NEW = "new"


@attrs.frozen
class Repeat:
    """One task step the new run runs: an entry of the effect preview."""

    step: str
    task: str  # name@version
    effect: str  # an effect class, or `unknown`
    key: str  # `same` or `new`
    ran: bool  # whether it ran in the source run
    refused: bool  # whether only --force allows it

    def to_json(self) -> RepeatDoc:
        return {
            "step": self.step,
            "task": self.task,
            "effect": self.effect,
            "idempotency_key": self.key,
            "ran_before": self.ran,
            "needs_force": self.refused,
        }


@attrs.frozen
class Outline:
    """A restart's or a fork's plan."""

    step: str
    kept: tuple[str, ...]  # main steps whose outcomes are copied
    rerun: tuple[str, ...]  # main steps the new run runs, in definition order
    restored: tuple[tuple[str, str, JsonValue], ...]  # (unit key, status, output)
    effects: tuple[Repeat, ...]

    @property
    def refused(self) -> tuple[Repeat, ...]:
        return tuple(r for r in self.effects if r.refused)


class RestartRefused(ValueError):
    """The step cannot be restarted from, or the versions do not match."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def dependents(defn: Definition, step: str) -> frozenset[str]:
    """`step` and every main step that depends on it, transitively."""
    found = {step}
    changed = True
    while changed:
        changed = False
        for s in defn.steps:
            if s.name not in found and any(d in found for d in s.depends_on):
                found.add(s.name)
                changed = True
    return frozenset(found)


def outline(
    state: ExecutionState,
    source: Definition,
    step: str,
    *,
    target: Definition | None = None,
    fork: bool = False,
) -> Outline:
    """The plan of restarting `state`'s run from `step` (or forking it onto
    `target`, the source's own definition when None)."""
    target = target or source
    if step not in {s.name for s in source.steps}:
        names = ", ".join(s.name for s in source.steps)
        raise RestartRefused(
            f"{source.key} has no step `{step}`; its steps: {names}", "UNKNOWN_STEP"
        )
    if step not in {s.name for s in target.steps}:
        raise RestartRefused(f"{target.key} has no step `{step}`", "INCOMPATIBLE_VERSION")
    again = dependents(source, step)
    compensated = {done for key in state.units if (done := unitkeys.compensated(key)) is not None}
    kept: dict[str, Step] = {}
    for s in source.steps:
        unit = state.units.get(s.name)
        if s.name in again or unit is None or unit.status not in (UNIT_SUCCEEDED, UNIT_SKIPPED):
            continue
        if any(unitkeys.step_name(k) == s.name for k in compensated):
            continue
        kept[s.name] = s
    # A kept step needs its dependencies kept: drop those that lost one.
    changed = True
    while changed:
        changed = False
        for name, s in list(kept.items()):
            if any(d not in kept for d in s.depends_on):
                del kept[name]
                changed = True
    if target is not source:
        _check_compatible(state, source, target, kept)
    restored = tuple(
        (key, str(unit.status), unit.output if unit.status == UNIT_SUCCEEDED else None)
        for key, unit in state.units.items()
        if unitkeys.is_main_block(key)
        and unitkeys.step_name(key) in kept
        and unit.status in (UNIT_SUCCEEDED, UNIT_SKIPPED)
    )
    rerun = tuple(s.name for s in target.steps if s.name not in kept)
    effects = tuple(
        _repeat(state, target, s, fork) for s in target.steps if s.name in rerun and s.task
    )
    return Outline(step, tuple(kept), rerun, restored, effects)


def _repeat(state: ExecutionState, defn: Definition, step: Step, fork: bool) -> Repeat:
    contract = defn.contracts.get(step.task or "")
    version = contract.version if contract is not None else "?"
    effect = UNKNOWN
    if isinstance(contract, TaskContract) and contract.effect is not None:
        effect = contract.effect
    key = SAME if step.idempotency_key is not None else NEW
    ran = any(
        unitkeys.step_name(k) == step.name and u.dispatch_count > 0
        for k, u in state.units.items()
        if unitkeys.is_main_block(k)
    )
    refused = ran and (effect == "once" or (effect == UNKNOWN and key == NEW))
    return Repeat(step.name, f"{step.task}@{version}", effect, key, ran, refused)


def _check_compatible(
    state: ExecutionState, source: Definition, target: Definition, kept: dict[str, Step]
) -> None:
    by_name = {s.name: s for s in target.steps}
    for name, old in kept.items():
        new = by_name.get(name)
        where = f"step `{name}`"
        if new is None:
            _incompatible(f"{where} is not in {target.key}")
        elif (old.kind, old.task, old.workflow) != (new.kind, new.task, new.workflow):
            _incompatible(f"{where} does something else in {target.key}")
        elif set(old.depends_on) != set(new.depends_on):
            _incompatible(f"{where} has other dependencies in {target.key}")
        elif old.task is not None:
            a, b = source.contracts.get(old.task), target.contracts.get(old.task)
            if a is None or b is None or a.version != b.version:
                _incompatible(
                    f"{where}: task `{old.task}` is "
                    f"{getattr(a, 'version', '?')} in {source.key} and "
                    f"{getattr(b, 'version', '?')} in {target.key}"
                )
            elif type_to_json(a.output) != type_to_json(b.output):
                _incompatible(f"{where}: task `{old.task}` returns another type in {target.key}")
    try:
        _values.conform(state.input, target.input, strict=True)
    except _values.ValidationError as exc:
        _incompatible(f"the execution's input does not fit {target.key} at {exc}")


def _incompatible(reason: str) -> None:
    raise RestartRefused(f"cannot fork onto this version: {reason}", "INCOMPATIBLE_VERSION")


def refusal_message(refused: tuple[Repeat, ...]) -> str:
    """The EFFECTS_REPEATED message, naming each step."""
    parts = [f"`{r.step}` ({r.task}, {r.effect}, {r.key} idempotency key)" for r in refused]
    return (
        "this would run again steps whose effects may repeat: "
        + ", ".join(parts)
        + "; pass --force to run them anyway"
    )
