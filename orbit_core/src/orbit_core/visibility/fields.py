"""The values of a workflow's search fields, as the store's index holds them.

Each declared field becomes one `SearchValue` row per execution: strings
(String, UUID) in `str_value`, numbers (Int, Float), Bools (0 or 1) and
Timestamps (milliseconds since the epoch, the text kept in `str_value`) in
`num_value`, so one index per column answers equality and ranges.

`SearchPlan` is built once per definition (`Plan.search`, None without a
`search` block, so executions of other workflows pay one attribute test per
commit). For each change of a group the engine calls `values` with the
change's new events and the execution's state after them: a field is
computed when its last missing input arrives — `WorkflowCreated` for fields
over `input` alone, the event that gives a step its output for fields that
read steps — and goes into the same commit as that event. A value that is
null, or whose expression fails, writes no row (a filter on the field then
does not match that execution).

`values` runs for every change of every indexed execution, so what can be
worked out per definition is (bench_visibility --counted counts it): each
field's converter is chosen for its kind, and for the usual plan — every
field read straight from the input (`input.customer`) — the start's rows
are one pass over those keys, and a change without `WorkflowCreated` is
dismissed by a type test per event.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import attrs

from orbit_core import events as ev
from orbit_core.eval.scope import EvalError, Scope
from orbit_core.evaluate import evaluate
from orbit_core.ir import Definition, SearchField
from orbit_core.ir import expr as e
from orbit_core.ir.types import OptionalType, Primitive, Type
from orbit_core.ir.walk import walk
from orbit_core.jsontypes import JsonValue

# The column each scalar kind is indexed in.
STRING_KINDS = frozenset({"string", "uuid"})
NUMBER_KINDS = frozenset({"int", "float", "bool", "timestamp"})


class SearchValue(NamedTuple):
    """One row of the search index for one execution.

    A named tuple rather than a frozen attrs class: one is made per field of
    every indexed start, on the commit path, and a frozen class's
    `__init__` (an `object.__setattr__` per field) cost about three times a
    tuple's."""

    field: str
    str_value: str | None
    num_value: float | None


def kind_of(type_: Type) -> str:
    """The scalar kind of a search field's type (`string`, `int`, ...)."""
    scalar = type_.type if isinstance(type_, OptionalType) else type_
    return scalar.kind if isinstance(scalar, Primitive) else "json"


