"""Short builders for expression trees in the evaluator's tests.

Plain Python values become literals (int -> Int, float -> Float, str -> Str,
list -> List, dict -> Object), so a table row reads close to ORBIT source.
"""

from __future__ import annotations

from typing import Any

from orbit_core.evaluate import EvalError, Scope, evaluate
from orbit_core.ir import expr as e

INT_MAX = 2**63 - 1
INT_MIN = -(2**63)


def x(value: Any) -> e.Expr:
    """A literal (or an expression passed through)."""
    if isinstance(value, e.Str | e.Int | e.Float | e.Bool | e.Null | e.Duration):
        return value
    if isinstance(
        value,
        e.Input
        | e.Execution
        | e.Failure
        | e.Event
        | e.StepRef
        | e.Var
        | e.Get
        | e.Index
        | e.Lambda
        | e.Call
        | e.Unary
        | e.Binary
        | e.If
        | e.Object
        | e.List,
    ):
        return value
    if value is None:
        return e.Null()
    if isinstance(value, bool):
        return e.Bool(value)
    if isinstance(value, int):
        return e.Int(value)
    if isinstance(value, float):
        return e.Float(value)
    if isinstance(value, str):
        return e.Str(value)
    if isinstance(value, list):
        return e.List(tuple(x(item) for item in value))
    if isinstance(value, dict):
        return e.Object(tuple(e.Entry(k, x(v)) for k, v in value.items()))
    raise TypeError(value)


def path(root: e.Expr, *fields: str) -> e.Expr:
    node = root
    for f in fields:
        node = e.Get(node, f)
    return node


def inp(*fields: str) -> e.Expr:
    """`input.a.b`"""
    return path(e.Input(), *fields)


def step(name: str, *fields: str) -> e.Expr:
    return path(e.StepRef(name), *fields)


def var(name: str, *fields: str) -> e.Expr:
    return path(e.Var(name), *fields)


def b(op: str, left: Any, right: Any) -> e.Binary:
    return e.Binary(op, x(left), x(right))


def u(op: str, arg: Any) -> e.Unary:
    return e.Unary(op, x(arg))


def call(fn: str, *args: Any, float_sum: bool = False) -> e.Call:
    return e.Call(fn, tuple(x(a) for a in args), float_sum)


def lam(param: str, body: Any) -> e.Lambda:
    return e.Lambda(param, x(body))


def if_(cond: Any, then: Any, otherwise: Any) -> e.If:
    return e.If(x(cond), x(then), x(otherwise))


def idx(target: Any, index: Any) -> e.Index:
    return e.Index(x(target), x(index))


def run(expr: Any, scope: Scope | None = None) -> Any:
    return evaluate(x(expr), scope or Scope())


def error_of(expr: Any, scope: Scope | None = None) -> str:
    try:
        value = run(expr, scope)
    except EvalError as err:
        return str(err)
    raise AssertionError(f"expected an EvalError, got {value!r}")


def same(a: Any, b: Any) -> bool:
    """Equal with the same JSON types all the way down (2 is not 2.0, 1 is not True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)
