"""The shape every JSON value must have before the engine accepts it.

A value a caller hands in (an execution input, a signal payload, a task
output, failure details, an IR document) is checked completely on arrival,
before its command joins a commit group: the group serialises all of its
commands' events together, so one value the store cannot write would fail
every other caller's command in the same group. The checks are the ones a
value can fail later, when it is serialised or canonicalised:

- nesting: at most `MAX_DEPTH` (128) levels of arrays and objects (RULINGS
  §22). orjson refuses to write more than 254, and the recursive parts of
  the engine (validation, evaluation, canonical JSON) stay far from
  Python's recursion limit;
- integers: payloads hold the book's `Int`, a signed 64-bit integer
  (`INT_MIN`..`INT_MAX`); IR documents hold as JSON numbers only what RFC
  8785 canonical JSON writes exactly, ±(2^53 − 1) (`IR_INT_MIN`..
  `IR_INT_MAX`), as the definition hash is taken over that form. The IR
  writes a larger integer as a string of its digits (docs/ir.md), which this
  check passes like any string and the IR codec reads;
- numbers are finite, object keys are strings, strings are valid Unicode (no
  lone surrogates), and every value is exactly a dict, list, str, int,
  float, bool or None: an embedding program's tuple, enum or NaN would
  otherwise be stored as something other than what memory holds, or not at
  all.

The walk is iterative (its own stack), so a hostile value cannot exhaust
Python's stack while being checked. Most values keep every rule, so a lean
walk that keeps no path (`_plain`) runs first and the full walk, which
locates the problem, only runs when it has a doubt. Sizes are not checked here: the server
bounds a request with `--max-body`, and `--max-payload-bytes` is a
per-workflow limit checked by the engine (`decide.Limits`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any, cast

from orbit_core.errors import InvalidError
from orbit_core.eval.jsonvalue import INT_MAX, INT_MIN
from orbit_core.jsontypes import JsonValue

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "IR_INT_MAX",
    "IR_INT_MIN",
    "MAX_DEPTH",
    "JsonShapeError",
    "admit",
    "admit_strings",
    "big_integers_as_floats",
    "check_json",
    "render_path",
]

MAX_DEPTH = 128
IR_INT_MAX = 2**53 - 1
IR_INT_MIN = -IR_INT_MAX


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_SHOWN_KEY = 64


def render_path(segments: list[str | int]) -> str:
    """`$.items[0]["odd key"]` from the keys and indexes leading to a value,
    outermost first. Keys longer than 64 characters are shortened (`…`)."""
    parts = ["$"]
    for segment in segments:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif _IDENTIFIER.fullmatch(segment) and len(segment) <= _SHOWN_KEY:
            parts.append(f".{segment}")
        else:
            shown = segment if len(segment) <= _SHOWN_KEY else segment[:_SHOWN_KEY] + "…"
            parts.append(f"[{_quote(shown)}]")
    return "".join(parts)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class JsonShapeError(ValueError):
    """`str(error)` is `<path>: <problem>`, e.g. `$.a[0]: nested deeper than 128 levels`."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def admit(value: object, what: str, code: str, **strings: str | list[str] | None) -> None:
    """`check_json` for a value arriving through the engine's API, and
    `admit_strings` for the call's other texts: the refusal is an
    `InvalidError` with `code`, worded like the engine's type errors
    (`workflow input is invalid at $.a: nested deeper than 128 levels`)."""
    t = type(value)
    if value is not None and not (
        (t is dict or t is list) and (not value or _plain(value, MAX_DEPTH, INT_MIN, INT_MAX))
    ):
        try:
            check_json(value)
        except JsonShapeError as exc:
            raise InvalidError(f"{what} is invalid at {exc}", code) from None
    if strings:
        admit_strings(code, **strings)


def admit_strings(code: str, **fields: str | list[str] | None) -> None:
    """Each field is None, a string, or a list of strings, all valid Unicode
    (texts stored beside payloads, e.g. a cancel reason or an error code)."""
    for name, value in fields.items():
        if value is None:
            continue
        texts = value if type(value) is list else [value]
        for text in texts:
            if text is not None and not _is_text(text):
                raise InvalidError(f"{name} must be a string of valid Unicode", code)


def check_json(
    value: object,
    *,
    max_depth: int = MAX_DEPTH,
    int_min: int = INT_MIN,
    int_max: int = INT_MAX,
) -> None:
    """Raises JsonShapeError at the first part of `value` that breaks the
    rules of the module docstring (depth, integer range, types)."""
    t = type(value)
    if t is not dict and t is not list:
        problem = _scalar_problem(value, int_min, int_max)
        if problem is not None:
            raise JsonShapeError("$", problem)
        return
    if max_depth >= 1 and (not value or _plain(value, max_depth, int_min, int_max)):
        return
    if max_depth < 1:
        raise JsonShapeError("$", _too_deep(max_depth))
    # A stack of iterators over (key, child) pairs; `path[i]` is the key under
    # which `stack[i + 1]`'s container sits.
    path: list[str | int] = []
    stack: list[Iterator[tuple[str | int, object]]] = [_items(value, path)]
    while stack:
        for key, child in stack[-1]:
            ct = type(child)
            if ct is dict or ct is list:
                if len(stack) >= max_depth:
                    raise JsonShapeError(render_path([*path, key]), _too_deep(max_depth))
                if _flat_and_plain(child, int_min, int_max):
                    continue
                path.append(key)
                stack.append(_items(child, path))
                break
            if ct is str:
                if cast(str, child).isascii() or _is_text(child):
                    continue
            elif ct is int:
                if int_min <= cast(int, child) <= int_max:
                    continue
            elif ct is float:
                if math.isfinite(cast(float, child)):
                    continue
            elif ct is bool or child is None:
                continue
            raise JsonShapeError(
                render_path([*path, key]), _scalar_problem(child, int_min, int_max) or "invalid"
            )
        else:
            stack.pop()
            if path:
                path.pop()


