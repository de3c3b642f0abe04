"""The runtime meaning of ORBIT's operators on JSON values.

Integer or float arithmetic is chosen from the values themselves (a Float field
holding `5` is an integer here). Integers stay within signed 64 bits, float
results that are not finite become null, and division by zero fails.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from orbit_core.eval.jsonvalue import INT_MAX, INT_MIN, describe_value, json_equal
from orbit_core.eval.scope import EvalError
from orbit_core.ir.expr import BINARY_SYMBOLS

Operator = Callable[[Any, Any], Any]

OVERFLOW = "integer overflow"
DIVISION_BY_ZERO = "division by zero"


def check_int(value: int) -> int:
    if INT_MIN <= value <= INT_MAX:
        return value
    raise EvalError(OVERFLOW)


def finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _mismatch(op: str, a: Any, b: Any) -> EvalError:
    return EvalError(
        f"operator `{BINARY_SYMBOLS[op]}` cannot be applied to "
        f"{describe_value(a)} and {describe_value(b)}"
    )


def _both_numbers(a: Any, b: Any) -> bool:
    ta = type(a)
    tb = type(b)
    return (ta is int or ta is float) and (tb is int or tb is float)


def _float_op(fn: Callable[[Any, Any], float], a: Any, b: Any) -> float | None:
    try:
        return finite(fn(a, b))
    except OverflowError:
        # an integer operand too large for a float: only possible through JSON input
        raise EvalError(OVERFLOW) from None


def add(a: Any, b: Any) -> Any:
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        return check_int(a + b)
    if ta is str and tb is str:
        return a + b
    if ta is list and tb is list:
        return a + b
    if _both_numbers(a, b):
        return _float_op(operator.add, a, b)
    raise _mismatch("add", a, b)


def sub(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return check_int(a - b)
    if _both_numbers(a, b):
        return _float_op(operator.sub, a, b)
    raise _mismatch("sub", a, b)


def mul(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return check_int(a * b)
    if _both_numbers(a, b):
        return _float_op(operator.mul, a, b)
    raise _mismatch("mul", a, b)


def div(a: Any, b: Any) -> Any:
    if not _both_numbers(a, b):
        raise _mismatch("div", a, b)
    if b == 0:
        raise EvalError(DIVISION_BY_ZERO)
    if type(a) is int and type(b) is int:
        # truncate toward zero, unlike Python's floor division
        quotient = abs(a) // abs(b)
        return check_int(-quotient if (a < 0) != (b < 0) else quotient)
    return _float_op(operator.truediv, a, b)


def mod(a: Any, b: Any) -> Any:
    if not _both_numbers(a, b):
        raise _mismatch("mod", a, b)
    if b == 0:
        raise EvalError(DIVISION_BY_ZERO)
    if type(a) is int and type(b) is int:
        # the remainder takes the dividend's sign, unlike Python's `%`
        remainder = abs(a) % abs(b)
        return -remainder if a < 0 else remainder
    return _float_op(math.fmod, a, b)


def eq(a: Any, b: Any) -> bool:
    return json_equal(a, b)


def ne(a: Any, b: Any) -> bool:
    return not json_equal(a, b)


def _comparable(op: str, a: Any, b: Any) -> None:
    if _both_numbers(a, b) or (type(a) is str and type(b) is str):
        return
    raise _mismatch(op, a, b)


# Python compares strings by code point and mixes int and float exactly.
def lt(a: Any, b: Any) -> bool:
    _comparable("lt", a, b)
    return bool(a < b)


def le(a: Any, b: Any) -> bool:
    _comparable("le", a, b)
    return bool(a <= b)


def gt(a: Any, b: Any) -> bool:
    _comparable("gt", a, b)
    return bool(a > b)


def ge(a: Any, b: Any) -> bool:
    _comparable("ge", a, b)
    return bool(a >= b)


# `and` and `or` short-circuit, so the compiler handles them itself.
BINARY: dict[str, Operator] = {
    "add": add,
    "sub": sub,
    "mul": mul,
    "div": div,
    "mod": mod,
    "eq": eq,
    "ne": ne,
    "lt": lt,
    "le": le,
    "gt": gt,
    "ge": ge,
}


def logical_left_error(op: str, a: Any) -> EvalError:
    return EvalError(f"operator `{BINARY_SYMBOLS[op]}` cannot be applied to {describe_value(a)}")


def logical_right_error(op: str, b: Any) -> EvalError:
    return EvalError(
        f"operator `{BINARY_SYMBOLS[op]}` cannot be applied to a boolean and {describe_value(b)}"
    )


def negate(a: Any) -> Any:
    t = type(a)
    if t is int:
        return check_int(-a)
    if t is float:
        return -a
    raise EvalError(f"operator `-` cannot be applied to {describe_value(a)}")


def logical_not(a: Any) -> bool:
    if a is True:
        return False
    if a is False:
        return True
    raise EvalError(f"operator `!` cannot be applied to {describe_value(a)}")


UNARY: dict[str, Callable[[Any], Any]] = {"neg": negate, "not": logical_not}
