"""Resolves written types to checked types (chapters 08, 09).

Schemas are resolved once and inlined wherever they are used, keeping their
name. Field defaults are checked as constants of the field's type and
evaluated here (RULINGS §4): a reference is E0401, a wrong type E0400, an
evaluation failure E0205; the value stored is the evaluated JSON. A default
whose `JSON` part holds an integer beyond ±(2^53 − 1) is E0205 too: the IR
writes such integers as strings only where the type says they are integers
(docs/ir.md), and in a JSON value a string would be read back as a string.

Recursive schemas (E0202) are found before anything is resolved, so
resolution never loops: a reference into a cycle resolves to JSON.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from orbit_core import limits
from orbit_core.evaluate import EvalError, Scope, evaluate
from orbit_core.ir.codec import value_to_json
from orbit_core.ir.types import NO_DEFAULT, Field, ListType, MapType, OptionalType, RecordType
from orbit_core.ir.types import Type as IRType
from orbit_lang import ast
from orbit_lang.check.declarations import Declarations
from orbit_lang.check.env import CONSTANT_DEFAULT
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.report import Reporter, did_you_mean, first_declared
from orbit_lang.check.types import JSON, PRIMITIVE_TYPES, STRING, render
from orbit_lang.source import Span


class TypeResolver:
    def __init__(self, declarations: Declarations, report: Reporter) -> None:
        self.declarations = declarations
        self.report = report
        self._schemas: dict[str, RecordType] = {}
        self._cyclic = _find_cycles(declarations, report)

    def check_schemas(self) -> None:
        """Resolves every schema, so that unused ones are checked too."""
        for name in self.declarations.schemas:
            self.schema(name)

    def schema(self, name: str) -> RecordType:
        resolved = self._schemas.get(name)
        if resolved is None:
            declaration = self.declarations.schemas[name]
            record = self.record(declaration.record)
            resolved = RecordType(record.fields, name=name)
            self._schemas[name] = resolved
        return resolved

    def resolve(self, node: ast.TypeExpr) -> IRType:
        if isinstance(node, ast.OptionalType):
            inner = self.resolve(node.inner)
            return (
                inner if isinstance(inner, OptionalType) or inner == JSON else OptionalType(inner)
            )
        if isinstance(node, ast.ListType):
            return ListType(self.resolve(node.element))
        if isinstance(node, ast.MapType):
            before = len(self.report.diagnostics)
            key = self.resolve(node.key)
            if key != STRING and len(self.report.diagnostics) == before:
                self.report.error(
                    "E0204", f"map keys must be `String`, found `{render(key)}`", node.key.span
                )
            return MapType(self.resolve(node.value))
        if isinstance(node, ast.RecordType):
            return self.record(node)
        return self._named(node)

    def _named(self, node: ast.NamedType) -> IRType:
        name = node.name.name
        primitive = PRIMITIVE_TYPES.get(name)
        if primitive is not None:
            return primitive
        if name in self.declarations.schemas:
            if name in self._cyclic:
                return JSON
            return self.schema(name)
        if name in ("List", "Map"):
            example = "List<String>" if name == "List" else "Map<String, String>"
            self.report.error(
                "E0201",
                f"unknown type `{name}`",
                node.span,
                help=f"`{name}` needs type arguments, e.g. `{example}`",
            )
            return JSON
        self.report.error(
            "E0201",
            f"unknown type `{name}`",
            node.span,
            help=did_you_mean(name, [*PRIMITIVE_TYPES, *self.declarations.schemas]),
        )
        return JSON

    def record(self, node: ast.RecordType) -> RecordType:
        fields: list[Field] = []
        seen: dict[str, ast.Field] = {}
        for field in node.fields:
            name = field.name.name
            first = seen.get(name)
            if first is not None:
                self.report.error(
                    "E0203",
                    f"duplicate field `{name}`",
                    field.name.span,
                    labels=[first_declared(first.name.span)],
                )
                continue
            seen[name] = field
            type_ = self.resolve(field.type)
            default = NO_DEFAULT
            if field.default is not None:
                default = self.default(field.default, type_)
            fields.append(Field(name, type_, default))
        return RecordType(tuple(fields))

    def default(self, node: ast.Expr, type_: IRType) -> Any:
        checker = ExprChecker(self.report, CONSTANT_DEFAULT, bounded=False)
        typed = checker.check(node, type_)
        if checker.errors:
            return NO_DEFAULT
        try:
            value = evaluate(typed.ir, Scope())
        except EvalError as error:
            self.report.error("E0205", f"invalid default value: {error}", node.span)
            return NO_DEFAULT
        try:
            limits.check_json(
                value_to_json(type_, value), int_min=limits.IR_INT_MIN, int_max=limits.IR_INT_MAX
            )
        except limits.JsonShapeError as error:
            if not error.problem.startswith("an integer"):
                self.report.error("E0205", f"invalid default value: {error}", node.span)
                return NO_DEFAULT
            where = "" if error.path == "$" else f" at `{error.path}`"
            self.report.error(
                "E0205",
                f"invalid default value: a `JSON` value{where} holds an integer beyond "
                f"±{limits.IR_INT_MAX}, which a definition cannot store",
                node.span,
                help="give the field an `Int` type, or write the number as a string",
            )
            return NO_DEFAULT
        return value


def _find_cycles(declarations: Declarations, report: Reporter) -> set[str]:
    """Reports E0202 once per cycle of schemas; returns the schemas in cycles."""
    edges: dict[str, list[tuple[str, Span]]] = {}
    for name, schema in declarations.schemas.items():
        edges[name] = [
            (ref.name.name, ref.name.span)
            for ref in _references(schema.record)
            if ref.name.name in declarations.schemas
        ]
    cyclic: set[str] = set()
    for start in declarations.schemas:
        if start in cyclic:
            continue
        path = _cycle_from(start, edges)
        if path is None:
            continue
        names = [name for name, _ in path]
        cyclic.update(names)
        first_span = path[0][1]
        cycle = " -> ".join([*names, names[0]])
        report.error(
            "E0202",
            f"recursive schema `{names[0]}`",
            first_span,
            notes=[f"cycle: {cycle}"],
            help="schemas must be finite; break the cycle with a `JSON` or `String` id field",
        )
    return cyclic


def _cycle_from(
    start: str, edges: dict[str, list[tuple[str, Span]]]
) -> list[tuple[str, Span]] | None:
    """A cycle through `start`, as (schema, span of its reference to the next)."""
    stack: list[tuple[str, Iterator[tuple[str, Span]]]] = [(start, iter(edges[start]))]
    path: list[tuple[str, Span]] = []
    on_path = {start}
    visited: set[str] = set()
    while stack:
        name, targets = stack[-1]
        advanced = False
        for target, span in targets:
            if target == start:
                return [*path, (name, span)]
            if target in on_path or target in visited:
                continue
            path.append((name, span))
            on_path.add(target)
            stack.append((target, iter(edges[target])))
            advanced = True
            break
        if not advanced:
            stack.pop()
            on_path.discard(name)
            visited.add(name)
            if path:
                path.pop()
    return None


def _references(node: ast.TypeExpr) -> Iterator[ast.NamedType]:
    if isinstance(node, ast.NamedType):
        yield node
    elif isinstance(node, ast.OptionalType):
        yield from _references(node.inner)
    elif isinstance(node, ast.ListType):
        yield from _references(node.element)
    elif isinstance(node, ast.MapType):
        yield from _references(node.key)
        yield from _references(node.value)
    else:
        for field in node.fields:
            yield from _references(field.type)
