"""Expression trees as the IR stores them.

Every name has been resolved by the compiler: a reference says whether it reads
the input, the execution metadata, a step, a variable (loop variable or lambda
parameter), the handler's `failure` or the event handler's `event`. The
evaluator therefore needs no scopes of its own. Each node encodes as a JSON
object tagged by `op` (see docs/ir.md).
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

BINARY_OPS = ("add", "sub", "mul", "div", "mod", "eq", "ne", "lt", "le", "gt", "ge", "and", "or")
UNARY_OPS = ("not", "neg")

# How each operator is written in source, for printing expressions back.
BINARY_SYMBOLS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "mod": "%",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "and": "&&",
    "or": "||",
}
UNARY_SYMBOLS = {"not": "!", "neg": "-"}


@attrs.frozen
class Str:
    value: str


@attrs.frozen
class Int:
    value: int


@attrs.frozen
class Float:
    """A float literal. Tagged apart from Int because canonical JSON writes 1.0 as 1."""

    value: float


@attrs.frozen
class Bool:
    value: bool


@attrs.frozen
class Null:
    pass


@attrs.frozen
class Duration:
    """A duration literal, normalised to milliseconds; its runtime value is that integer."""

    ms: int


@attrs.frozen
class Input:
    pass


@attrs.frozen
class Execution:
    pass


@attrs.frozen
class Failure:
    """`failure` inside an outcome handler."""


@attrs.frozen
class Event:
    """`event` inside an `on event` handler."""


@attrs.frozen
class StepRef:
    """The output of a step (or, in a handler, a step of the same block)."""

    name: str


@attrs.frozen
class Var:
    """A loop variable or a lambda parameter."""

    name: str


@attrs.frozen
class Get:
    """`target.field`; null-propagating; on a map it reads the key."""

    target: Expr
    field: str


@attrs.frozen
class Index:
    """`target[index]`; lists take Int (negative counts from the end), maps and records strings."""

    target: Expr
    index: Expr


@attrs.frozen
class Lambda:
    """`param => body`; only the second argument of map, filter, find, any and all."""

    param: str
    body: Expr


@attrs.frozen
class Call:
    """A built-in function call.

    `float_sum` is set on `sum` when the list's static element type is Float, so
    that the sum of an empty list is 0.0 rather than 0 (RULINGS §3).
    """

    fn: str
    args: tuple[Expr, ...]
    float_sum: bool = False


@attrs.frozen
class Unary:
    op: str  # one of UNARY_OPS
    arg: Expr


@attrs.frozen
class Binary:
    op: str  # one of BINARY_OPS
    left: Expr
    right: Expr


@attrs.frozen
class If:
    cond: Expr
    then: Expr
    otherwise: Expr


@attrs.frozen
class Entry:
    key: str
    value: Expr


@attrs.frozen
class Object:
    """An object literal; entry order is kept (it is the JSON key order)."""

    entries: tuple[Entry, ...]


@attrs.frozen
class List:
    items: tuple[Expr, ...]


Expr: TypeAlias = (
    Str
    | Int
    | Float
    | Bool
    | Null
    | Duration
    | Input
    | Execution
    | Failure
    | Event
    | StepRef
    | Var
    | Get
    | Index
    | Lambda
    | Call
    | Unary
    | Binary
    | If
    | Object
    | List
)

EMPTY_OBJECT = Object(entries=())
