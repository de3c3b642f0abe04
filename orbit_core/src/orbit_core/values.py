"""JSON values checked against IR types at the runtime's boundaries.

Defaults are applied recursively (records inside lists, maps and other
records), Float accepts any JSON number (an integer stays an integer), Int
requires an integer, Duration a non-negative integer, and Timestamp, UUID and
Bytes their string forms. Messages name the path of the first mismatch, as in
`$.amount: expected Float, found a string`.

Callers that receive a null worker output or a null execution input treat it as
`{}` first (`null_as_empty`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import cast

from orbit_core.eval.jsonvalue import INT_MAX, INT_MIN, describe_value
from orbit_core.ir.types import (
    Field,
    ListType,
    MapType,
    OptionalType,
    Primitive,
    RecordType,
    Type,
    render_type,
)
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.limits import render_path

__all__ = [
    "ValidationError",
    "conform",
    "describe_value",
    "is_base64",
    "is_timestamp",
    "is_uuid",
    "null_as_empty",
]


class ValidationError(ValueError):
    """`str(error)` is `<path>: <problem>`, e.g. `$.amount: expected Float, found a string`."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def null_as_empty(value: JsonValue) -> JsonValue:
    """A null worker output or execution input counts as `{}`."""
    return {} if value is None else value


# ---------------------------------------------------------------- string forms

_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))",
    re.ASCII,
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# Standard alphabet, padded, and canonical: the bits after the last byte are zero.
_BASE64 = re.compile(
    r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?"
)


def is_timestamp(text: str) -> bool:
    """RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `t` or a space for
    `T`, `z` for `Z`, and real calendar dates (a leap second `:60` is allowed)."""
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return False
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    if hour > 23 or minute > 59 or second > 60:
        return False
    offset_hour, offset_minute = m.group(7), m.group(8)
    return offset_hour is None or (int(offset_hour) <= 23 and int(offset_minute) <= 59)


def is_uuid(text: str) -> bool:
    """36 characters, hyphens at positions 9, 14, 19 and 24, hex digits in either case."""
    return _UUID.fullmatch(text) is not None


def is_base64(text: str) -> bool:
    """Standard-alphabet, padded base64."""
    return _BASE64.fullmatch(text) is not None


# ---------------------------------------------------------------- conform


