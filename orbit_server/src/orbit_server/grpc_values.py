"""JSON values to and from `google.protobuf.Value`, for the gRPC binding.

A Value holds every number as a double. Going in, a whole number within
±2^53 becomes an int again, so an `Int` field a worker returns is an `Int`
to the engine; other numbers stay floats. A number that is not finite has
no JSON form and is refused (ValueError), like anything JSON cannot hold.
Going out, ints become doubles: exact within ±2^53, as the chapter warns.

Protobuf's decoder refuses values nested deeper than its recursion limit
(100), so the recursion here is bounded by what could be decoded.
"""

from __future__ import annotations

import math
from typing import Any

from google.protobuf import struct_pb2

from orbit_core.jsontypes import JsonValue

_EXACT = 2**53
_NULL = struct_pb2.NULL_VALUE


def from_value(value: struct_pb2.Value, where: str) -> JsonValue:
    """The JSON value `value` carries; an unset Value is null. `where` names
    the field in the error."""
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return _number(value.number_value, where)
    if kind == "string_value":
        text: str = value.string_value
        return text
    if kind == "bool_value":
        flag: bool = value.bool_value
        return flag
    if kind == "struct_value":
        return {key: from_value(item, where) for key, item in value.struct_value.fields.items()}
    if kind == "list_value":
        return [from_value(item, where) for item in value.list_value.values]
    return None


def _number(number: float, where: str) -> int | float:
    if number.is_integer():
        if -_EXACT <= number <= _EXACT:
            return int(number)
        return number
    if math.isfinite(number):
        return number
    raise ValueError(f"{where}: {number} is not a JSON number (numbers must be finite)")


def to_value(obj: Any) -> struct_pb2.Value:
    """`obj`, a JSON value, as a Value."""
    out = struct_pb2.Value()
    _fill(out, obj)
    return out


def _fill(out: struct_pb2.Value, obj: Any) -> None:
    if obj is None:
        out.null_value = _NULL
    elif isinstance(obj, bool):
        out.bool_value = obj
    elif isinstance(obj, (int, float)):
        out.number_value = obj
    elif isinstance(obj, str):
        out.string_value = obj
    elif isinstance(obj, dict):
        fields = out.struct_value.fields
        if not obj:
            out.struct_value.SetInParent()
        for key, item in obj.items():
            _fill(fields[key], item)
    elif isinstance(obj, (list, tuple)):
        values = out.list_value.values
        if not obj:
            out.list_value.SetInParent()
        for item in obj:
            _fill(values.add(), item)
    else:
        raise TypeError(f"not a JSON value: {type(obj).__name__}")