def timestamp_ms(text: str) -> int | None:
    """Milliseconds since the epoch of an RFC 3339 timestamp (or a bare
    `YYYY-MM-DD`, midnight UTC); None when `text` is neither."""
    try:
        # A leap second reads as the second before it.
        moment = datetime.datetime.fromisoformat(text.replace(":60", ":59"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        if len(text) != 10:  # only a bare date may omit the offset
            return None
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def to_search_value(name: str, kind: str, value: JsonValue) -> SearchValue | None:
    """The index row of `value`, or None when there is nothing to index."""
    if value is None:
        return None
    if kind in STRING_KINDS and isinstance(value, str):
        return SearchValue(name, value, None)
    if kind == "bool" and isinstance(value, bool):
        return SearchValue(name, None, 1.0 if value else 0.0)
    if kind in ("int", "float") and isinstance(value, int | float) and not isinstance(value, bool):
        return SearchValue(name, None, float(value))
    if kind == "timestamp" and isinstance(value, str):
        ms = timestamp_ms(value)
        return None if ms is None else SearchValue(name, value, float(ms))
    return None


Reader = Callable[[JsonValue, dict[str, JsonValue]], JsonValue]
Converter = Callable[[JsonValue], SearchValue | None]


def _converter(name: str, kind: str) -> Converter:
    """`to_search_value` for one field: the usual JSON type of its kind is
    tested first (exact type), anything else goes the general way."""
    if kind in STRING_KINDS:

        def text(value: JsonValue) -> SearchValue | None:
            if type(value) is str:
                return SearchValue(name, value, None)
            return to_search_value(name, kind, value)

        return text
    if kind in ("int", "float"):

        def number(value: JsonValue) -> SearchValue | None:
            if type(value) is float or type(value) is int:
                return SearchValue(name, None, float(value))
            return to_search_value(name, kind, value)

        return number
    return lambda value: to_search_value(name, kind, value)


def _reader(expr: e.Expr) -> Reader | None:
    """A direct read for the usual shapes `input.a` and `step.a` (what most
    search fields are), so they skip the scope and the evaluator; None for
    anything else. Reads as the evaluator would: a dict's key, else null on
    null, and any other value goes through the evaluator (which raises)."""
    if not isinstance(expr, e.Get):
        return None
    name = expr.field
    target = expr.target
    if isinstance(target, e.Input):

        def from_input(input: JsonValue, outputs: dict[str, JsonValue]) -> JsonValue:
            if type(input) is dict:
                return input.get(name)
            raise _Slow

        return from_input
    if isinstance(target, e.StepRef):
        step = target.name

        def from_step(input: JsonValue, outputs: dict[str, JsonValue]) -> JsonValue:
            value = outputs.get(step)
            if type(value) is dict:
                return value.get(name)
            raise _Slow

        return from_step
    return None


def _input_key(expr: e.Expr) -> str | None:
    """`a` of `input.a`, else None."""
    if isinstance(expr, e.Get) and isinstance(expr.target, e.Input):
        return expr.field
    return None


class _Slow(Exception):
    """The direct read met something other than an object: evaluate instead."""


@attrs.frozen
class _Field:
    field: SearchField
    kind: str
    steps: frozenset[str]
    read: Reader | None
    convert: Converter


class SearchPlan:
    """What a definition's search fields read, worked out once."""

    def __init__(self, defn: Definition) -> None:
        self.fields = tuple(
            _Field(
                f,
                kind_of(f.type),
                frozenset(n.name for n in walk(f.expr) if isinstance(n, e.StepRef)),
                _reader(f.expr),
                _converter(f.name, kind_of(f.type)),
            )
            for f in defn.search
        )
        # Whether a field reads `execution` (the engine builds that mapping
        # only then).
        self.reads_execution = any(
            isinstance(n, e.Execution) for f in defn.search for n in walk(f.expr)
        )
        self.on_start = tuple(f for f in self.fields if not f.steps)
        self.by_step: dict[str, tuple[_Field, ...]] = {}
        for f in self.fields:
            for step in f.steps:
                self.by_step[step] = (*self.by_step.get(step, ()), f)
        # The usual plan: every field reads a key of the input. Its start
        # rows are `(key, converter)` pairs over the input object.
        self.input_keys: tuple[tuple[str, Converter], ...] | None = None
        if all(_input_key(f.field.expr) is not None for f in self.fields):
            self.input_keys = tuple(
                (_input_key(f.field.expr) or "", f.convert) for f in self.fields
            )

    def values(
        self,
        events: Sequence[ev.Event],
        input: JsonValue,
        outputs: dict[str, JsonValue],
        execution: Mapping[str, str],
    ) -> list[SearchValue]:
        """The rows `events` make known, read from the state after them
        (`input`, the main steps' `outputs`; `execution` may be empty unless
        `reads_execution`)."""
        keys = self.input_keys
        if keys is not None:
            # Only the start makes an input field known.
            for event in events:
                if type(event) is ev.WorkflowCreated:
                    break
            else:
                return []
            if type(input) is dict:
                known: list[SearchValue] = []
                for key, convert in keys:
                    row = convert(input.get(key))
                    if row is not None:
                        known.append(row)
                return known
        due = self._due(events, outputs)
        if not due:
            return []
        rows: list[SearchValue] = []
        scope: Scope | None = None
        for f in due:
            if f.steps and not f.steps <= outputs.keys():
                continue  # a step it reads has not succeeded yet
            try:
                if f.read is None:
                    raise _Slow
                value = f.read(input, outputs)
            except _Slow:
                if scope is None:
                    scope = Scope(input=input, execution=execution, steps=outputs)
                try:
                    value = evaluate(f.field.expr, scope)
                except EvalError:
                    continue
            row = f.convert(value)
            if row is not None:
                rows.append(row)
        return rows

    def _due(self, events: Sequence[ev.Event], outputs: dict[str, JsonValue]) -> Sequence[_Field]:
        """The fields `events` may make known."""
        # Runs for every change of every execution of the workflow, most of
        # which make nothing known: the scan is kept to a type test per event.
        by_step = self.by_step
        if not by_step:
            for event in events:
                if type(event) is ev.WorkflowCreated:
                    return self.on_start
            return ()
        found: dict[str, _Field] = {}
        for event in events:
            if type(event) is ev.WorkflowCreated:
                for f in self.on_start:
                    found[f.field.name] = f
                continue
            step = getattr(event, "step", None)
            if step is not None and step in by_step and step in outputs:
                for f in by_step[step]:
                    found[f.field.name] = f
        return tuple(found.values())


def search_plan(defn: Definition) -> SearchPlan | None:
    return SearchPlan(defn) if defn.search else None