class _Invalid(Exception):
    """Raised at the mismatch; each enclosing level adds its path segment."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.segments: list[str | int] = []


def conform(
    value: object, type_: Type, *, defaults: bool = True, strict: bool = False
) -> JsonValue:
    """Returns `value` with declared defaults applied (when `defaults`), after
    checking it against `type_`. `strict` rejects record fields the type does not
    declare, at every depth (only the execution input is strict). Raises
    ValidationError.

    The result is a new value for records, lists and maps; JSON-typed parts are
    shared with `value`. Fields keep their order, and defaults come after them.
    """
    if type(value) is dict and type(type_) is RecordType and len(value) == len(type_.fields):
        # The common case of the hot path, without the general machinery: a
        # record of primitive fields holding exactly its declared fields, in
        # order, each valid. Anything else, or a check that words its own
        # error, takes the general path, which also locates and words errors.
        out = {}
        try:
            # The lengths are equal (checked above); a keyword argument would
            # make zip parse its arguments the slow way on every call.
            for field, (key, item) in zip(type_.fields, value.items()):  # noqa: B905
                kind = field.type
                if (
                    field.name != key
                    or type(kind) is not Primitive
                    or not _PRIMITIVE_CHECKS[kind.kind](item)
                ):
                    break
                out[key] = item
            else:
                return out
        except _Invalid:
            pass
    try:
        return _Conformer(defaults, strict).check(value, type_)
    except _Invalid as invalid:
        raise ValidationError(render_path(invalid.segments[::-1]), invalid.problem) from None
    except RecursionError:
        raise ValidationError("$", "value nested too deeply") from None


def _expected(type_: Type, value: object) -> _Invalid:
    return _Invalid(f"expected {render_type(type_)}, found {describe_value(value)}")


def _check_string(value: object) -> bool:
    return type(value) is str


def _check_int(value: object) -> bool:
    if type(value) is not int:
        return False
    if INT_MIN <= value <= INT_MAX:
        return True
    raise _Invalid("expected Int, found an integer outside the 64-bit range")


def _check_float(value: object) -> bool:
    t = type(value)
    return t is float or t is int


def _check_bool(value: object) -> bool:
    return type(value) is bool


def _check_duration(value: object) -> bool:
    if type(value) is not int:
        return False
    if value < 0:
        raise _Invalid("expected Duration, found a negative integer")
    if value > INT_MAX:
        raise _Invalid("expected Duration, found an integer outside the 64-bit range")
    return True


def _string_form(name: str, test: Callable[[str], bool], form: str) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if type(value) is not str:
            return False
        if test(value):
            return True
        raise _Invalid(f"expected {name}, found a string that is not {form}")

    return check


_PRIMITIVE_CHECKS: dict[str, Callable[[object], bool]] = {
    "string": _check_string,
    "int": _check_int,
    "float": _check_float,
    "bool": _check_bool,
    "duration": _check_duration,
    "timestamp": _string_form("Timestamp", is_timestamp, "an RFC 3339 timestamp"),
    "uuid": _string_form("UUID", is_uuid, "a hyphenated UUID"),
    "bytes": _string_form("Bytes", is_base64, "padded base64"),
    "json": lambda value: True,
}


def _may_be_absent(f: Field) -> bool:
    # JSON counts as optional: it may hold null, so a missing JSON field reads as null
    return (
        f.has_default
        or isinstance(f.type, OptionalType)
        or (isinstance(f.type, Primitive) and f.type.kind == "json")
    )


class _Conformer:
    def __init__(self, defaults: bool, strict: bool) -> None:
        self.defaults = defaults
        self.strict = strict

    def check(self, value: object, type_: Type, shown: Type | None = None) -> JsonValue:
        """`shown` is the type to name in a mismatch: `String?` rather than the
        `String` inside it."""
        if isinstance(type_, Primitive):
            if _PRIMITIVE_CHECKS[type_.kind](value):
                return cast(JsonValue, value)  # the check accepted a JSON scalar
            raise _expected(shown or type_, value)
        if isinstance(type_, OptionalType):
            return None if value is None else self.check(value, type_.type, shown or type_)
        if isinstance(type_, RecordType):
            return self.record(value, type_, shown)
        if isinstance(type_, ListType):
            if type(value) is not list:
                raise _expected(shown or type_, value)
            return [self.at(i, item, type_.items) for i, item in enumerate(value)]
        if type(value) is not dict:
            raise _expected(shown or type_, value)
        return {k: self.at(k, v, type_.values) for k, v in value.items()}

    def at(self, segment: str | int, value: object, type_: Type) -> JsonValue:
        try:
            return self.check(value, type_)
        except _Invalid as invalid:
            invalid.segments.append(segment)
            raise

    def record(self, value: object, type_: RecordType, shown: Type | None) -> JsonObject:
        if type(value) is not dict:
            raise _expected(shown or type_, value)
        fields = type_.fields
        if len(value) == len(fields):
            # The common case, checked without a lookup table: exactly the
            # declared fields, in their declared order.
            out: JsonObject = {}
            for field, (key, item) in zip(fields, value.items(), strict=True):
                if field.name != key:
                    break
                out[key] = self.at(key, item, field.type)
            else:
                return out
        declared = {f.name: f for f in fields}
        out = {}
        unknown: str | None = None
        for key, item in value.items():
            f = declared.get(key)
            if f is not None:
                out[key] = self.at(key, item, f.type)
            else:
                if unknown is None:
                    unknown = key
                out[key] = item
        for f in type_.fields:
            if f.name in value:
                continue
            if f.has_default and self.defaults:
                out[f.name] = self.at(f.name, _as_declared(f.default, f.type), f.type)
            elif not _may_be_absent(f):
                raise _at(
                    f.name, f"missing required field `{f.name}` of type {render_type(f.type)}"
                )
        if self.strict and unknown is not None:
            raise _at(unknown, f"unknown field `{unknown}`")
        return out


def _at(segment: str, problem: str) -> _Invalid:
    invalid = _Invalid(problem)
    invalid.segments.append(segment)
    return invalid


def _as_declared(default: JsonValue, type_: Type) -> JsonValue:
    """A fresh copy of a default from the IR, with integers turned into floats
    where the type says Float: the IR's canonical JSON writes `0.0` as `0`."""
    if isinstance(type_, Primitive):
        if type_.kind == "float" and type(default) is int:
            return float(default)
        return _copy(default)
    if isinstance(type_, OptionalType):
        return None if default is None else _as_declared(default, type_.type)
    if isinstance(type_, ListType) and type(default) is list:
        return [_as_declared(item, type_.items) for item in default]
    if isinstance(type_, MapType) and type(default) is dict:
        return {k: _as_declared(v, type_.values) for k, v in default.items()}
    if isinstance(type_, RecordType) and type(default) is dict:
        fields = {f.name: f.type for f in type_.fields}
        return {
            k: _as_declared(v, fields[k]) if k in fields else _copy(v) for k, v in default.items()
        }
    return _copy(default)


def _copy(value: JsonValue) -> JsonValue:
    """A deep copy of a JSON value, so no caller can change the IR's constants."""
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value
