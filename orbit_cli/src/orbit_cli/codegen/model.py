"""The language-neutral model every generator renders.

`build` turns a compiled program into a `Module`: every record type the
contracts and workflows use becomes one named `Record` (a schema keeps its
name; an inline record is named after where it sits, `OrdersValidateInput`,
`ShipmentPackagesItem`), and every type refers to records by that name, so a
generator never invents names of its own and all five languages agree.

Names are given in a fixed order (contracts by task name, then workflows by
name, fields in declaration order) and a clash takes the lowest free numeric
suffix, so the output depends only on the program. Doc comments come from
the syntax tree (the IR carries none); they change the generated comments,
never a contract hash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from orbit_core.ir import Definition, TaskContract, contract_document, contract_hash
from orbit_core.ir import types as t
from orbit_lang import ast
from orbit_lang.sourcemap import _fields

# --- types -----------------------------------------------------------------------


@attrs.frozen
class Prim:
    kind: str  # one of orbit_core.ir.types.PRIMITIVES


@attrs.frozen
class ListOf:
    items: Ref


@attrs.frozen
class MapOf:
    values: Ref


@attrs.frozen
class Opt:
    inner: Ref


@attrs.frozen
class Named:
    """A record, by the name of its `Record`."""

    name: str


Ref: TypeAlias = Prim | ListOf | MapOf | Opt | Named


@attrs.frozen
class FieldDecl:
    name: str
    type: Ref
    doc: str | None
    # The default as the IR stores it (a JSON value), when there is one.
    has_default: bool = False
    default: Any = None

    @property
    def required(self) -> bool:
        """Absent from a value only if it is optional or has a default."""
        return not self.has_default and not isinstance(self.type, Opt)


@attrs.frozen
class Record:
    name: str
    doc: str | None
    fields: tuple[FieldDecl, ...]


@attrs.frozen
class Contract:
    task: str  # `orders.validate`
    version: str
    hash: str
    # The hashed document, as canonical JSON text (the SDKs send it along).
    document: Any
    ident: str  # `OrdersValidate`
    input: Ref
    output: Ref
    doc: str | None
    description: str | None


@attrs.frozen
class Message:
    """A workflow's signal or query."""

    name: str
    type: Ref
    doc: str | None


@attrs.frozen
class Workflow:
    name: str
    version: str
    ident: str
    input: Ref
    output: Ref
    signals: tuple[Message, ...]
    queries: tuple[Message, ...]
    doc: str | None


@attrs.frozen
class Module:
    sources: tuple[str, ...]
    records: tuple[Record, ...]
    contracts: tuple[Contract, ...]
    workflows: tuple[Workflow, ...]

    def record(self, name: str) -> Record:
        for record in self.records:
            if record.name == name:
                return record
        raise KeyError(name)


# --- names -----------------------------------------------------------------------


def pascal(text: str) -> str:
    """`orders.validate` -> `OrdersValidate`, `weight_kg` -> `WeightKg`."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", text) if w]
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Unnamed"
    return name if not name[0].isdigit() else "T" + name


def camel(text: str) -> str:
    name = pascal(text)
    return name[:1].lower() + name[1:]


def snake(text: str) -> str:
    """`OrdersValidate` -> `orders_validate`, `orders.validate` -> `orders_validate`."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    name = "_".join(w for w in re.split(r"[^A-Za-z0-9]+", text) if w).lower() or "unnamed"
    return name if not name[0].isdigit() else "t_" + name


def upper_snake(text: str) -> str:
    return snake(text).upper()


# --- building --------------------------------------------------------------------

# Doc comments of a record's fields, as orbit_lang.sourcemap lays them out:
# {field: {"doc"?, "fields"?: {...}}}.
FieldDocs: TypeAlias = Mapping[str, Any]


class _Builder:
    def __init__(self, schemas: Mapping[str, ast.Schema]) -> None:
        self._schemas = schemas
        self.records: dict[str, Record] = {}
        # Schema name -> the record name it got (usually the same).
        self._schema_names: dict[tuple[str, t.RecordType], str] = {}

    def _free(self, wanted: str) -> str:
        if wanted not in self.records:
            return wanted
        n = 2
        while f"{wanted}{n}" in self.records:
            n += 1
        return f"{wanted}{n}"

    def ref(self, typ: t.Type, context: str, docs: FieldDocs | None, doc: str | None) -> Ref:
        match typ:
            case t.Primitive(kind):
                return Prim(kind)
            case t.ListType(items):
                return ListOf(self.ref(items, context + "Item", docs, doc))
            case t.MapType(values):
                return MapOf(self.ref(values, context + "Value", docs, doc))
            case t.OptionalType(inner):
                return Opt(self.ref(inner, context, docs, doc))
            case t.RecordType(_, name) if name is not None:
                return Named(self._schema(typ, name))
            case t.RecordType():
                return Named(self._record(typ, self._free(context), docs, doc))

    def _schema(self, record: t.RecordType, name: str) -> str:
        key = (name, record)
        known = self._schema_names.get(key)
        if known is not None:
            return known
        schema = self._schemas.get(name)
        docs = _fields(schema.record) if schema is not None else None
        given = self._free(pascal(name) if not name.isidentifier() else name)
        self._schema_names[key] = given
        self._record(record, given, docs, schema.doc if schema is not None else None)
        return given

    def _record(
        self, record: t.RecordType, name: str, docs: FieldDocs | None, doc: str | None
    ) -> str:
        # Reserve the name first, so nested records get names after it.
        self.records[name] = Record(name, doc, ())
        fields: list[FieldDecl] = []
        for field in record.fields:
            field_docs = (docs or {}).get(field.name) or {}
            ref = self.ref(field.type, name + pascal(field.name), field_docs.get("fields"), None)
            fields.append(
                FieldDecl(
                    field.name,
                    ref,
                    field_docs.get("doc"),
                    field.has_default,
                    field.default if field.has_default else None,
                )
            )
        self.records[name] = Record(name, doc, tuple(fields))
        return name


