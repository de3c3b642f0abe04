"""The `source_map` of a compiled definition: where each part was declared
and its `///` doc comment, for `docs`, `graph` and editors. It is not
hashed (RULINGS §11), so positions and comments never change a hash.

Layout (every position is `{"line", "column", "doc"?}`; `file` is given on
the workflow and on each contract and schema, which may live elsewhere):

    {"file", "line", "column", "doc"?,
     "input": {field: position}, "output": {field: position},
     "steps": {step: position},
     "handlers": {kind: {step: position}}, "events": {signal: {step: position}},
     "signals": {signal: position + {"fields"}}, "queries": {query: position},
     "return": position, "continue_as_new": position,
     "contracts": {task: position + {"file", "input", "output"}},
     "schemas": {schema: position + {"file", "fields"}}}

A field's position has `fields` too when its type is an inline record.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from orbit_core.ir import Definition
from orbit_core.ir.types import ListType, MapType, OptionalType, RecordType, Type
from orbit_lang import ast
from orbit_lang.source import Span

Position = dict[str, Any]


def _position(span: Span, doc: str | None = None, *, file: bool = False) -> Position:
    found: Position = {}
    if file:
        found["file"] = span.file
    found["line"] = span.line
    found["column"] = span.column
    if doc:
        found["doc"] = doc
    return found


def _fields(record: ast.RecordType) -> dict[str, Position]:
    found: dict[str, Position] = {}
    for field in record.fields:
        position = _position(field.name.span, field.doc)
        inner = _inline_record(field.type)
        if inner is not None and inner.fields:
            position["fields"] = _fields(inner)
        found.setdefault(field.name.name, position)
    return found


def _inline_record(node: ast.TypeExpr) -> ast.RecordType | None:
    """The inline record a field's type holds, through `?`, `List` and `Map`."""
    while True:
        if isinstance(node, ast.OptionalType):
            node = node.inner
        elif isinstance(node, ast.ListType):
            node = node.element
        elif isinstance(node, ast.MapType):
            node = node.value
        else:
            return node if isinstance(node, ast.RecordType) else None


def _steps(steps: tuple[ast.Step, ...] | list[ast.Step]) -> dict[str, Position]:
    found: dict[str, Position] = {}
    for step in steps:
        found.setdefault(step.name.name, _position(step.name.span, step.doc))
    return found


def source_map(
    workflow: ast.Workflow,
    definition: Definition,
    tasks: Mapping[str, ast.Task],
    schemas: Mapping[str, ast.Schema],
) -> dict[str, Any]:
    found: dict[str, Any] = _position(workflow.name.span, workflow.doc, file=True)
    handlers: dict[str, dict[str, Position]] = {}
    events: dict[str, dict[str, Position]] = {}
    signals: dict[str, Position] = {}
    queries: dict[str, Position] = {}
    for member in workflow.members:
        if isinstance(member, ast.WorkflowInput):
            found.setdefault("input", _fields(member.record))
        elif isinstance(member, ast.WorkflowOutput):
            found.setdefault("output", _fields(member.record))
        elif isinstance(member, ast.OutcomeHandler):
            handlers.setdefault(member.kind.name, _steps(member.steps))
        elif isinstance(member, ast.EventHandler):
            events.setdefault(member.signal.name, _steps(member.steps))
        elif isinstance(member, ast.Signal):
            position = _position(member.name.span, member.doc)
            position["fields"] = _fields(member.record)
            signals.setdefault(member.name.name, position)
        elif isinstance(member, ast.Query):
            queries.setdefault(member.name.name, _position(member.name.span, member.doc))
        elif isinstance(member, ast.Return):
            found.setdefault("return", _position(member.keyword))
        elif isinstance(member, ast.ContinueAsNew):
            found.setdefault("continue_as_new", _position(member.keyword))
    found["steps"] = _steps(workflow.steps)
    for key, value in (
        ("handlers", handlers),
        ("events", events),
        ("signals", signals),
        ("queries", queries),
    ):
        if value:
            found[key] = value
    contracts = _contracts(definition, tasks)
    if contracts:
        found["contracts"] = contracts
    used = _schemas(definition, schemas)
    if used:
        found["schemas"] = used
    return found


def _contracts(definition: Definition, tasks: Mapping[str, ast.Task]) -> dict[str, Position]:
    found: dict[str, Position] = {}
    for name in sorted(definition.contracts):
        task = tasks.get(name)
        if task is None:
            continue
        position = _position(task.name.span, task.doc, file=True)
        for member in task.members:
            if isinstance(member, ast.TaskInput | ast.TaskOutput):
                which = "input" if isinstance(member, ast.TaskInput) else "output"
                if isinstance(member.type, ast.RecordType):
                    position.setdefault(which, _fields(member.type))
        found[name] = position
    return found


def _schemas(definition: Definition, schemas: Mapping[str, ast.Schema]) -> dict[str, Position]:
    names: set[str] = set()
    roots: list[Type] = [definition.input, definition.output]
    for contract in definition.contracts.values():
        roots.extend((contract.input, contract.output))
    roots.extend(signal.payload for signal in definition.signals)
    for root in roots:
        names.update(_schema_names(root))
    found: dict[str, Position] = {}
    for name in sorted(names):
        schema = schemas.get(name)
        if schema is None:
            continue
        position = _position(schema.name.span, schema.doc, file=True)
        position["fields"] = _fields(schema.record)
        found[name] = position
    return found


def _schema_names(t: Type) -> Iterator[str]:
    if isinstance(t, OptionalType):
        yield from _schema_names(t.type)
    elif isinstance(t, ListType):
        yield from _schema_names(t.items)
    elif isinstance(t, MapType):
        yield from _schema_names(t.values)
    elif isinstance(t, RecordType):
        if t.name is not None:
            yield t.name
        for field in t.fields:
            yield from _schema_names(field.type)
