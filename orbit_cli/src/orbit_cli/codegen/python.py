"""Python: one module of frozen dataclasses (standard library only).

Dataclasses rather than attrs because generated code must not add a
dependency to the worker; they are frozen, and their fields are ordered
required first (Python 3.9, the SDK's oldest, has no `kw_only`), so build
them with keywords. `from_json(value, path)` checks a decoded JSON value and
raises `DecodeError` naming the field path (`input.items[0].quantity`);
`to_json()` gives back plain JSON values. Lists decode to tuples and are
typed `Sequence`, maps to dicts typed `Mapping`; Duration is a `timedelta`,
Timestamp an aware `datetime`, UUID a `uuid.UUID`, Bytes `bytes`, JSON the
recursive `JsonValue`. Each contract is a `TaskContract` value (name,
version, hash, codecs) that `orbit_sdk.Worker.task` accepts.
"""

from __future__ import annotations

import json
import keyword

from orbit_cli.codegen.model import (
    ListOf,
    MapOf,
    Module,
    Named,
    Opt,
    Prim,
    Record,
    Ref,
    upper_snake,
)

_PRIM = {
    "string": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "bytes": "bytes",
    "duration": "datetime.timedelta",
    "timestamp": "datetime.datetime",
    "uuid": "uuid.UUID",
    "json": "JsonValue",
}


def attr(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) or name in ("from_json", "to_json") else name


def annotation(ref: Ref) -> str:
    match ref:
        case Prim(kind):
            return _PRIM[kind]
        case ListOf(items):
            return f"Sequence[{annotation(items)}]"
        case MapOf(values):
            return f"Mapping[str, {annotation(values)}]"
        case Opt(inner):
            return f"{annotation(inner)} | None"
        case Named(name):
            return name


def decoder(ref: Ref) -> str:
    """An expression for a function `(value, path) -> T`."""
    match ref:
        case Prim(kind):
            return f"_{kind}"
        case ListOf(items):
            return f"_list_of({decoder(items)})"
        case MapOf(values):
            return f"_map_of({decoder(values)})"
        case Opt(inner):
            return f"_optional_of({decoder(inner)})"
        case Named(name):
            return f"{name}.from_json"


def encode(ref: Ref, value: str, depth: int = 0) -> str:
    """An expression encoding `value` (of type `ref`) as JSON."""
    var = f"v{depth}"
    match ref:
        case Prim("bytes"):
            return f'base64.b64encode({value}).decode("ascii")'
        case Prim("duration"):
            return f"_duration_ms({value})"
        case Prim("timestamp"):
            return f"_rfc3339({value})"
        case Prim("uuid"):
            return f"str({value})"
        case Prim(_):
            return value
        case ListOf(items):
            item = encode(items, var, depth + 1)
            return f"list({value})" if item == var else f"[{item} for {var} in {value}]"
        case MapOf(values):
            item = encode(values, var, depth + 1)
            key = f"k{depth}"
            if item == var:
                return f"dict({value})"
            return f"{{{key}: {item} for {key}, {var} in {value}.items()}}"
        case Opt(inner):
            inner_code = encode(inner, var, depth + 1)
            if inner_code == var:
                return value
            if inner_code.endswith(f"({var})") and "(" not in inner_code[: -len(var) - 2]:
                return f"_or_none({value}, {inner_code[: -len(var) - 2]})"
            return f"_or_none({value}, lambda {var}: {inner_code})"
        case Named(_):
            return f"{value}.to_json()"


LINE = 88  # ruff format's default line length


