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
_KEYWORDS: dict[type[e.Expr], str] = {
    e.Null: "null",
    e.Input: "input",
    e.Execution: "execution",
    e.Failure: "failure",
    e.Event: "event",
}
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
    match x:
        case e.Str() | e.Int() | e.Float() | e.Bool() | e.Duration():
            return _literal(x)
        case e.Null() | e.Input() | e.Execution() | e.Failure() | e.Event():
            return _KEYWORDS[type(x)], _POSTFIX
        case e.StepRef(name) | e.Var(name):
            return name, _POSTFIX
        case e.Get(target, field):
            key = f".{field}" if is_identifier(field) else f"[{render_string(field)}]"
            return _operand(target, _POSTFIX) + key, _POSTFIX
        case e.Index(target, index):
            return f"{_operand(target, _POSTFIX)}[{render_expr(index)}]", _POSTFIX
        case e.Lambda(param, body):
            return f"{param} => {render_expr(body)}", _IF
        case e.Call(fn, args):
            return f"{fn}({', '.join(render_expr(a) for a in args)})", _POSTFIX
        case e.Unary(op, arg):
            return UNARY_SYMBOLS[op] + _operand(arg, _POSTFIX), _UNARY
        case e.Binary(op, left, right):
            prec = _PRECEDENCE[op]
            # left-associative: an equally binding right operand needs parentheses
            return f"{_operand(left, prec)} {BINARY_SYMBOLS[op]} {_operand(right, prec + 1)}", prec
        case e.If(cond, then, otherwise):
            text = f"if {render_expr(cond)} then {render_expr(then)} else {render_expr(otherwise)}"
            return text, _IF
        case e.Object(entries):
            return _object_literal(entries), _POSTFIX
        case e.List(items):
            return "[" + ", ".join(render_expr(item) for item in items) + "]", _POSTFIX


def _literal(x: e.Str | e.Int | e.Float | e.Bool | e.Duration) -> tuple[str, int]:
    match x:
        case e.Str(value):
            return render_string(value), _POSTFIX
        case e.Int(value) if value == _INT_MIN:
            # the literal 9223372036854775808 does not fit, so the book spells it this way
            return "-9223372036854775807 - 1", _PRECEDENCE["sub"]
        case e.Int(value):
            return str(value), _UNARY if value < 0 else _POSTFIX
        case e.Float(value):
            text = _float_literal(value)
            return text, _UNARY if text.startswith("-") else _POSTFIX
        case e.Bool(value):
            return ("true" if value else "false"), _POSTFIX
        case e.Duration(ms):
            return _duration_literal(ms), _POSTFIX


def _object_literal(entries: tuple[e.Entry, ...]) -> str:
    if not entries:
        return "{}"
    keys = (en.key if is_identifier(en.key) else render_string(en.key) for en in entries)
    pairs = (f"{key}: {render_expr(en.value)}" for key, en in zip(keys, entries, strict=True))
    return "{ " + ", ".join(pairs) + " }"


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