def _plain(value: object, max_depth: int, int_min: int, int_max: int) -> bool:
    """Whether the container `value` keeps every rule, checked by a lean
    walk that keeps no path and stops at the first doubt: ASCII keys and
    strings, integers in range, finite floats, plain types, nesting within
    `max_depth` (`max_depth` >= 1). True is final; False sends the value to
    the full walk, which finds the problem and where it is, or accepts what
    is only unusual here (non-ASCII text). Depth first, like the full walk,
    so a value that nests too deep is given up on by its first deep branch."""
    # The stack is made only for a nested value: most are flat. `Any`, not
    # `object`: the walk tests types with `type(x) is`, which mypy does not
    # narrow through a saved type, and a `cast` per value would cost a call.
    stack: list[tuple[Any, int]] | None = None
    container: Any = value
    depth = 1
    while True:
        items: Iterable[Any]
        if type(container) is dict:
            for key in container:
                if type(key) is not str or not key.isascii():
                    return False
            items = container.values()
        else:
            items = container
        for item in items:
            t = type(item)
            if t is str:
                if not item.isascii():
                    return False
            elif t is int:
                if not int_min <= item <= int_max:
                    return False
            elif t is dict or t is list:
                if depth >= max_depth:
                    return False
                if stack is None:
                    stack = []
                stack.append((item, depth + 1))
            elif t is float:
                if not math.isfinite(item):
                    return False
            elif t is not bool and item is not None:
                return False
        if not stack:
            return True
        container, depth = stack.pop()


def big_integers_as_floats(value: JsonValue) -> JsonValue:
    """`value` with every integer outside the signed 64-bit range turned
    into the nearest float, or `value` itself when it holds none.

    JSON parsers read an integer literal from 2^64 up as a float (orjson
    does, and protobuf's Value holds only doubles); this reads the literals
    from 2^63 to 2^64 - 1, which orjson keeps as integers, the same way, so
    a worker's task output gets one answer for every integer too large for
    `Int` (docs/limits.md). Iterative, like the checks; only the containers
    on the way to a changed integer are copied."""
    if type(value) is int:
        return _as_float(value)
    if not isinstance(value, (dict, list)):
        return value
    changed = False
    root: Any = dict(value) if isinstance(value, dict) else list(value)
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        pairs = list(node.items()) if type(node) is dict else list(enumerate(node))
        for key, item in pairs:
            t = type(item)
            if t is int and not INT_MIN <= item <= INT_MAX:
                widened = _as_float(item)
                if widened is not item:
                    node[key] = widened
                    changed = True
            elif t is dict or t is list:
                copy = dict(item) if t is dict else list(item)
                node[key] = copy
                stack.append(copy)
    return root if changed else value


def _as_float(number: int) -> int | float:
    """The float nearest `number` when it is outside the 64-bit range and a
    float can hold it; otherwise `number` (which the checks then refuse)."""
    if INT_MIN <= number <= INT_MAX:
        return number
    try:
        return float(number)
    except OverflowError:
        return number


def _flat_and_plain(container: Any, int_min: int, int_max: int) -> bool:
    """The common case, checked without the walk's machinery: an array, or
    an object with ASCII keys, of plain scalars. False sends everything else
    (nested values, and every problem) to the walk."""
    items: Iterable[Any]  # as in `_plain`
    if type(container) is list:
        items = container
    else:
        for key in container:
            if type(key) is not str or not key.isascii():
                return False
        items = container.values()
    for item in items:
        t = type(item)
        if t is str:
            if not item.isascii():
                return False
        elif t is int:
            if not int_min <= item <= int_max:
                return False
        elif t is float:
            if not math.isfinite(item):
                return False
        elif t is not bool and item is not None:
            return False
    return True


def _items(container: object, path: list[str | int]) -> Iterator[tuple[str | int, object]]:
    if type(container) is list:
        return enumerate(cast(list[object], container))
    mapping = cast(dict[str, object], container)
    for key in mapping:
        if type(key) is not str:
            raise JsonShapeError(render_path(path), "an object key that is not a string")
        if not (key.isascii() or _is_text(key)):
            raise JsonShapeError(
                render_path(path), "an object key that is not valid Unicode (a lone surrogate)"
            )
    return iter(mapping.items())


def _is_text(text: object) -> bool:
    if type(text) is not str:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _too_deep(max_depth: int) -> str:
    return f"nested deeper than {max_depth} levels"


def _scalar_problem(value: object, int_min: int, int_max: int) -> str | None:
    t = type(value)
    if t is str:
        return None if _is_text(value) else "a string that is not valid Unicode (a lone surrogate)"
    if t is int:
        if int_min <= cast(int, value) <= int_max:
            return None
        if int_max == INT_MAX:
            return "an integer outside the 64-bit range"
        return (
            f"an integer outside ±{int_max}, the range canonical JSON holds exactly "
            "(the IR writes larger integers as strings of digits)"
        )
    if t is float:
        return None if math.isfinite(cast(float, value)) else "a number that is not finite"
    if t is bool or value is None or t is dict or t is list:
        return None
    return f"a value of Python type `{t.__name__}`, which is not JSON"
