"""Value types as the IR stores them.

The encoding (see docs/ir.md) is one JSON object per type, tagged by `kind`:
primitives are `{"kind": "string"}` and friends; composites nest.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

PRIMITIVES = ("string", "int", "float", "bool", "bytes", "duration", "timestamp", "uuid", "json")

# Source spelling of each primitive, for printing types back in messages.
PRIMITIVE_NAMES = {
    "string": "String",
    "int": "Int",
    "float": "Float",
    "bool": "Bool",
    "bytes": "Bytes",
    "duration": "Duration",
    "timestamp": "Timestamp",
    "uuid": "UUID",
    "json": "JSON",
}


@attrs.frozen
class Primitive:
    kind: str  # one of PRIMITIVES


@attrs.frozen
class ListType:
    items: Type


@attrs.frozen
class MapType:
    """Keys are always strings (maps are JSON objects)."""

    values: Type


@attrs.frozen
class OptionalType:
    type: Type


class _NoDefault:
    """Marks a field without a default (distinct from a default of `null`)."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __bool__(self) -> bool:
        return False


NO_DEFAULT: Any = _NoDefault()


@attrs.frozen
class Field:
    """A record field. `default` is a constant JSON value, evaluated by the compiler."""

    name: str
    type: Type
    default: Any = NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@attrs.frozen
class RecordType:
    """An object with declared fields. `name` is the schema name, or None for an inline record."""

    fields: tuple[Field, ...]
    name: str | None = None

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


Type: TypeAlias = Primitive | ListType | MapType | OptionalType | RecordType

STRING = Primitive("string")
INT = Primitive("int")
FLOAT = Primitive("float")
BOOL = Primitive("bool")
JSON = Primitive("json")
EMPTY_RECORD = RecordType(fields=())


def render_type(t: Type) -> str:
    """The type as ORBIT source spells it (`List<String>?`, `{ a: Int }`, `LineItem`)."""
    match t:
        case Primitive(kind):
            return PRIMITIVE_NAMES[kind]
        case ListType(items):
            return f"List<{render_type(items)}>"
        case MapType(values):
            return f"Map<String, {render_type(values)}>"
        case OptionalType(inner):
            return f"{render_type(inner)}?"
        case RecordType(_, name) if name is not None:
            return name
        case RecordType(fields):
            if not fields:
                return "{}"
            return "{ " + ", ".join(f"{f.name}: {render_type(f.type)}" for f in fields) + " }"
