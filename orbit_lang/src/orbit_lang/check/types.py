"""The checker's view of types: the IR's types plus the type of `null`.

The checker works directly on `orbit_core.ir.types`, so a checked type is
already what lowering writes into the IR (schemas inlined, keeping their
names). Only the literal `null` needs a type of its own; it never reaches the
IR because joins turn it into an optional, and a record field or list item
inferred as `null` is typed JSON (chapter 08).

Assignability answers "can a value of S be used where D is expected?" with a
`Mismatch` describing the first problem found, and `join` combines the types
of list items, `if` branches and `coalesce` arguments.
"""

from __future__ import annotations

import attrs

from orbit_core.ir.types import (
    BOOL,
    EMPTY_RECORD,
    FLOAT,
    INT,
    JSON,
    STRING,
    Field,
    ListType,
    MapType,
    OptionalType,
    Primitive,
    RecordType,
    render_type,
)
from orbit_core.ir.types import Type as IRType

__all__ = [
    "BOOL",
    "DURATION",
    "EMPTY_RECORD",
    "EXECUTION",
    "FAILURE",
    "FLOAT",
    "INT",
    "JSON",
    "NULL",
    "PRIMITIVE_TYPES",
    "STRING",
    "Mismatch",
    "NullType",
    "Type",
    "assignable",
    "is_bool",
    "is_json",
    "is_number",
    "is_optional",
    "is_string",
    "join",
    "optional",
    "render",
    "required",
    "strip",
    "to_ir",
]


@attrs.frozen
class NullType:
    """The type of the literal `null`."""


NULL = NullType()
Type = IRType | NullType

DURATION = Primitive("duration")
PRIMITIVE_TYPES: dict[str, IRType] = {
    "String": STRING,
    "Int": INT,
    "Float": FLOAT,
    "Bool": BOOL,
    "Bytes": Primitive("bytes"),
    "Duration": DURATION,
    "Timestamp": Primitive("timestamp"),
    "UUID": Primitive("uuid"),
    "JSON": JSON,
}
EXECUTION = RecordType(
    fields=(Field("id", STRING), Field("workflow", STRING), Field("version", STRING))
)
FAILURE = RecordType(
    fields=(Field("reason", STRING), Field("code", STRING), Field("message", STRING))
)


def is_json(t: Type) -> bool:
    return t == JSON


def is_optional(t: Type) -> bool:
    """Whether a value of `t` may be null (JSON counts as optional)."""
    return isinstance(t, OptionalType | NullType) or t == JSON


def optional(t: Type) -> Type:
    return t if is_optional(t) else OptionalType(to_ir(t))


def strip(t: Type) -> Type:
    """`t` without its `?`."""
    return t.type if isinstance(t, OptionalType) else t


def is_number(t: Type) -> bool:
    return t in (INT, FLOAT)


def is_string(t: Type) -> bool:
    return t == STRING


def is_bool(t: Type) -> bool:
    return t == BOOL


def required(f: Field) -> bool:
    """A field a value must set: neither optional (JSON included) nor defaulted."""
    return not f.has_default and not is_optional(f.type)


def render(t: Type) -> str:
    return "null" if isinstance(t, NullType) else render_type(t)


def to_ir(t: Type) -> IRType:
    """A type for the IR: a bare `null` (`if c then null else null`) is JSON."""
    return JSON if isinstance(t, NullType) else t


@attrs.frozen
class Mismatch:
    """Why S is not assignable to D. `path` locates the problem inside nested
    types (`customer.id`, `items[]`); it is empty at the top level."""

    expected: Type
    found: Type
    path: str = ""
    missing: Field | None = None
    # True when the only problem is that `found` may be null.
    nullable: bool = False

    @property
    def code(self) -> str:
        return "E0405" if self.nullable and not self.path else "E0400"

    def detail(self) -> str:
        if self.missing is not None:
            return f"missing required field `{self.missing.name}: {render(self.missing.type)}`"
        if self.nullable:
            return f"value may be `null` but `{render(self.expected)}` is required"
        return f"expected `{render(self.expected)}`, found `{render(self.found)}`"


def assignable(src: Type, dst: Type, path: str = "") -> Mismatch | None:
    """None when a value of `src` may be used where `dst` is expected."""
    if src == dst or is_json(src) or is_json(dst):
        return None
    if isinstance(src, NullType):
        return None if is_optional(dst) else Mismatch(dst, src, path)
    if isinstance(dst, OptionalType):
        return assignable(strip(src), dst.type, path)
    if isinstance(src, OptionalType):
        inner = assignable(src.type, dst, path)
        if inner is not None:
            return inner if inner.path else Mismatch(dst, src, path)
        return Mismatch(dst, src, path, nullable=True)
    if isinstance(dst, Primitive):
        if dst == FLOAT and src == INT:
            return None
        return Mismatch(dst, src, path)
    if isinstance(dst, ListType) and isinstance(src, ListType):
        return assignable(src.items, dst.items, f"{path}[]")
    if isinstance(dst, MapType) and isinstance(src, MapType):
        return assignable(src.values, dst.values, f"{path}{{}}")
    if isinstance(dst, RecordType) and isinstance(src, RecordType):
        return _record_assignable(src, dst, path)
    return Mismatch(dst, src, path)


def _record_assignable(src: RecordType, dst: RecordType, path: str) -> Mismatch | None:
    # Width subtyping: extra source fields are fine, and target fields that
    # are optional or defaulted may be missing.
    for target in dst.fields:
        source = src.field(target.name)
        where = f"{path}.{target.name}" if path else target.name
        if source is None:
            if required(target):
                return Mismatch(dst, src, path, missing=target)
            continue
        problem = assignable(source.type, target.type, where)
        if problem is not None:
            if not problem.path:
                problem = attrs.evolve(problem, path=where)
            return problem
    return None


def join(a: Type, b: Type) -> Type | None:
    """The smallest type both fit into, or None when they are incompatible."""
    if a == b:
        return a
    if is_json(a) or is_json(b):
        return JSON
    if isinstance(a, NullType):
        return optional(b)
    if isinstance(b, NullType):
        return optional(a)
    if isinstance(a, OptionalType) or isinstance(b, OptionalType):
        inner = join(strip(a), strip(b))
        return None if inner is None else optional(inner)
    if is_number(a) and is_number(b):
        return FLOAT
    if isinstance(a, ListType) and isinstance(b, ListType):
        items = join(a.items, b.items)
        return None if items is None else ListType(to_ir(items))
    if isinstance(a, MapType) and isinstance(b, MapType):
        values = join(a.values, b.values)
        return None if values is None else MapType(to_ir(values))
    if isinstance(a, RecordType) and isinstance(b, RecordType):
        # Of two compatible records, the one with fewer fields wins.
        if assignable(a, b) is None:
            return b
        if assignable(b, a) is None:
            return a
    return None
