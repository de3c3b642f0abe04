"""The built-in functions of chapter 27, on runtime JSON values.

Messages for arguments of the wrong shape mirror the compiler's E0400 wording
but describe the runtime value (`found an integer` rather than `found `Int``),
since only JSON-typed arguments can reach the runtime wrongly shaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from orbit_core.eval.jsonvalue import INT_MAX, INT_MIN, describe_value, json_equal, to_json_text
from orbit_core.eval.operators import check_int, finite
from orbit_core.eval.scope import EvalError, Scope

# Unicode's White_Space property, which is what the book's runtime trims. Python's
# str.strip() would also remove U+001C..U+001F.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SHOWN_CHARS = 40


def _argument_error(n: int, fn: str, expected: str, value: Any) -> EvalError:
    return EvalError(f"argument {n} of `{fn}` must be {expected}, found {describe_value(value)}")


def _conversion_error(value: Any, target: str) -> EvalError:
    if type(value) is str:
        shown = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "…"
        text = to_json_text(shown)
    elif type(value) is float:
        text = to_json_text(value)
    else:
        text = describe_value(value)
    return EvalError(f"cannot convert {text} to {target}")


def coalesce(*args: Any) -> Any:
    for arg in args:
        if arg is not None:
            return arg
    return None


def is_null(x: Any) -> bool:
    return x is None


def length(x: Any) -> int:
    t = type(x)
    if t is str or t is list or t is dict:
        return len(x)  # a str's length counts code points
    if x is None:
        return 0
    raise _argument_error(1, "len", "a String, List or Map", x)


def string(x: Any) -> str:
    return x if type(x) is str else to_json_text(x)


def to_int(x: object) -> int:
    # bool before int: True is an int to Python but not to ORBIT
    if isinstance(x, bool):
        return 1 if x else 0
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        truncated = math.trunc(x)
        if INT_MIN <= truncated <= INT_MAX:
            return truncated
    elif isinstance(x, str):
        text = x.strip(WHITESPACE)
        if _INT_TEXT.fullmatch(text):
            parsed = int(text)
            if INT_MIN <= parsed <= INT_MAX:
                return parsed
    raise _conversion_error(x, "Int")


def to_float(x: object) -> float:
    if isinstance(x, bool):
        return 1.0 if x else 0.0
    if isinstance(x, float):
        return x
    if isinstance(x, int):
        try:
            return float(x)
        except OverflowError:
            pass
    elif isinstance(x, str):
        text = x.strip(WHITESPACE)
        if _FLOAT_TEXT.fullmatch(text):
            parsed = float(text)
            if math.isfinite(parsed):
                return parsed
    raise _conversion_error(x, "Float")


def contains(haystack: Any, needle: Any) -> bool:
    t = type(haystack)
    if t is list:
        return any(json_equal(item, needle) for item in haystack)
    if t is str or t is dict:
        if type(needle) is not str:
            kind = "String" if t is str else "Map"
            raise _argument_error(2, "contains", f"a String when argument 1 is a {kind}", needle)
        return needle in haystack
    if haystack is None:
        return False
    raise _argument_error(1, "contains", "a String, List or Map", haystack)


def _string_function(name: str, op: Callable[[str], str]) -> Callable[[Any], Any]:
    def apply(s: Any) -> Any:
        if type(s) is str:
            return op(s)
        if s is None:
            return None
        raise _argument_error(1, name, "a String", s)

    return apply


lower = _string_function("lower", str.lower)
upper = _string_function("upper", str.upper)
trim = _string_function("trim", lambda s: s.strip(WHITESPACE))


def join(items: Any, separator: Any) -> str:
    if type(items) is not list:
        raise _argument_error(1, "join", "a List", items)
    if type(separator) is not str:
        raise _argument_error(2, "join", "a String", separator)
    return separator.join(item if type(item) is str else to_json_text(item) for item in items)


def keys(m: Any) -> list[str]:
    if type(m) is dict:
        return list(m)
    raise _argument_error(1, "keys", "a Map", m)


def _check_numbers(name: str, args: Sequence[Any]) -> None:
    for i, arg in enumerate(args, 1):
        t = type(arg)
        if t is not int and t is not float:
            raise _argument_error(i, name, "an Int or Float", arg)


def minimum(*args: Any) -> Any:
    _check_numbers("min", args)
    return min(args)  # the first of equal arguments wins, unchanged


def maximum(*args: Any) -> Any:
    _check_numbers("max", args)
    return max(args)


def absolute(x: Any) -> Any:
    t = type(x)
    if t is int:
        return check_int(abs(x))
    if t is float:
        return abs(x)
    raise _argument_error(1, "abs", "an Int or Float", x)


def total(items: Any, float_sum: bool) -> Any:
    """`sum`; `float_sum` (a List<Float> argument) makes the empty sum 0.0 (RULINGS §3)."""
    if items is None or (type(items) is list and not items):
        return 0.0 if float_sum else 0
    if type(items) is not list:
        raise _argument_error(1, "sum", "a List of Int or Float", items)
    all_ints = True
    for i, item in enumerate(items):
        t = type(item)
        if t is float:
            all_ints = False
        elif t is not int:
            raise EvalError(
                f"argument 1 of `sum` must be a List of Int or Float, "
                f"found {describe_value(item)} at index {i}"
            )
    if all_ints:
        acc = 0
        for item in items:
            acc = check_int(acc + item)  # 64-bit arithmetic at every step
        return acc
    result = 0.0
    try:
        for item in items:
            result += item
    except OverflowError:
        raise EvalError("integer overflow") from None
    return finite(result)


@attrs.frozen
class Builtin:
    fn: Callable[..., Any]
    min_args: int
    max_args: int | None  # None: any number from min_args up


EAGER: dict[str, Builtin] = {
    "coalesce": Builtin(coalesce, 1, None),
    "is_null": Builtin(is_null, 1, 1),
    "len": Builtin(length, 1, 1),
    "string": Builtin(string, 1, 1),
    "int": Builtin(to_int, 1, 1),
    "float": Builtin(to_float, 1, 1),
    "contains": Builtin(contains, 2, 2),
    "lower": Builtin(lower, 1, 1),
    "upper": Builtin(upper, 1, 1),
    "trim": Builtin(trim, 1, 1),
    "join": Builtin(join, 2, 2),
    "keys": Builtin(keys, 1, 1),
    "min": Builtin(minimum, 1, None),
    "max": Builtin(maximum, 1, None),
    "abs": Builtin(absolute, 1, 1),
}
"""Functions whose arguments are all evaluated first; `sum` is apart for its flag."""


# ---------------------------------------------------------------- lambdas

Body = Callable[[Scope, Mapping[str, Any]], Any]
CollectionFn = Callable[[Any, str, Body, Scope, Mapping[str, Any]], Any]


def _elements(name: str, items: object) -> list[Any]:
    if type(items) is list:
        return items
    if items is None:
        return []
    raise _argument_error(1, name, "a List", items)


def _holds(name: str, result: Any) -> bool:
    if result is True:
        return True
    if result is False or result is None:
        return False
    raise EvalError(
        f"the lambda passed to `{name}` must return a Bool, found {describe_value(result)}"
    )


def map_items(items: Any, param: str, body: Body, scope: Scope, env: Mapping[str, Any]) -> Any:
    local = dict(env)
    out = []
    for item in _elements("map", items):
        local[param] = item
        out.append(body(scope, local))
    return out


def filter_items(items: Any, param: str, body: Body, scope: Scope, env: Mapping[str, Any]) -> Any:
    local = dict(env)
    out = []
    for item in _elements("filter", items):
        local[param] = item
        if _holds("filter", body(scope, local)):
            out.append(item)
    return out


def find_item(items: Any, param: str, body: Body, scope: Scope, env: Mapping[str, Any]) -> Any:
    local = dict(env)
    for item in _elements("find", items):
        local[param] = item
        if _holds("find", body(scope, local)):
            return item
    return None


def any_item(items: Any, param: str, body: Body, scope: Scope, env: Mapping[str, Any]) -> Any:
    local = dict(env)
    for item in _elements("any", items):
        local[param] = item
        if _holds("any", body(scope, local)):
            return True
    return False


def all_items(items: Any, param: str, body: Body, scope: Scope, env: Mapping[str, Any]) -> Any:
    local = dict(env)
    for item in _elements("all", items):
        local[param] = item
        if not _holds("all", body(scope, local)):
            return False
    return True


COLLECTION: dict[str, CollectionFn] = {
    "map": map_items,
    "filter": filter_items,
    "find": find_item,
    "any": any_item,
    "all": all_items,
}

NAMES = frozenset(EAGER) | frozenset(COLLECTION) | {"sum"}
"""Every built-in function name."""
