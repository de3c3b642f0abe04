"""The names a definition declares must be names the compiler could have
written (chapter 31: an identifier is `[A-Za-z_][A-Za-z0-9_]*`, and `true`,
`false` and `null` are literals, never names).

An IR document posted to `POST /v1/workflows` need not come from the
compiler, and its names end up in URLs, logs, the web UI, `orbit graph`
and `orbit docs`: `from_json` refuses a workflow called `<img src=x>` with
an IRError like any other malformed document (`$.path: problem`), which a
deploy answers with INVALID_IR.

What is checked is what the source grammar spells as IDENTIFIER: the
workflow's name, step names and the steps they depend on, loop variables,
signals (declared, awaited, handled), queries, `using` runtimes, child
workflow names, schema names, the fields of declared record types (the
workflow input, signal payloads, contracts), and the names expressions use
(step references, variables, lambda parameters, functions). Not checked:
task names (a string literal in the source, any text but the reserved
`orbit.` prefix), object keys and `get` fields (a source key may be a
string), and the fields of inferred types (an output or query type can be
inferred from an object literal with string keys).

A stored definition is read through `from_json` too, so one deployed
before this check with such a name is skipped when an engine loads the
store, like any stored document the decoder refuses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orbit_core import limits
from orbit_core.ir import expr as e
from orbit_core.ir.definition import ChildContract, Definition, Step
from orbit_core.ir.types import ListType, MapType, OptionalType, RecordType, Type
from orbit_core.ir.walk import walk

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_LITERALS = frozenset({"true", "false", "null"})
# How much of a refused name the message repeats.
_SHOWN = 64


def is_identifier(text: str) -> bool:
    """Whether `text` is a name the ORBIT grammar accepts."""
    return _IDENTIFIER.fullmatch(text) is not None and text not in _LITERALS


def name_problem(defn: Definition) -> str | None:
    """`$.path: problem` for the first name that is not an identifier, or
    None (the codec raises it as its IRError)."""
    for path, what, name in _names(defn):
        if not is_identifier(name):
            shown = name if len(name) <= _SHOWN else name[:_SHOWN] + "…"
            return (
                f"{path}: {what} {_quote(shown)} is not an identifier "
                "(a letter or _, then letters, digits or _)"
            )
    return None


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _names(defn: Definition) -> Iterator[tuple[str, str, str]]:
    """(path, what it names, the name) for every name checked."""
    yield "$.name", "workflow name", defn.name
    yield from _record("$.input", defn.input, fields=True)
    yield from _schema_names("$.output", defn.output)
    for i, step in enumerate(defn.steps):
        yield from _step(f"$.steps[{i}]", step)
    for kind, steps in defn.handlers.items():
        for i, step in enumerate(steps):
            yield from _step(f"{_key('$.handlers', kind)}[{i}]", step)
    for i, handler in enumerate(defn.events):
        yield f"$.events[{i}].signal", "signal name", handler.signal
        for j, step in enumerate(handler.steps):
            yield from _step(f"$.events[{i}].steps[{j}]", step)
    for i, signal in enumerate(defn.signals):
        yield f"$.signals[{i}].name", "signal name", signal.name
        yield from _record(f"$.signals[{i}].payload", signal.payload, fields=True)
    for i, query in enumerate(defn.queries):
        yield f"$.queries[{i}].name", "query name", query.name
        yield from _schema_names(f"$.queries[{i}].type", query.type)
        yield from _expr(f"$.queries[{i}].expr", query.expr)
    yield from _expr("$.result", defn.result)
    if defn.continue_as_new is not None:
        yield from _expr("$.continue_as_new.with", defn.continue_as_new.with_)
        if defn.continue_as_new.when is not None:
            yield from _expr("$.continue_as_new.when", defn.continue_as_new.when)
    for key, contract in defn.contracts.items():
        path = _key("$.contracts", key)
        if isinstance(contract, ChildContract):
            yield f"{path}.name", "workflow name", contract.name
            yield from _record(f"{path}.input", contract.input, fields=True)
            yield from _schema_names(f"{path}.output", contract.output)
        else:
            yield from _type(f"{path}.input", contract.input, fields=True)
            yield from _type(f"{path}.output", contract.output, fields=True)


def _key(path: str, key: str) -> str:
    return limits.render_path([key]).replace("$", path, 1)


def _step(path: str, step: Step) -> Iterator[tuple[str, str, str]]:
    yield f"{path}.name", "step name", step.name
    for i, name in enumerate(step.depends_on):
        yield f"{path}.depends_on[{i}]", "step name", name
    if step.workflow is not None:
        yield f"{path}.workflow", "workflow name", step.workflow
    if step.signal is not None:
        yield f"{path}.signal", "signal name", step.signal
    if step.using is not None:
        yield f"{path}.using", "runtime", step.using
    if step.for_each is not None:
        yield f"{path}.for.var", "loop variable", step.for_each.var
        yield from _expr(f"{path}.for.in", step.for_each.over)
    for member, x in (
        ("compute", step.compute),
        ("with", step.with_),
        ("when", step.when),
        ("idempotency_key", step.idempotency_key),
    ):
        if x is not None:
            yield from _expr(f"{path}.{member}", x)
    compensate = step.compensate
    if compensate is not None:
        if compensate.using is not None:
            yield f"{path}.compensate.using", "runtime", compensate.using
        for member, x in (
            ("with", compensate.with_),
            ("idempotency_key", compensate.idempotency_key),
        ):
            if x is not None:
                yield from _expr(f"{path}.compensate.{member}", x)


def _expr(path: str, root: e.Expr) -> Iterator[tuple[str, str, str]]:
    """The names of an expression, reported at its root (the tree's own
    paths would cost a walk of their own for an error nobody makes twice)."""
    for node in walk(root):
        match node:
            case e.StepRef(name):
                yield path, "step reference", name
            case e.Var(name):
                yield path, "variable", name
            case e.Lambda(param, _):
                yield path, "lambda parameter", param
            case e.Call(fn, _):
                yield path, "function name", fn
            case _:
                pass


def _type(path: str, t: Type, *, fields: bool) -> Iterator[tuple[str, str, str]]:
    """Schema names everywhere in `t`; with `fields`, field names too (the
    type was declared, so its fields are identifiers in the source)."""
    stack = [(path, t)]
    while stack:
        where, current = stack.pop()
        match current:
            case RecordType():
                yield from _record(where, current, fields=fields, nested=stack)
            case ListType(items):
                stack.append((f"{where}.items", items))
            case MapType(values):
                stack.append((f"{where}.values", values))
            case OptionalType(inner):
                stack.append((f"{where}.type", inner))
            case _:
                pass


def _schema_names(path: str, t: Type) -> Iterator[tuple[str, str, str]]:
    """An inferred type: only its schema names are checked."""
    return _type(path, t, fields=False)


def _record(
    path: str,
    record: RecordType,
    *,
    fields: bool,
    nested: list[tuple[str, Type]] | None = None,
) -> Iterator[tuple[str, str, str]]:
    if record.name is not None:
        yield f"{path}.name", "schema name", record.name
    for i, field in enumerate(record.fields):
        if fields:
            yield f"{path}.fields[{i}].name", "field name", field.name
        if nested is None:
            yield from _type(f"{path}.fields[{i}].type", field.type, fields=fields)
        else:
            nested.append((f"{path}.fields[{i}].type", field.type))