def _fit(line: str) -> list[str]:
    """`line` as ruff format lays it out when it is too long: the last
    bracket pair that ends the line is opened onto its own lines, its
    content split at top-level commas if it still does not fit."""
    if len(line) <= LINE:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    end = len(line.rstrip(",:"))
    if end == 0 or line[end - 1] not in ")]}":
        return [line]
    closer = line[end - 1]
    opener = {")": "(", "]": "[", "}": "{"}[closer]
    depth = 0
    start = -1
    in_string = ""
    for i in range(end - 1, -1, -1):
        c = line[i]
        if in_string:
            if c == in_string:
                in_string = ""
            continue
        if c in "\"'":
            in_string = c
        elif c in ")]}":
            depth += 1
        elif c in "([{":
            depth -= 1
            if depth == 0:
                start = i
                break
    if start <= len(indent) or line[start] != opener:
        return [line]
    head, body, tail = line[: start + 1], line[start + 1 : end - 1], line[end - 1 :]
    inner = indent + "    "
    if len(inner) + len(body) <= LINE and not body.endswith(","):
        return [head, *_fit(inner + body), indent + tail]
    at = _top_level(body, " for ")
    if at >= 0:  # a comprehension: ruff breaks before `for`
        return [head, inner + body[:at], inner + body[at + 1 :], indent + tail]
    parts = _split_commas(body)
    return [head, *[piece for part in parts for piece in _fit(f"{inner}{part},")], indent + tail]


def _top_level(body: str, word: str) -> int:
    depth = 0
    for i, c in enumerate(body):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and body.startswith(word, i):
            return i
    return -1


