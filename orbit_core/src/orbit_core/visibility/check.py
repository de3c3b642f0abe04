"""Types a parsed filter against the search fields workflows declare.

`FieldCatalog` gathers, from deployed definitions, which workflow declares
which field with which kind. `check_filter` resolves every comparison to a
`Condition`: a built-in field (a column of the execution row) or a declared
one (a row of the search index, in the column its kind is kept in), with
its literal converted to what that column holds (timestamps to epoch
milliseconds, Bools to 0/1). With a workflow named, only its fields are
known; without, the fields of every workflow, and a field two workflows
declare with kinds that do not compare alike is refused.

Errors say which field is at fault and where, e.g. `unknown field `nosuch``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

import attrs

from orbit_core.api import (
    EXEC_CANCELLED,
    EXEC_COMPENSATING,
    EXEC_COMPLETED,
    EXEC_CONTINUED_AS_NEW,
    EXEC_FAILED,
    EXEC_RUNNING,
    EXEC_TIMED_OUT,
)
from orbit_core.ir import Definition
from orbit_core.visibility.fields import STRING_KINDS, kind_of, timestamp_ms
from orbit_core.visibility.filter import (
    And,
    Compare,
    FilterError,
    Literal,
    Node,
    Not,
    Or,
    Word,
    parse_filter,
)
from orbit_core.visibility.waiting import FIELD as WAIT_FIELD
from orbit_core.visibility.waiting import KINDS as WAIT_KINDS
from orbit_core.visibility.waiting import kind_needle, name_needle

STATUSES = (
    EXEC_RUNNING,
    EXEC_COMPENSATING,
    EXEC_COMPLETED,
    EXEC_FAILED,
    EXEC_CANCELLED,
    EXEC_TIMED_OUT,
    EXEC_CONTINUED_AS_NEW,
)
# Built-in field -> its kind: `status` is an enum, `started`/`ended` timestamps.
BUILT_IN = {
    "status": "status",
    "workflow": "string",
    "version": "string",
    "started": "timestamp",
    "ended": "timestamp",
}
# What an execution waits for (orbit_core.visibility.waiting): a kind word
# or a step or signal name, compared for membership only.
WAITING_FOR = "waiting_for"
KIND_NAMES = {
    "string": "String",
    "uuid": "UUID",
    "int": "Int",
    "float": "Float",
    "bool": "Bool",
    "timestamp": "Timestamp",
    "status": "status",
}
# The statuses of an execution that can still wait for something.
_OPEN = (EXEC_COMPENSATING, EXEC_RUNNING)
# Kinds that only compare for (in)equality.
_EQUALITY_ONLY = frozenset({"bool", "uuid", "status"})
_NUMERIC = frozenset({"int", "float"})


@attrs.frozen
class Condition:
    """One typed comparison. `column` is the execution row's column for a
    built-in field (`status`, `workflow`, `version`, `started`, `ended`),
    or `str`/`num` for a declared field's index row; `workflows` are those
    that declare it (empty for a built-in field). `absent`: the definition
    hashes whose executions also match when they have no row for the field
    (`waiting_for == task`: a new execution's `|task|` is implied, not
    written; orbit_core.visibility.waiting)."""

    field: str
    builtin: bool
    column: str
    op: str
    values: tuple[str | float, ...]
    workflows: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()


@attrs.frozen
class AllOf:
    parts: tuple[Filter, ...]


@attrs.frozen
class AnyOf:
    parts: tuple[Filter, ...]


@attrs.frozen
class NoneOf:
    part: Filter


Filter: TypeAlias = Condition | AllOf | AnyOf | NoneOf


@attrs.frozen
class FieldCatalog:
    """field -> {workflow: kind} over the definitions given; `indexed`:
    workflow -> the hashes of its definitions with a `search` block."""

    fields: dict[str, dict[str, str]]
    workflows: frozenset[str]
    indexed: dict[str, frozenset[str]] = attrs.field(factory=dict)

    @classmethod
    def of(cls, definitions: Iterable[Definition]) -> FieldCatalog:
        fields: dict[str, dict[str, str]] = {}
        names: set[str] = set()
        indexed: dict[str, set[str]] = {}
        for defn in definitions:
            names.add(defn.name)
            if defn.search:
                indexed.setdefault(defn.name, set()).add(defn.definition_hash)
            for f in defn.search:
                fields.setdefault(f.name, {})[defn.name] = kind_of(f.type)
        return cls(fields, frozenset(names), {w: frozenset(h) for w, h in indexed.items()})

    def declared(self, workflow: str | None) -> dict[str, dict[str, str]]:
        if workflow is None:
            return self.fields
        return {
            name: {workflow: by[workflow]} for name, by in self.fields.items() if workflow in by
        }


def compile_filter(text: str, catalog: FieldCatalog, workflow: str | None = None) -> Filter:
    """Parses and types `text`; raises FilterError."""
    return check_filter(parse_filter(text), catalog, workflow)


def check_filter(node: Node, catalog: FieldCatalog, workflow: str | None = None) -> Filter:
    declared = catalog.declared(workflow)
    return _Checker(declared, workflow, catalog.indexed).node(node)


class _Checker:
    def __init__(
        self,
        declared: dict[str, dict[str, str]],
        workflow: str | None,
        indexed: dict[str, frozenset[str]] | None = None,
    ) -> None:
        self.declared = declared
        self.workflow = workflow
        self.indexed = indexed or {}

    def node(self, node: Node) -> Filter:
        if isinstance(node, And):
            return AllOf(tuple(self.node(p) for p in node.parts))
        if isinstance(node, Or):
            return AnyOf(tuple(self.node(p) for p in node.parts))
        if isinstance(node, Not):
            return NoneOf(self.node(node.part))
        return self.compare(node)

    def compare(self, c: Compare) -> Filter:
        if c.field in BUILT_IN:
            kind = BUILT_IN[c.field]
            self._op_fits(c, kind)
            values = tuple(self._value(c, kind, v) for v in c.values)
            return Condition(c.field, True, c.field, c.op, values)
        if c.field == WAITING_FOR:
            return self.waiting_for(c)
        by_workflow = self.declared.get(c.field)
        if not by_workflow:
            raise FilterError(self._unknown(c.field), c.column)
        kinds = set(by_workflow.values())
        if len(kinds) > 1 and not kinds <= _NUMERIC:
            listed = ", ".join(
                f"{KIND_NAMES.get(k, k)} in `{w}`" for w, k in sorted(by_workflow.items())
            )
            raise FilterError(
                f"field `{c.field}` has different types ({listed}); name the workflow",
                c.column,
            )
        kind = min(kinds)
        self._op_fits(c, kind)
        values = tuple(self._value(c, kind, v) for v in c.values)
        column = "str" if kind in STRING_KINDS else "num"
        return Condition(c.field, False, column, c.op, values, tuple(sorted(by_workflow)))

    def waiting_for(self, c: Compare) -> Filter:
        """`waiting_for == signal`, `waiting_for in [task, "approval"]`: one
        containment test on the `@waiting` index row per value, any of them."""
        indexed = sorted({w for by in self.declared.values() for w in by})
        if self.workflow is not None and not indexed:
            raise FilterError(
                f"`waiting_for` is indexed only for workflows with a `search` block, "
                f"and workflow `{self.workflow}` has none",
                c.column,
            )
        if not indexed:
            raise FilterError(
                "`waiting_for` is indexed only for workflows with a `search` block, "
                "and no deployed workflow has one",
                c.column,
            )
        if c.op not in ("==", "!=", "in", "not in"):
            raise FilterError("`waiting_for` compares only with `==`, `!=` or `in`", c.column)
        tests: list[Filter] = []
        # An execution with no row holds `|task|` (waiting.py): one of the
        # definitions with a search block, not another version of the name.
        implied = tuple(sorted(h for w in indexed for h in self.indexed.get(w, ())))
        for value in c.values:
            absent: tuple[str, ...] = ()
            if isinstance(value, Word) and value.text in WAIT_KINDS:
                needle = kind_needle(value.text)
                if value.text == "task":
                    absent = implied
            elif isinstance(value, str) and value:
                needle = name_needle(value)
            else:
                shown = f"`{value.text}`" if isinstance(value, Word) else _show(value)
                raise FilterError(
                    f"`waiting_for` is one of {', '.join(WAIT_KINDS)} or a quoted step or "
                    f"signal name, not {shown}",
                    c.value_column,
                )
            tests.append(
                Condition(WAIT_FIELD, False, "str", "contains", (needle,), tuple(indexed), absent)
            )
        found = tests[0] if len(tests) == 1 else AnyOf(tuple(tests))
        # The row of an ended execution is not rewritten (waiting.py).
        waits = AllOf((found, Condition("status", True, "status", "in", _OPEN)))
        return NoneOf(waits) if c.op in ("!=", "not in") else waits

    def _unknown(self, field: str) -> str:
        builtin = ", ".join(f"`{b}`" for b in BUILT_IN)
        if self.workflow is not None:
            own = ", ".join(f"`{f}`" for f in self.declared) or "none"
            return (
                f"unknown field `{field}`: workflow `{self.workflow}` declares no search field "
                f"`{field}` (its search fields: {own}; built-in: {builtin})"
            )
        return (
            f"unknown field `{field}`: no deployed workflow declares a search field `{field}` "
            f"(built-in: {builtin})"
        )

    def _op_fits(self, c: Compare, kind: str) -> None:
        if kind in _EQUALITY_ONLY and c.op not in ("==", "!=", "in", "not in"):
            raise FilterError(
                f"field `{c.field}` is a {KIND_NAMES[kind]} and compares only with "
                "`==`, `!=` or `in`",
                c.column,
            )

    def _value(self, c: Compare, kind: str, value: Literal) -> str | float:
        shown = f"`{value.text}`" if isinstance(value, Word) else _show(value)
        if kind == "status":
            text = value.text if isinstance(value, Word) else value
            if isinstance(text, str) and text.upper() in STATUSES:
                return text.upper()
            raise FilterError(
                f"`status` is one of {', '.join(STATUSES)}, not {shown}", c.value_column
            )
        if isinstance(value, Word):
            hint = f' (a string is quoted: "{value.text}")' if kind in STRING_KINDS else ""
            raise FilterError(
                f"field `{c.field}` is a {KIND_NAMES[kind]}, not the word {shown}{hint}",
                c.value_column,
            )
        if kind in STRING_KINDS and isinstance(value, str):
            return value
        if kind in _NUMERIC and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if kind == "bool" and isinstance(value, bool):
            return 1.0 if value else 0.0
        if kind == "timestamp" and isinstance(value, str):
            ms = timestamp_ms(value)
            if ms is None:
                raise FilterError(
                    f"field `{c.field}` is a Timestamp and {shown} is not one "
                    '(write "2024-05-01T00:00:00Z" or "2024-05-01")',
                    c.value_column,
                )
            return float(ms)
        raise FilterError(
            f"field `{c.field}` is a {KIND_NAMES[kind]} and cannot be compared with {shown} "
            f"(a {_kind_of_literal(value)})",
            c.value_column,
        )


def _show(value: str | float | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _kind_of_literal(value: str | float | int | bool) -> str:
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, str):
        return "String"
    return "Int" if isinstance(value, int) else "Float"
