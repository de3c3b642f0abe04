"""Facts about runtime JSON values shared by the evaluator and the validator.

Runtime values are what a JSON parser returns: dict, list, str, int, float, bool
and None. `bool` is a subclass of `int` in Python but never a number in ORBIT,
so every test here compares `type(x)` exactly instead of using isinstance.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import cast

import orjson

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1


def describe_value(value: object) -> str:
    """The kind of a JSON value as messages name it: `a string`, `an integer`, ..."""
    t = type(value)
    if t is str:
        return "a string"
    if t is bool:
        return "a boolean"
    if t is int:
        return "an integer"
    if t is float:
        return "a number"
    if value is None:
        return "null"
    if t is list:
        return "an array"
    return "an object"


def is_number(value: object) -> bool:
    t = type(value)
    return t is int or t is float


def json_equal(a: object, b: object) -> bool:
    """Structural equality: numbers by value (`1 == 1.0`), booleans never equal
    numbers, objects key by key regardless of order."""
    ta = type(a)
    tb = type(b)
    if ta is tb:
        # `type(..) is` (not isinstance) for speed; the casts only tell mypy.
        if ta is list:
            la, lb = cast(list[object], a), cast(list[object], b)
            return len(la) == len(lb) and all(json_equal(x, y) for x, y in zip(la, lb, strict=True))
        if ta is dict:
            da, db = cast(dict[str, object], a), cast(dict[str, object], b)
            return da.keys() == db.keys() and all(json_equal(v, db[k]) for k, v in da.items())
        return bool(a == b)
    if (ta is int and tb is float) or (ta is float and tb is int):
        return bool(a == b)
    return False


def format_float(value: float) -> str:
    """A float in the JSON form the book's runtime prints: the shortest digits
    that round-trip, `2.0` keeps its point, and exponents appear only below
    1e-5 or from 1e16 up, written without a `+` (`1e16`, `1.5e-7`)."""
    text = repr(value)
    if text in ("inf", "-inf", "nan"):
        return "null"
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exp_text = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    if not digits:
        return sign + "0.0"
    # value == int(digits) * 10**exponent, with trailing zeros moved into the exponent
    exponent = (int(exp_text) if exp_text else 0) - len(frac)
    trimmed = digits.rstrip("0")
    exponent += len(digits) - len(trimmed)
    digits = trimmed
    count = len(digits)
    point = count + exponent  # the decimal point sits after `point` digits
    if exponent >= 0 and point <= 16:
        body = digits + "0" * exponent + ".0"
    elif 0 < point <= 16:
        body = digits[:point] + "." + digits[point:]
    elif -5 < point <= 0:
        body = "0." + "0" * -point + digits
    elif count == 1:
        body = f"{digits}e{point - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{point - 1}"
    return sign + body


def to_json_text(value: object) -> str:
    """Compact JSON text of a runtime value, keys in their order, non-ASCII
    characters written as they are."""
    try:
        raw = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        # integers beyond 64 bits, lone surrogates or very deep nesting
        raw = b"e+"
    if b"e+" not in raw:
        return raw.decode()
    # orjson writes positive exponents with a `+`; rare enough to redo slowly
    parts: list[str] = []
    _write(value, parts.append)
    return "".join(parts)


def _write(value: object, out: Callable[[str], object]) -> None:
    t = type(value)
    if t is str:
        out(json.dumps(value, ensure_ascii=False))
    elif t is bool:
        out("true" if value else "false")
    elif t is int:
        out(str(value))
    elif t is float:
        out(format_float(cast(float, value)))
    elif value is None:
        out("null")
    elif t is list or t is tuple:
        out("[")
        for i, item in enumerate(cast(list[object], value)):
            if i:
                out(",")
            _write(item, out)
        out("]")
    else:
        out("{")
        for i, (key, item) in enumerate(cast(dict[str, object], value).items()):
            if i:
                out(",")
            out(json.dumps(str(key), ensure_ascii=False))
            out(":")
            _write(item, out)
        out("}")
