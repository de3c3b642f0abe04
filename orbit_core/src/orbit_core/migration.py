"""Versions in production: the census of live executions per version and
the rules of live migration (docs/language/migration.md). Pure functions
over states and definitions; the engine (engine/migrations.py) applies them
to what it holds in memory.

A migration moves one execution from its definition (the *source*) to
another definition of the same workflow (the *target*) by one event,
`WorkflowMigrated`, which carries everything the fold needs (the new input,
the units renamed), so replay never needs the map itself. An execution is
moved only at a safe point: no attempt of any step is in flight (scheduled,
dispatched, waiting for a retry or uncertain), nothing is being undone or
handled, every started step has a counterpart in the target, and every
signal still buffered is one the target declares. Steps waiting on a timer
or a signal are safe: the wait carries on under the target's step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Literal, NotRequired, TypedDict

import attrs

from orbit_core import events as ev
from orbit_core import ir, unitkeys
from orbit_core import values as _values
from orbit_core.api import (
    UNIT_ATTEMPT_FAILED,
    UNIT_DISPATCHED,
    UNIT_RETRY_WAIT,
    UNIT_RUNNING,
    UNIT_SCHEDULED,
    UNIT_UNCERTAIN,
    UNIT_WAITING,
)
from orbit_core.eval.scope import Scope
from orbit_core.evaluate import EvalError, evaluate
from orbit_core.history import stamp
from orbit_core.ir.canonical import document_hash
from orbit_core.ir.codec import unstructure
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.semver import semver_key
from orbit_core.state import ExecutionState

# What `plan` says of one execution.
NOW: Final = "migratable"
LATER: Final = "at_safe_point"
NEVER: Final = "not_migratable"
Verdict = Literal["migratable", "at_safe_point", "not_migratable"]

# Unit statuses of an attempt in flight: the execution waits for its end.
_IN_FLIGHT = frozenset(
    {UNIT_SCHEDULED, UNIT_DISPATCHED, UNIT_RUNNING, UNIT_UNCERTAIN, UNIT_ATTEMPT_FAILED}
)


# ---------------------------------------------------------------- documents


class WaitCount(TypedDict):
    step: str
    kind: str  # task, timer, signal or child
    count: int


class VersionCensus(TypedDict):
    version: str
    definition_hash: str
    live: int
    paused: int
    waiting: list[WaitCount]
    tasks: list[str]
    drain: str  # current, draining or drained
    last_live_at_ms: int | None


class VersionsDoc(TypedDict):
    workflow: str
    versions: list[VersionCensus]


class PlanEntry(TypedDict):
    execution_id: str
    version: str
    verdict: str
    reason: NotRequired[str]


class PlanDoc(TypedDict):
    workflow: str
    from_version: str
    to_version: str
    migration_hash: str
    executions: list[PlanEntry]


class MigratedEntry(TypedDict):
    execution_id: str
    verdict: str
    migrated: bool
    reason: NotRequired[str]


class RunDoc(TypedDict):
    workflow: str
    from_version: str
    to_version: str
    migration_hash: str
    dry_run: bool
    migrated: int
    remaining: int
    executions: list[MigratedEntry]


# ---------------------------------------------------------------- maps


@attrs.frozen
class Route:
    """How to move executions of `source` to `target`: the map and its hash."""

    source: ir.Definition
    target: ir.Definition
    map: ir.MigrationMap
    hash: str


def route(source: ir.Definition, target: ir.Definition) -> Route | None:
    """The declared way from `source` to `target`: the target's `migrate
    from` block for the source's version (pinned to its hash), or the
    reverse map of the source's block for the target's version."""
    forward = target.migration_from(source.version)
    if forward is not None and forward.from_hash == source.definition_hash:
        return Route(source, target, forward.forward, _hash(forward, "forward"))
    back = source.migration_from(target.version)
    if back is not None and back.reverse is not None and back.from_hash == target.definition_hash:
        return Route(source, target, back.reverse, _hash(back, "reverse"))
    return None


def _hash(migration: ir.Migration, direction: str) -> str:
    return document_hash({"direction": direction, "migration": unstructure(migration)})


def mapped_name(m: ir.MigrationMap, old_step: str) -> str:
    return m.renamed.get(old_step, old_step)


# ---------------------------------------------------------------- plan


@attrs.frozen
class Assessment:
    verdict: Verdict
    reason: str | None = None
    input: JsonValue = None


def assess(state: ExecutionState, r: Route) -> Assessment:
    """Whether `state` (of `r.source`) can move to `r.target` now, at its
    next safe point, or never, and why; with the target's input when now."""
    target = r.target
    if state.terminal:
        return Assessment(NEVER, f"the execution has ended ({state.status})")
    if state.definition_hash != r.source.definition_hash:
        return Assessment(NEVER, f"the execution runs {state.version}")
    if state.abort is not None or state.compensation_order is not None or state.handlers:
        return Assessment(NEVER, "the execution is ending (being cancelled, failed or timed out)")
    for signal in state.signals:
        if "delivered_to" not in signal and target.signal(signal["name"]) is None:
            return Assessment(
                NEVER,
                f"signal `{signal['name']}` is buffered and {target.version} does not declare it",
            )
    later: str | None = None
    for key, unit in state.units.items():
        if not unitkeys.is_main_block(key):
            return Assessment(NEVER, f"unit `{key}` of a handler or compensation has started")
        old = unitkeys.step_name(key)
        if old in r.map.removed:
            return Assessment(NEVER, f"step `{old}` has started and {target.version} removes it")
        new = mapped_name(r.map, old)
        step, old_step = target.step(new), r.source.step(old)
        if step is None or old_step is None:
            return Assessment(NEVER, f"step `{old}` has no counterpart in {target.version}")
        if step.kind != old_step.kind:
            return Assessment(
                NEVER, f"step `{old}` is of kind {old_step.kind} and `{new}` of kind {step.kind}"
            )
        if unit.status in _IN_FLIGHT or unit.status == UNIT_RETRY_WAIT:
            later = later or f"step `{old}` has an attempt in flight"
        elif (
            unit.status == UNIT_WAITING and step.kind == "await" and step.signal != old_step.signal
        ):
            return Assessment(NEVER, f"step `{old}` waits for another signal than `{new}`")
    try:
        value = target_input(state, r)
    except (EvalError, _values.ValidationError) as exc:
        return Assessment(NEVER, f"the input of {target.version} cannot be built: {exc}")
    if later is not None:
        return Assessment(LATER, later)
    return Assessment(NOW, None, value)


def target_input(state: ExecutionState, r: Route) -> JsonValue:
    """The target's input: each field from the map's expression over the
    source execution, else the source input's field of the same name, else
    the target's default (raises EvalError or ValidationError)."""
    old_input = state.input if isinstance(state.input, dict) else {}
    steps: dict[str, JsonValue] = {s.name: None for s in r.source.steps}
    steps.update(state.outputs)
    scope = Scope(
        input=state.input,
        execution={"id": state.id, "workflow": state.workflow, "version": state.version},
        steps=steps,
    )
    out: JsonObject = {}
    for field in r.target.input.fields:
        expr = r.map.input.get(field.name)
        if expr is not None:
            out[field.name] = evaluate(expr, scope)
        elif field.name in old_input:
            out[field.name] = old_input[field.name]
    return _values.conform(out, r.target.input, strict=True)


def migrated_event(state: ExecutionState, r: Route, value: JsonValue, now: int) -> ev.Event:
    """The one event that moves `state` to the target (after `assess` said NOW)."""
    renamed = {
        old: new
        for old, new in r.map.renamed.items()
        if old != new and any(unitkeys.step_name(k) == old for k in state.units)
    }
    return stamp(
        state,
        now,
        ev.WorkflowMigrated,
        r.source.version,
        r.source.definition_hash,
        r.target.version,
        r.target.definition_hash,
        r.hash,
        value,
        renamed,
    )


# ---------------------------------------------------------------- census


def _wait_kind(step: ir.Step) -> str:
    return {"sleep": "timer", "await": "signal", "workflow": "child"}.get(step.kind, "task")


def census(
    workflow: str,
    definitions: Iterable[ir.Definition],
    live: Iterable[ExecutionState],
    last_live: Mapping[str, int],
) -> VersionsDoc:
    """Per registered version of `workflow` (oldest first): its live and
    paused executions, where they wait, the task contracts they may still
    call, and whether it drains. `last_live`: by version, when an execution
    of it was last seen live (the store's newest update)."""
    ordered = sorted(definitions, key=lambda d: semver_key(d.version))
    by_hash: dict[str, list[ExecutionState]] = {}
    for state in live:
        by_hash.setdefault(state.definition_hash, []).append(state)
    newest = ordered[-1].version if ordered else None
    rows: list[VersionCensus] = []
    for defn in ordered:
        states = by_hash.get(defn.definition_hash, [])
        waits: dict[tuple[str, str], int] = {}
        tasks: set[str] = set()
        for state in states:
            _count(defn, state, waits, tasks)
        if defn.version == newest:
            drain = "current"
        else:
            drain = "draining" if states else "drained"
        rows.append(
            {
                "version": defn.version,
                "definition_hash": defn.definition_hash,
                "live": len(states),
                "paused": sum(1 for s in states if s.paused),
                "waiting": [
                    {"step": step, "kind": kind, "count": n}
                    for (step, kind), n in sorted(waits.items())
                ],
                "tasks": sorted(tasks),
                "drain": drain,
                "last_live_at_ms": None if states else last_live.get(defn.version),
            }
        )
    return {"workflow": workflow, "versions": rows}


def _count(
    defn: ir.Definition,
    state: ExecutionState,
    waits: dict[tuple[str, str], int],
    tasks: set[str],
) -> None:
    steps = list(defn.steps)
    for block in defn.handlers.values():
        steps.extend(block)
    for handler in defn.events:
        steps.extend(handler.steps)
    for step in steps:
        unit = state.units.get(step.name)
        done = unit is not None and unit.done
        if not done and step.task is not None:
            tasks.add(_contract(defn, step.task))
        if step.compensate is not None:
            tasks.add(_contract(defn, step.compensate.task))
    seen: set[str] = set()
    for key, unit in state.units.items():
        if unit.done or not unitkeys.is_main_block(key):
            continue
        name = unitkeys.step_name(key)
        waiting = defn.step(name)
        if waiting is None or name in seen:
            continue
        seen.add(name)
        kind = _wait_kind(waiting)
        waits[(name, kind)] = waits.get((name, kind), 0) + 1


def _contract(defn: ir.Definition, task: str) -> str:
    contract = defn.contracts.get(task)
    return f"{task}@{contract.version}" if contract is not None else task
