"""Prints IR expressions back as ORBIT source, for tools that show expressions
(graphs, generated docs, diffs, messages).

The output parses back to the same tree: parentheses are added only where
precedence needs them, and literals use forms the lexer accepts (floats always
have digits on both sides of the point and never an exponent).
"""

from __future__ import annotations

import re
from decimal import Decimal

from orbit_core.ir import expr as e
from orbit_core.ir.expr import BINARY_SYMBOLS, UNARY_SYMBOLS

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_RESERVED = frozenset({"true", "false", "null"})

# Binding strength, loosest first; `if` binds loosest of all.
_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "eq": 3,
    "ne": 3,
    "lt": 4,
    "le": 4,
    "gt": 4,
    "ge": 4,
    "add": 5,
    "sub": 5,
    "mul": 6,
    "div": 6,
    "mod": 6,
}
_IF = 0
_UNARY = 7
_POSTFIX = 8

_INT_MIN = -(2**63)
_DURATION_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def render_expr(expr: e.Expr) -> str:
    """`expr` as ORBIT source, e.g. `input.amount * 1.2 > 100.0`."""
    return _render(expr)[0]


def is_identifier(text: str) -> bool:
    return _IDENTIFIER.fullmatch(text) is not None and text not in _RESERVED


def render_string(text: str) -> str:
    """A string literal, escaped the way the lexer reads it."""
    out = []
    for ch in text:
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch < " " or ch == "\x7f":
            out.append(f"\\u{{{ord(ch):X}}}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _render(x: e.Expr) -> tuple[str, int]:
    """The text and how tightly it binds."""
    if isinstance(x, e.Str):
        return render_string(x.value), _POSTFIX
    if isinstance(x, e.Int):
        if x.value == _INT_MIN:
            # the literal 9223372036854775808 does not fit, so the book spells it this way
            return "-9223372036854775807 - 1", _PRECEDENCE["sub"]
        return str(x.value), _UNARY if x.value < 0 else _POSTFIX
    if isinstance(x, e.Float):
        text = _float_literal(x.value)
        return text, _UNARY if text.startswith("-") else _POSTFIX
    if isinstance(x, e.Bool):
        return ("true" if x.value else "false"), _POSTFIX
    if isinstance(x, e.Null):
        return "null", _POSTFIX
    if isinstance(x, e.Duration):
        return _duration_literal(x.ms), _POSTFIX
    if isinstance(x, e.Input):
        return "input", _POSTFIX
    if isinstance(x, e.Execution):
        return "execution", _POSTFIX
    if isinstance(x, e.Failure):
        return "failure", _POSTFIX
    if isinstance(x, e.Event):
        return "event", _POSTFIX
    if isinstance(x, e.StepRef | e.Var):
        return x.name, _POSTFIX
    if isinstance(x, e.Get):
        target = _operand(x.target, _POSTFIX)
        if is_identifier(x.field):
            return f"{target}.{x.field}", _POSTFIX
        return f"{target}[{render_string(x.field)}]", _POSTFIX
    if isinstance(x, e.Index):
        return f"{_operand(x.target, _POSTFIX)}[{render_expr(x.index)}]", _POSTFIX
    if isinstance(x, e.Lambda):
        return f"{x.param} => {render_expr(x.body)}", _IF
    if isinstance(x, e.Call):
        return f"{x.fn}({', '.join(render_expr(a) for a in x.args)})", _POSTFIX
    if isinstance(x, e.Unary):
        return UNARY_SYMBOLS[x.op] + _operand(x.arg, _POSTFIX), _UNARY
    if isinstance(x, e.Binary):
        prec = _PRECEDENCE[x.op]
        # left-associative: an equally binding right operand needs parentheses
        left = _operand(x.left, prec)
        right = _operand(x.right, prec + 1)
        return f"{left} {BINARY_SYMBOLS[x.op]} {right}", prec
    if isinstance(x, e.If):
        text = (
            f"if {render_expr(x.cond)} then {render_expr(x.then)} else {render_expr(x.otherwise)}"
        )
        return text, _IF
    if isinstance(x, e.Object):
        if not x.entries:
            return "{}", _POSTFIX
        entries = ", ".join(
            f"{k if is_identifier(k) else render_string(k)}: {render_expr(v)}"
            for k, v in ((entry.key, entry.value) for entry in x.entries)
        )
        return "{ " + entries + " }", _POSTFIX
    return "[" + ", ".join(render_expr(item) for item in x.items) + "]", _POSTFIX


def _operand(x: e.Expr, needed: int) -> str:
    text, prec = _render(x)
    return text if prec >= needed else f"({text})"


def _float_literal(value: float) -> str:
    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"


def _duration_literal(ms: int) -> str:
    for unit, size in _DURATION_UNITS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
