"""JSON Schema (draft 2020-12) for every payload that crosses the runtime's
boundary: workflow inputs, outputs, signal payloads and query results, and
task contract inputs and outputs (chapter 56, `orbit schema` and `orbit docs
--json-schema`).

Built from the compiled IR types, so a schema says what the runtime's own
payload check says: a field is required unless it is optional, has a
default or is JSON (which may be null, so may be absent); workflow inputs are checked strictly by the runtime, so their
records (nested ones too) have `"additionalProperties": false`, while every
other payload allows extra fields. Int carries the signed 64-bit range and
Duration is a count of milliseconds. Documents are plain dicts in a fixed key
order, so the printed JSON is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from orbit_core.ir import Definition, TaskContract
from orbit_core.ir.types import (
    Field,
    ListType,
    MapType,
    OptionalType,
    Primitive,
    RecordType,
    Type,
)

DRAFT = "https://json-schema.org/draft/2020-12/schema"
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1

_PRIMITIVES: dict[str, Any] = {
    "string": {"type": "string"},
    "int": {"type": "integer", "minimum": INT_MIN, "maximum": INT_MAX},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "bytes": {"type": "string", "contentEncoding": "base64"},
    "duration": {"type": "integer", "minimum": 0},
    "timestamp": {"type": "string", "format": "date-time"},
    "uuid": {"type": "string", "format": "uuid"},
    "json": True,
}


def type_schema(t: Type, *, strict: bool = False) -> Any:
    """The schema of one IR type; `strict` closes records to unknown fields."""
    match t:
        case Primitive(kind):
            value = _PRIMITIVES[kind]
            return dict(value) if isinstance(value, dict) else value
        case ListType(items):
            return {"type": "array", "items": type_schema(items, strict=strict)}
        case MapType(values):
            return {"type": "object", "additionalProperties": type_schema(values, strict=strict)}
        case OptionalType(inner):
            return {"anyOf": [type_schema(inner, strict=strict), {"type": "null"}]}
        case RecordType(fields, name):
            schema: dict[str, Any] = {}
            if name is not None:
                schema["title"] = name
            schema["type"] = "object"
            properties: dict[str, Any] = {}
            required = []
            for field in fields:
                prop = type_schema(field.type, strict=strict)
                if field.has_default:
                    prop = (
                        {"default": field.default}
                        if prop is True
                        else {**prop, "default": field.default}
                    )
                properties[field.name] = prop
                if not _may_be_absent(field):
                    required.append(field.name)
            schema["properties"] = properties
            if required:
                schema["required"] = required
            if strict:
                schema["additionalProperties"] = False
            return schema


def _may_be_absent(field: Field) -> bool:
    # As the runtime (orbit_core.values): a JSON field may hold null, so it
    # may also be left out.
    return (
        field.has_default or isinstance(field.type, OptionalType) or field.type == Primitive("json")
    )


def document(name: str, version: str, title: str, t: Type, *, strict: bool = False) -> Any:
    """A standalone schema document: `$schema`, `$id`, `title`, then the type."""
    body = type_schema(t, strict=strict)
    head: dict[str, Any] = {"$schema": DRAFT, "$id": f"urn:orbit:{name}@{version}", "title": title}
    if body is True:
        return head
    body.pop("title", None)
    return {**head, **body}


@attrs.frozen
class Payload:
    name: str  # workflow.Refund.signal.approval
    label: str  # "signal approval", the row of a docs page's table
    schema: Any


def workflow_payloads(definition: Definition) -> list[Payload]:
    key, version = definition.key, definition.version
    base = f"workflow.{definition.name}"
    found = [
        Payload(
            f"{base}.input",
            "input",
            document(f"{base}.input", version, f"{key} input", definition.input, strict=True),
        ),
        Payload(
            f"{base}.output",
            "output",
            document(f"{base}.output", version, f"{key} output", definition.output),
        ),
    ]
    for signal in definition.signals:
        name = f"{base}.signal.{signal.name}"
        title = f"{key} signal {signal.name}"
        found.append(
            Payload(name, f"signal {signal.name}", document(name, version, title, signal.payload))
        )
    for query in definition.queries:
        name = f"{base}.query.{query.name}"
        title = f"{key} query {query.name}"
        found.append(
            Payload(name, f"query {query.name}", document(name, version, title, query.type))
        )
    return found


def task_payloads(contract: TaskContract) -> list[Payload]:
    found = []
    for which, t in (("input", contract.input), ("output", contract.output)):
        name = f"task.{contract.name}.{which}"
        title = f"{contract.name}@{contract.version} {which}"
        found.append(Payload(name, which, document(name, contract.version, title, t)))
    return found


def used_tasks(definition: Definition) -> list[TaskContract]:
    return [c for c in definition.contracts.values() if isinstance(c, TaskContract)]


def all_payloads(
    definitions: Iterable[Definition], declared: Iterable[TaskContract]
) -> dict[str, Any]:
    """name -> schema: each workflow's payloads, then every task contract
    (declared ones and those the workflows use), sorted by task name."""
    found: dict[str, Any] = {}
    tasks: dict[str, TaskContract] = {}
    for definition in definitions:
        for payload in workflow_payloads(definition):
            found[payload.name] = payload.schema
        for contract in used_tasks(definition):
            tasks.setdefault(contract.name, contract)
    for contract in declared:
        tasks.setdefault(contract.name, contract)
    for name in sorted(tasks):
        for payload in task_payloads(tasks[name]):
            found[payload.name] = payload.schema
    return found


__all__ = ["Payload", "all_payloads", "document", "type_schema"]
