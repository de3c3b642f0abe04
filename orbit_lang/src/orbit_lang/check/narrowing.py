"""Condition narrowing (chapter 14, RULINGS §2).

A step X with a `when` reads as optional, except inside a step S that can
only run when X ran: S's `when`, split at `&&`, contains `!is_null(X)`, or
every conjunct of X's own `when`. Conditions are compared by structure, in
any order and with any spacing.
"""

from __future__ import annotations

from collections.abc import Hashable

from orbit_lang import ast


def conjuncts(node: ast.Expr) -> list[ast.Expr]:
    """`a && b && c` as [a, b, c]."""
    if isinstance(node, ast.Binary) and node.operator == "&&":
        return conjuncts(node.left) + conjuncts(node.right)
    return [node]


def shape(node: ast.Expr) -> Hashable:
    """A comparable form of `node` that ignores spans."""
    if isinstance(node, ast.IntLiteral | ast.FloatLiteral | ast.StringExpr | ast.BoolLiteral):
        return (type(node).__name__, node.value)
    if isinstance(node, ast.DurationLiteral):
        return ("duration", node.milliseconds)
    if isinstance(node, ast.NullLiteral):
        return ("null",)
    if isinstance(node, ast.Name):
        return ("name", node.name)
    if isinstance(node, ast.MemberAccess):
        return ("get", shape(node.target), node.member.name)
    if isinstance(node, ast.Index):
        return ("index", shape(node.target), shape(node.index))
    if isinstance(node, ast.Call):
        return ("call", node.function.name, tuple(shape(a) for a in node.arguments))
    if isinstance(node, ast.Lambda):
        return ("lambda", node.parameter.name, shape(node.body))
    if isinstance(node, ast.Unary):
        return ("unary", node.operator, shape(node.operand))
    if isinstance(node, ast.Binary):
        return ("binary", node.operator, shape(node.left), shape(node.right))
    if isinstance(node, ast.Conditional):
        return ("if", shape(node.condition), shape(node.then), shape(node.otherwise))
    if isinstance(node, ast.ObjectLiteral):
        return ("object", tuple((entry.key, shape(entry.value)) for entry in node.entries))
    return ("list", tuple(shape(item) for item in node.items))


def guarded(condition: ast.Expr | None) -> frozenset[Hashable]:
    """The conjuncts of a reading step's `when`, for `narrows`."""
    if condition is None:
        return frozenset()
    return frozenset(shape(c) for c in conjuncts(condition))


def narrows(reader: frozenset[Hashable], step: str, step_condition: ast.Expr | None) -> bool:
    """Whether a step whose `when` has the conjuncts `reader` can only run
    after `step` (whose own `when` is `step_condition`) ran."""
    if not reader:
        return False
    if _not_null(step) in reader:
        return True
    if step_condition is None:
        return False
    return guarded(step_condition) <= reader


def _not_null(step: str) -> Hashable:
    return ("unary", "!", ("call", "is_null", (("name", step),)))