def _task_docs(task: ast.Task | None) -> tuple[str | None, str | None, FieldDocs, FieldDocs]:
    if task is None:
        return None, None, {}, {}
    description = None
    found: dict[str, FieldDocs] = {"input": {}, "output": {}}
    for member in task.members:
        if isinstance(member, ast.Description) and description is None:
            description = member.value.value
        elif isinstance(member, ast.TaskInput | ast.TaskOutput):
            which = "input" if isinstance(member, ast.TaskInput) else "output"
            if isinstance(member.type, ast.RecordType):
                found[which] = _fields(member.type)
    return task.doc, description, found["input"], found["output"]


def build(
    sources: tuple[str, ...],
    contracts: list[TaskContract],
    definitions: list[Definition],
    syntax: list[ast.Module],
) -> Module:
    """The model of `contracts` (every task the files declare and those the
    workflows call) and `definitions` (the workflows)."""
    tasks: dict[str, ast.Task] = {}
    schemas: dict[str, ast.Schema] = {}
    workflows: dict[str, ast.Workflow] = {}
    for module in syntax:
        for declaration in module.declarations:
            if isinstance(declaration, ast.Task):
                tasks.setdefault(declaration.name.value, declaration)
            elif isinstance(declaration, ast.Schema):
                schemas.setdefault(declaration.name.name, declaration)
            elif isinstance(declaration, ast.Workflow):
                workflows.setdefault(declaration.name.name, declaration)
    builder = _Builder(schemas)
    by_task: dict[str, TaskContract] = {}
    for contract in contracts:
        by_task.setdefault(contract.name, contract)
    for definition in definitions:
        for pinned in definition.contracts.values():
            if isinstance(pinned, TaskContract):
                by_task.setdefault(pinned.name, pinned)
    built: list[Contract] = []
    for name in sorted(by_task):
        contract = by_task[name]
        ident = pascal(name)
        doc, description, in_docs, out_docs = _task_docs(tasks.get(name))
        built.append(
            Contract(
                task=name,
                version=contract.version,
                hash=contract_hash(contract),
                document=contract_document(contract),
                ident=ident,
                input=builder.ref(contract.input, ident + "Input", in_docs, None),
                output=builder.ref(contract.output, ident + "Output", out_docs, None),
                doc=doc,
                description=description,
            )
        )
    flows = [
        _workflow(builder, definition, workflows.get(definition.name))
        for definition in sorted(definitions, key=lambda d: d.name)
    ]
    return Module(sources, tuple(builder.records.values()), tuple(built), tuple(flows))


def _workflow(builder: _Builder, definition: Definition, node: ast.Workflow | None) -> Workflow:
    ident = pascal(definition.name)
    in_docs: FieldDocs = {}
    out_docs: FieldDocs = {}
    signal_nodes: dict[str, ast.Signal] = {}
    query_docs: dict[str, str | None] = {}
    for member in node.members if node is not None else ():
        if isinstance(member, ast.WorkflowInput):
            in_docs = _fields(member.record)
        elif isinstance(member, ast.WorkflowOutput):
            out_docs = _fields(member.record)
        elif isinstance(member, ast.Signal):
            signal_nodes[member.name.name] = member
        elif isinstance(member, ast.Query):
            query_docs[member.name.name] = member.doc
    signals = []
    for signal in definition.signals:
        found = signal_nodes.get(signal.name)
        fields = _fields(found.record) if found is not None else {}
        doc = found.doc if found is not None else None
        payload = builder.ref(signal.payload, ident + pascal(signal.name) + "Signal", fields, doc)
        signals.append(Message(signal.name, payload, doc))
    queries = [
        Message(
            q.name,
            builder.ref(q.type, ident + pascal(q.name) + "Query", {}, None),
            query_docs.get(q.name),
        )
        for q in definition.queries
    ]
    return Workflow(
        name=definition.name,
        version=definition.version,
        ident=ident,
        input=builder.ref(definition.input, ident + "Input", in_docs, None),
        output=builder.ref(definition.output, ident + "Output", out_docs, None),
        signals=tuple(signals),
        queries=tuple(queries),
        doc=node.doc if node is not None else None,
    )
