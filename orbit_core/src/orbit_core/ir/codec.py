"""JSON encoding of the IR.

`to_json(definition)` gives plain JSON values (dicts, lists, str, int, float,
bool, None) and `from_json(document)` reads them back, raising `IRError` with a
`$.path` on any malformed input: IR documents come from users, so nothing here
may fail with anything else.

Optional members that are absent (None, empty) are omitted, so adding a new
optional member to the IR never changes the encoding, and therefore the hash,
of a definition that does not use it.

Integers: the hash is taken over RFC 8785 canonical JSON, whose numbers are
IEEE doubles, so an integer beyond ±(2^53 − 1) has no exact JSON number.
Every integer the layout holds (an `int` literal's `value`, a `duration`'s
`ms`, every `*_ms`, limit and setting, and the integers of a field's
`default` where its type says Int, Float or Duration) is therefore written as a JSON
number when it fits and as its decimal digits in a string when it does not
(`int_to_json`). Each integer has exactly one form, or the same definition
could have two hashes: the reader refuses a string for an integer that fits
in a number, and anything outside the 64-bit range (`_int`). Integers inside
a `Json` value cannot be told from strings, so none beyond ±(2^53 − 1) may
appear there (the compiler reports it; the reader refuses the number).
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from orbit_core import limits
from orbit_core.eval.jsonvalue import describe_value
from orbit_core.ir import expr as e
from orbit_core.ir.definition import (
    DOCUMENT_CLASSES,
    EFFECT_CLASSES,
    HANDLER_KINDS,
    IR_VERSIONS,
    STEP_KINDS,
    ChildContract,
    Definition,
    TaskContract,
)
from orbit_core.ir.names import name_problem
from orbit_core.ir.types import (
    NO_DEFAULT,
    PRIMITIVES,
    Field,
    ListType,
    MapType,
    OptionalType,
    Primitive,
    RecordType,
    Type,
)
from orbit_core.jsontypes import JsonObject, JsonValue


class IRError(ValueError):
    """A document is not a well-formed IR definition."""


T = TypeVar("T")


def _fail(path: str, message: str) -> IRError:
    return IRError(f"{path}: {message}" if path else message)


def _obj(value: object, path: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected an object, found {describe_value(value)}")
    return value


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"expected a string, found {describe_value(value)}")
    return value


# The string form of an integer: its decimal digits, no sign but `-`, no
# leading zero. Digits are counted before `int()` converts them.
_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]{0,24})", re.ASCII)


def int_to_json(value: int) -> int | str:
    """An IR integer as the document holds it: a number within ±(2^53 − 1)
    (exact in canonical JSON), else a string of its decimal digits. Raises
    IRError beyond 64 bits: a `Definition` built in Python can hold any int."""
    if limits.IR_INT_MIN <= value <= limits.IR_INT_MAX:
        return value
    if not limits.INT_MIN <= value <= limits.INT_MAX:
        raise IRError(f"the integer {value} is outside the 64-bit range")
    return str(value)


def _int(value: object, path: str) -> int:
    """An integer in either of its forms (`int_to_json`), within 64 bits."""
    if isinstance(value, str):
        return _int_text(value, path)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected an integer, found {describe_value(value)}")
    return value


def _int_text(text: str, path: str) -> int:
    if not _INT_TEXT.fullmatch(text):
        raise _fail(path, f"expected an integer, found {describe_value(text)}")
    value = int(text)
    if limits.IR_INT_MIN <= value <= limits.IR_INT_MAX:
        raise _fail(
            path,
            f"the integer {value} must be written as a JSON number: only integers "
            f"beyond ±{limits.IR_INT_MAX} are written as strings",
        )
    if not limits.INT_MIN <= value <= limits.INT_MAX:
        raise _fail(path, "integer out of range")
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, f"expected a boolean, found {describe_value(value)}")
    return value


def _list(value: object, path: str) -> list[object]:
    if not isinstance(value, list):
        raise _fail(path, f"expected an array, found {describe_value(value)}")
    return value


# ---------------------------------------------------------------- types


def type_to_json(t: Type) -> JsonObject:
    match t:
        case Primitive(kind):
            return {"kind": kind}
        case ListType(items):
            return {"kind": "list", "items": type_to_json(items)}
        case MapType(values):
            return {"kind": "map", "values": type_to_json(values)}
        case OptionalType(inner):
            return {"kind": "optional", "type": type_to_json(inner)}
        case RecordType(fields, name):
            out: JsonObject = {"kind": "record"}
            if name is not None:
                out["name"] = name
            out["fields"] = [_field_to_json(f) for f in fields]
            return out


def _field_to_json(f: Field) -> JsonObject:
    out: JsonObject = {"name": f.name, "type": type_to_json(f.type)}
    if f.has_default:
        out["default"] = value_to_json(f.type, f.default)
    return out


# The kinds whose integers a default writes in `int_to_json`'s forms (an Int
# given where a Float is expected stays an integer).
_INT_KINDS = ("int", "float", "duration")


def value_to_json(t: Type, value: Any) -> Any:
    """A constant value of type `t` (a field's default) as the document holds
    it: the integers where `t` says Int, Float or Duration in `int_to_json`'s
    forms, everything else as it is."""
    match t:
        case Primitive(kind) if kind in _INT_KINDS and type(value) is int:
            return int_to_json(value)
        case OptionalType(inner) if value is not None:
            return value_to_json(inner, value)
        case ListType(items) if type(value) is list:
            return [value_to_json(items, v) for v in value]
        case MapType(values) if type(value) is dict:
            return {k: value_to_json(values, v) for k, v in value.items()}
        case RecordType(fields) if type(value) is dict:
            types = {f.name: f.type for f in fields}
            return {
                k: v if k not in types else value_to_json(types[k], v) for k, v in value.items()
            }
        case _:
            return value


def _value_from_json(t: Type, value: Any, path: str) -> Any:
    """The inverse of `value_to_json`: reads the string form where `t` says
    Int, Float or Duration (and refuses it where the integer fits a number)."""
    match t:
        case Primitive(kind) if kind in _INT_KINDS and type(value) is str:
            return _int_text(value, path)
        case OptionalType(inner) if value is not None:
            return _value_from_json(inner, value, path)
        case ListType(items) if type(value) is list:
            return [_value_from_json(items, v, f"{path}[{i}]") for i, v in enumerate(value)]
        case MapType(values) if type(value) is dict:
            return {k: _value_from_json(values, v, _member(path, k)) for k, v in value.items()}
        case RecordType(fields) if type(value) is dict:
            types = {f.name: f.type for f in fields}
            return {
                k: v if k not in types else _value_from_json(types[k], v, _member(path, k))
                for k, v in value.items()
            }
        case _:
            return value


def _member(path: str, key: str) -> str:
    return limits.render_path([key]).replace("$", path, 1)


def type_from_json(value: object, path: str = "$") -> Type:
    obj = _obj(value, path)
    kind = _str(obj.get("kind"), f"{path}.kind")
    if kind in PRIMITIVES:
        return Primitive(kind)
    if kind == "list":
        return ListType(type_from_json(obj.get("items"), f"{path}.items"))
    if kind == "map":
        return MapType(type_from_json(obj.get("values"), f"{path}.values"))
    if kind == "optional":
        return OptionalType(type_from_json(obj.get("type"), f"{path}.type"))
    if kind == "record":
        return record_from_json(obj, path)
    raise _fail(f"{path}.kind", f"unknown type kind `{kind}`")


def record_from_json(value: object, path: str = "$") -> RecordType:
    obj = _obj(value, path)
    if obj.get("kind") != "record":
        raise _fail(f"{path}.kind", "expected a record type")
    name = obj.get("name")
    fields = []
    for i, raw in enumerate(_list(obj.get("fields"), f"{path}.fields")):
        fpath = f"{path}.fields[{i}]"
        fobj = _obj(raw, fpath)
        ftype = type_from_json(fobj.get("type"), f"{fpath}.type")
        default = fobj.get("default", NO_DEFAULT)
        if default is not NO_DEFAULT:
            default = _value_from_json(ftype, default, f"{fpath}.default")
        fields.append(
            Field(name=_str(fobj.get("name"), f"{fpath}.name"), type=ftype, default=default)
        )
    return RecordType(
        fields=tuple(fields), name=None if name is None else _str(name, f"{path}.name")
    )


# ---------------------------------------------------------------- expressions
#
# Writing dispatches on the node's class with one `match` (mypy reports a
# missing return if a class of the `Expr` union is left out), reading on the
# `op` tag with one table.

# Nodes with no members, written as just their tag.
_LEAVES: dict[str, Callable[[], e.Expr]] = {
    "null": e.Null,
    "input": e.Input,
    "execution": e.Execution,
    "failure": e.Failure,
    "event": e.Event,
}
_LEAF_OPS = {cls: op for op, cls in _LEAVES.items()}
# Literals written as `{"op": ..., "value": ...}`.
_LITERAL_OPS: dict[type[e.Expr], str] = {
    e.Str: "str",
    e.Int: "int",
    e.Float: "float",
    e.Bool: "bool",
}


def expr_to_json(x: e.Expr) -> JsonObject:
    match x:
        case e.Null() | e.Input() | e.Execution() | e.Failure() | e.Event():
            return {"op": _LEAF_OPS[type(x)]}
        case e.Str(value) | e.Int(value) | e.Float(value) | e.Bool(value):
            written = int_to_json(x.value) if isinstance(x, e.Int) else value
            return {"op": _LITERAL_OPS[type(x)], "value": written}
        case e.Duration(ms):
            return {"op": "duration", "ms": int_to_json(ms)}
        case e.StepRef(name):
            return {"op": "step", "name": name}
        case e.Var(name):
            return {"op": "var", "name": name}
        case e.Get(target, field):
            return {"op": "get", "target": expr_to_json(target), "field": field}
        case e.Index(target, index):
            return {"op": "index", "target": expr_to_json(target), "index": expr_to_json(index)}
        case e.Lambda(param, body):
            return {"op": "lambda", "param": param, "body": expr_to_json(body)}
        case e.Call(fn, args, float_sum):
            flag = {"float_sum": True} if float_sum else {}
            return {"op": "call", "fn": fn, "args": [expr_to_json(a) for a in args], **flag}
        case e.Unary(op, arg):
            return {"op": op, "arg": expr_to_json(arg)}
        case e.Binary(op, left, right):
            return {"op": op, "left": expr_to_json(left), "right": expr_to_json(right)}
        case e.If(cond, then, otherwise):
            return {
                "op": "if",
                "cond": expr_to_json(cond),
                "then": expr_to_json(then),
                "else": expr_to_json(otherwise),
            }
        case e.Object(entries):
            return {
                "op": "object",
                "entries": [{"key": en.key, "value": expr_to_json(en.value)} for en in entries],
            }
        case e.List(items):
            return {"op": "list", "items": [expr_to_json(i) for i in items]}


def expr_from_json(value: object, path: str = "$") -> e.Expr:
    obj = _obj(value, path)
    op = _str(obj.get("op"), f"{path}.op")
    read = _READERS.get(op)
    if read is None:
        raise _fail(f"{path}.op", f"unknown expression `{op}`")
    return read(obj, path, op)


# A reader gets the node's object, its path and its `op` (several ops share a reader).
_Reader = Callable[[Mapping[str, object], str, str], e.Expr]


def _sub(obj: Mapping[str, object], path: str, key: str) -> e.Expr:
    return expr_from_json(obj.get(key), f"{path}.{key}")


def _read_int(obj: Mapping[str, object], path: str, _op: str) -> e.Expr:
    v = _int(obj.get("value"), f"{path}.value")
    if not limits.INT_MIN <= v <= limits.INT_MAX:
        raise _fail(f"{path}.value", "integer out of range")
    return e.Int(v)


def _read_float(obj: Mapping[str, object], path: str, _op: str) -> e.Expr:
    raw = obj.get("value")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise _fail(f"{path}.value", f"expected a finite number, found {describe_value(raw)}")
    return e.Float(float(raw))


def _read_call(obj: Mapping[str, object], path: str, _op: str) -> e.Expr:
    args = _list(obj.get("args"), f"{path}.args")
    float_sum = _bool(obj.get("float_sum", False), f"{path}.float_sum")
    return e.Call(
        _str(obj.get("fn"), f"{path}.fn"),
        tuple(expr_from_json(a, f"{path}.args[{i}]") for i, a in enumerate(args)),
        float_sum,
    )


def _read_object(obj: Mapping[str, object], path: str, _op: str) -> e.Expr:
    entries = []
    for i, raw in enumerate(_list(obj.get("entries"), f"{path}.entries")):
        epath = f"{path}.entries[{i}]"
        eobj = _obj(raw, epath)
        entries.append(e.Entry(_str(eobj.get("key"), f"{epath}.key"), _sub(eobj, epath, "value")))
    return e.Object(tuple(entries))


def _read_list(obj: Mapping[str, object], path: str, _op: str) -> e.Expr:
    items = _list(obj.get("items"), f"{path}.items")
    return e.List(tuple(expr_from_json(x, f"{path}.items[{i}]") for i, x in enumerate(items)))


def _leaf(cls: Callable[[], e.Expr]) -> _Reader:
    return lambda _obj, _path, _op: cls()


_READERS: dict[str, _Reader] = {
    **{op: _leaf(cls) for op, cls in _LEAVES.items()},
    "str": lambda o, p, _: e.Str(_str(o.get("value"), f"{p}.value")),
    "int": _read_int,
    "float": _read_float,
    "bool": lambda o, p, _: e.Bool(_bool(o.get("value"), f"{p}.value")),
    "duration": lambda o, p, _: e.Duration(_int(o.get("ms"), f"{p}.ms")),
    "step": lambda o, p, _: e.StepRef(_str(o.get("name"), f"{p}.name")),
    "var": lambda o, p, _: e.Var(_str(o.get("name"), f"{p}.name")),
    "get": lambda o, p, _: e.Get(_sub(o, p, "target"), _str(o.get("field"), f"{p}.field")),
    "index": lambda o, p, _: e.Index(_sub(o, p, "target"), _sub(o, p, "index")),
    "lambda": lambda o, p, _: e.Lambda(_str(o.get("param"), f"{p}.param"), _sub(o, p, "body")),
    "call": _read_call,
    **{op: (lambda o, p, op: e.Unary(op, _sub(o, p, "arg"))) for op in e.UNARY_OPS},
    **{
        op: (lambda o, p, op: e.Binary(op, _sub(o, p, "left"), _sub(o, p, "right")))
        for op in e.BINARY_OPS
    },
    "if": lambda o, p, _: e.If(_sub(o, p, "cond"), _sub(o, p, "then"), _sub(o, p, "else")),
    "object": _read_object,
    "list": _read_list,
}


# ---------------------------------------------------------------- definitions


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, lambda v, _: _str(v, "$"))
    conv.register_structure_hook(int, lambda v, _: _int(v, "$"))
    conv.register_unstructure_hook(int, int_to_json)
    conv.register_structure_hook(bool, lambda v, _: _bool(v, "$"))
    conv.register_unstructure_hook_func(_is_type, type_to_json)
    conv.register_structure_hook_func(_is_type, lambda v, _: type_from_json(v))
    conv.register_unstructure_hook(RecordType, type_to_json)
    conv.register_structure_hook(RecordType, lambda v, _: record_from_json(v))
    conv.register_unstructure_hook_func(_is_expr, expr_to_json)
    conv.register_structure_hook_func(_is_expr, lambda v, _: expr_from_json(v))
    conv.register_unstructure_hook_func(
        _is_optional_expr, lambda v: None if v is None else expr_to_json(v)
    )
    conv.register_structure_hook_func(
        _is_optional_expr, lambda v, _: None if v is None else expr_from_json(v)
    )

    renames = {"with_": "with", "for_each": "for", "over": "in"}
    for cls in DOCUMENT_CLASSES:
        names = {a.name for a in attrs.fields(cls)}
        # Keyword arguments of cattrs' factories, whose other options are typed apart.
        overrides: dict[str, Any] = {
            k: override(rename=v) for k, v in renames.items() if k in names
        }
        conv.register_unstructure_hook(
            cls,
            make_dict_unstructure_fn(cls, conv, _cattrs_omit_if_default=True, **overrides),
        )
        conv.register_structure_hook(
            cls,
            make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True, **overrides),
        )
    conv.register_structure_hook(
        TaskContract | ChildContract,
        lambda v, _: conv.structure(v, ChildContract if "definition_hash" in v else TaskContract),
    )
    return conv


def _is_type(t: object) -> bool:
    return t is Type or t in (Primitive, ListType, MapType, OptionalType)


_EXPR_CLASSES = frozenset(typing.get_args(e.Expr))


def _is_expr(t: object) -> bool:
    return t is e.Expr or (t in _EXPR_CLASSES)


def _is_optional_expr(t: object) -> bool:
    args = set(typing.get_args(t))
    return type(None) in args and args - {type(None)} == _EXPR_CLASSES


_CONVERTER = _make_converter()

# Key order of the written document: the envelope first, then the body.
_ORDER = (
    "ir_version",
    "name",
    "version",
    "description",
    "definition_hash",
    "timeout_ms",
    "input",
    "output",
    "steps",
    "result",
    "signals",
    "queries",
    "handlers",
    "events",
    "limits",
    "continue_as_new",
    "migrations",
    "flow",
    "search",
    "retention_ms",
    "contracts",
    "source_map",
)


def to_json(defn: Definition) -> JsonObject:
    """The IR document. `description` and `timeout_ms` are always written (null when absent)."""
    raw = _CONVERTER.unstructure(defn)
    raw.setdefault("description", None)
    raw.setdefault("timeout_ms", None)
    raw.setdefault("definition_hash", defn.definition_hash)
    return {k: raw[k] for k in _ORDER if k in raw}


def from_json(document: object) -> Definition:
    """Reads an IR document; raises IRError (never anything else) when it is malformed."""
    _check_shape(document)
    obj = _obj(document, "$")
    version = obj.get("ir_version")
    if version not in IR_VERSIONS:
        supported = ", ".join(f"`{v}`" for v in IR_VERSIONS)
        raise IRError(f"unsupported IR version `{version}`; this runtime supports {supported}")
    try:
        defn = _CONVERTER.structure(dict(obj), Definition)
    except IRError:
        raise
    except Exception as exc:  # cattrs reports nested problems as exception groups
        raise IRError(_explain(exc)) from None
    _check_enums(defn)
    problem = name_problem(defn)
    if problem is not None:
        raise IRError(problem)
    return defn


def _check_shape(document: object) -> None:
    """Depth, integer range and JSON types, before anything recursive reads
    the document (`orbit_core.limits`): IR integers must survive the
    canonical JSON of the definition hash."""
    try:
        limits.check_json(document, int_min=limits.IR_INT_MIN, int_max=limits.IR_INT_MAX)
    except limits.JsonShapeError as exc:
        raise IRError(str(exc)) from None


def _explain(exc: BaseException) -> str:
    if isinstance(exc, IRError):
        return str(exc)
    if isinstance(exc, cattrs.BaseValidationError):
        messages = cattrs.transform_error(exc, path="$", format_exception=_format_leaf)
        return "; ".join(_place(m) for m in messages[:3])
    return str(exc) or type(exc).__name__


def _place(message: str) -> str:
    """Turns cattrs' `detail @ $.path` into our `$.path: detail`."""
    detail, _, path = message.rpartition(" @ ")
    if detail.startswith("\x00"):
        # From one of our hooks: `\x00<sub-path>\x00<detail>`, the sub-path relative to `path`.
        _, sub, detail = detail.split("\x00", 2)
        path += sub
    return f"{path}: {detail}"


def _format_leaf(exc: BaseException, type_: object) -> str:
    if isinstance(exc, IRError):
        # Raised by our own hooks, whose paths start afresh at `$`.
        sub, _, detail = str(exc).partition(": ")
        return f"\x00{sub.removeprefix('$')}\x00{detail}"
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown member(s) {', '.join(sorted(exc.extra_fields))}"
    return f"invalid value ({type(exc).__name__})"


def _check_enums(defn: Definition) -> None:
    from orbit_core.ir.walk import all_steps

    for step in all_steps(defn):
        if step.kind not in STEP_KINDS:
            raise IRError(f"step `{step.name}`: unknown kind `{step.kind}`")
        for retry in (step.retry, step.compensate.retry if step.compensate else None):
            if retry is not None and retry.backoff not in ("fixed", "exponential"):
                raise IRError(f"step `{step.name}`: unknown backoff `{retry.backoff}`")
    for contract in defn.contracts.values():
        effect = contract.effect if isinstance(contract, TaskContract) else None
        if effect is not None and effect not in EFFECT_CLASSES:
            raise IRError(f"task `{contract.name}`: unknown effect class `{effect}`")
    for kind in defn.handlers:
        if kind not in HANDLER_KINDS:
            raise IRError(f"unknown handler kind `{kind}`")


def structure(value: object, cls: type[T]) -> T:
    """Structures any IR class (used for parts stored separately, e.g. in events)."""
    return _CONVERTER.structure(value, cls)


def unstructure(value: object) -> JsonValue:
    unstructured: JsonValue = _CONVERTER.unstructure(value)
    return unstructured