def _split_commas(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    in_string = ""
    for c in body:
        if in_string:
            current += c
            if c == in_string:
                in_string = ""
            continue
        if c in "\"'":
            in_string = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += c
    if current.strip():
        parts.append(current.strip())
    return parts


def _literal(value: object) -> str:
    """A JSON value as a Python literal, strings in double quotes."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _docstring(doc: str | None, indent: str) -> list[str]:
    if not doc:
        return []
    lines = doc.replace('"""', '\\"\\"\\"').splitlines()
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [
        f'{indent}"""{lines[0]}',
        *[f"{indent}{line}" if line else "" for line in lines[1:]],
        f'{indent}"""',
    ]


def _record(record: Record) -> list[str]:
    out = ["@dataclasses.dataclass(frozen=True)", f"class {record.name}:"]
    doc = _docstring(record.doc, "    ")
    out.extend(doc)
    if doc:
        out.append("")
    ordered = [f for f in record.fields if f.required] + [
        f for f in record.fields if not f.required
    ]
    for f in ordered:
        name = attr(f.name)
        line = f"    {name}: {annotation(f.type)}"
        if f.has_default:
            plain = f.type.inner if isinstance(f.type, Opt) else f.type
            literal = isinstance(plain, Prim) and plain.kind in ("string", "int", "float", "bool")
            if literal or f.default is None:
                value = f.default
                if isinstance(plain, Prim) and plain.kind == "float" and isinstance(value, int):
                    value = float(value)
                line += f" = {_literal(value)}"
            else:
                line += (
                    f" = dataclasses.field(default_factory=lambda: {decoder(f.type)}"
                    f'({_literal(f.default)}, "$"))'
                )
        elif not f.required:
            line += " = None"
        out.extend(_fit(line))
        if f.doc:
            out.extend(_docstring(f.doc, "    "))
    if not record.fields and doc:
        out.pop()  # the blank line after the docstring
    out += [
        *([""] if record.fields or doc else []),
        "    @classmethod",
        f'    def from_json(cls, value: object, path: str = "$") -> {record.name}:',
        '        """Checks a decoded JSON value; DecodeError names the first bad field."""',
    ]
    if record.fields:
        out.append("        obj = _object(value, path)")
        out.append("        return cls(")
        for f in record.fields:
            if f.has_default:
                got = f'obj.get("{f.name}", {_literal(f.default)})'
            elif not f.required:
                got = f'obj.get("{f.name}")'
            else:
                got = f'_required(obj, "{f.name}", path)'
            out.extend(
                _fit(f'            {attr(f.name)}={decoder(f.type)}({got}, path + ".{f.name}"),')
            )
        out.append("        )")
    else:
        out.append("        _object(value, path)")
        out.append("        return cls()")
    out += ["", "    def to_json(self) -> dict[str, JsonValue]:"]
    if record.fields:
        out.append("        return {")
        for f in record.fields:
            out.extend(_fit(f'            "{f.name}": {encode(f.type, "self." + attr(f.name))},'))
        out.append("        }")
    else:
        out.append("        return {}")
    return out


_PRELUDE = '''
from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from typing import TypeAlias

# A string, so that Python 3.9 never evaluates the `|`.
JsonValue: TypeAlias = (
    "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
)
"""Any JSON value (ORBIT's `JSON` type)."""

In = TypeVar("In")
Out = TypeVar("Out")
T = TypeVar("T")

_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1
_UUID = re.compile(
    r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
)
_TIMESTAMP = re.compile(
    r"^\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?([Zz]|[+-]\\d{2}:\\d{2})$"
)


class DecodeError(ValueError):
    """A JSON value that does not match its contract type, at `path`."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _expected(path: str, what: str, value: object) -> DecodeError:
    return DecodeError(path, f"expected {what}, found {_kind(value)}")


def _object(value: object, path: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise _expected(path, "an object", value)
    return value


def _required(obj: Mapping[str, object], name: str, path: str) -> object:
    if name not in obj:
        raise DecodeError(f"{path}.{name}", "missing required field")
    return obj[name]


def _string(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise _expected(path, "a string", value)
    return value


def _int(value: object, path: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _expected(path, "an integer", value)
    if not _INT_MIN <= value <= _INT_MAX:
        raise DecodeError(path, "integer out of the 64-bit range")
    return value


def _float(value: object, path: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _expected(path, "a number", value)
    if isinstance(value, float) and not math.isfinite(value):
        raise DecodeError(path, "expected a finite number")
    return float(value)


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _expected(path, "a boolean", value)
    return value


def _bytes(value: object, path: str) -> bytes:
    text = _string(value, path)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DecodeError(path, "expected standard padded base64") from None


def _duration(value: object, path: str) -> datetime.timedelta:
    ms = _int(value, path)
    if ms < 0:
        raise DecodeError(path, "expected a non-negative number of milliseconds")
    return datetime.timedelta(milliseconds=ms)


def _duration_ms(value: datetime.timedelta) -> int:
    return round(value / datetime.timedelta(milliseconds=1))


def _timestamp(value: object, path: str) -> datetime.datetime:
    text = _string(value, path)
    if not _TIMESTAMP.match(text):
        raise DecodeError(path, "expected an RFC 3339 timestamp")
    text = text[:10] + "T" + text[11:].upper().replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # fromisoformat takes at most 6 fraction digits before Python 3.11
        digits = len(rest) - len(rest.lstrip("0123456789"))
        rest = rest[:digits][:6].ljust(6, "0") + rest[digits:]
        text = head + dot + rest
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise DecodeError(path, "expected an RFC 3339 timestamp") from None


def _rfc3339(value: datetime.datetime) -> str:
    if value.tzinfo is None:
        raise ValueError("a Timestamp needs a time zone")
    return value.isoformat().replace("+00:00", "Z")


def _uuid(value: object, path: str) -> uuid.UUID:
    text = _string(value, path)
    if not _UUID.match(text):
        raise DecodeError(path, "expected a hyphenated UUID")
    return uuid.UUID(text)


def _json(value: object, path: str) -> JsonValue:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _float(value, path)
    if isinstance(value, (list, tuple)):
        return [_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): _json(v, f"{path}.{k}") for k, v in value.items()}
    raise _expected(path, "a JSON value", value)


def _list_of(
    item: Callable[[object, str], T],
) -> Callable[[object, str], tuple[T, ...]]:
    def decode(value: object, path: str) -> tuple[T, ...]:
        if not isinstance(value, (list, tuple)):
            raise _expected(path, "an array", value)
        return tuple(item(v, f"{path}[{i}]") for i, v in enumerate(value))

    return decode


def _map_of(item: Callable[[object, str], T]) -> Callable[[object, str], dict[str, T]]:
    def decode(value: object, path: str) -> dict[str, T]:
        return {k: item(v, f"{path}.{k}") for k, v in _object(value, path).items()}

    return decode


def _or_none(value: T | None, encode: Callable[[T], JsonValue]) -> JsonValue:
    return None if value is None else encode(value)


def _optional_of(item: Callable[[object, str], T]) -> Callable[[object, str], T | None]:
    def decode(value: object, path: str) -> T | None:
        return None if value is None else item(value, path)

    return decode


@dataclasses.dataclass(frozen=True)
class TaskContract(Generic[In, Out]):
    """A task contract: what a worker registers and a typed handler serves."""

    name: str
    version: str
    contract_hash: str
    """`sha256:` + 64 hex digits; the runtime refuses a worker whose hash differs."""
    contract: str
    """The hashed contract document, as canonical JSON."""
    decode_input: Callable[[object, str], In]
    encode_input: Callable[[In], JsonValue]
    decode_output: Callable[[object, str], Out]
    encode_output: Callable[[Out], JsonValue]


@dataclasses.dataclass(frozen=True)
class WorkflowType(Generic[In, Out]):
    """A workflow's input and output, for clients that start it."""

    name: str
    version: str
    encode_input: Callable[[In], JsonValue]
    decode_output: Callable[[object, str], Out]


@dataclasses.dataclass(frozen=True)
class MessageType(Generic[T]):
    """A workflow's signal payload or query answer."""

    workflow: str
    name: str
    encode: Callable[[T], JsonValue]
    decode: Callable[[object, str], T]
'''


def _codec(ref: Ref) -> tuple[str, str]:
    """(decoder, encoder) expressions for a value of `ref`."""
    if isinstance(ref, Named):
        return f"{ref.name}.from_json", f"{ref.name}.to_json"
    encoded = encode(ref, "v")
    return decoder(ref), "lambda v: v" if encoded == "v" else f"lambda v: {encoded}"


def render(module: Module, package: str) -> dict[str, str]:
    out = [
        "# Code generated by `orbit codegen`. DO NOT EDIT.",
        *[f"# Source: {source}" for source in module.sources],
        '"""Typed ORBIT task contracts and workflow payloads (generated)."""',
    ]
    out.extend(_PRELUDE.rstrip("\n").split("\n"))
    for record in module.records:
        out += ["", "", *_record(record)]
    for contract in module.contracts:
        const = upper_snake(contract.ident)
        dec_in, enc_in = _codec(contract.input)
        dec_out, enc_out = _codec(contract.output)
        document = json.dumps(contract.document, sort_keys=True, separators=(",", ":"))
        out += [
            "",
            "",
            f"{const} = TaskContract(",
            f'    name="{contract.task}",',
            f'    version="{contract.version}",',
            f'    contract_hash="{contract.hash}",',
            *_fit(f"    contract={document!r},"),
            *_fit(f"    decode_input={dec_in},"),
            *_fit(f"    encode_input={enc_in},"),
            *_fit(f"    decode_output={dec_out},"),
            *_fit(f"    encode_output={enc_out},"),
            ")",
        ]
        doc = contract.doc or contract.description
        out.extend(
            _docstring(doc or f"The `{contract.task}@{contract.version}` task contract.", "")
        )
        out += [
            *_fit(
                f"{contract.ident}Handler = Callable[[{annotation(contract.input)}, Any], "
                f"{annotation(contract.output)}]"
            ),
            f'"""A handler of `{contract.task}`: (input, orbit_sdk.Context) -> output."""',
        ]
    for flow in module.workflows:
        const = upper_snake(flow.ident)
        _, enc_in = _codec(flow.input)
        dec_out, _ = _codec(flow.output)
        out += [
            "",
            "",
            f"{const}_WORKFLOW = WorkflowType(",
            f'    name="{flow.name}",',
            f'    version="{flow.version}",',
            *_fit(f"    encode_input={enc_in},"),
            *_fit(f"    decode_output={dec_out},"),
            ")",
        ]
        out.extend(_docstring(flow.doc, ""))
        for kind, messages in (("SIGNAL", flow.signals), ("QUERY", flow.queries)):
            for message in messages:
                dec, enc = _codec(message.type)
                out += [
                    f"{const}_{kind}_{upper_snake(message.name)} = MessageType(",
                    f'    workflow="{flow.name}",',
                    f'    name="{message.name}",',
                    f"    encode={enc},",
                    f"    decode={dec},",
                    ")",
                ]
                out.extend(_docstring(message.doc, ""))
    return {f"{package}.py": "\n".join(out) + "\n"}
