"""A flow key's value as text, the label it is shown with, and a priority.

The checker admits only String, Int and UUID keys over the input, so a key
is known when an execution is created and its text is a stable name for
the group it shares a limit with. An expression that fails at run time
(an Int overflow, say) gives the key `""`: the execution still runs, under
one shared limit, rather than failing where the workflow never asked.
"""

from __future__ import annotations

from collections.abc import Mapping

from orbit_core.eval.scope import EvalError, Scope
from orbit_core.evaluate import evaluate
from orbit_core.ir import expr as e
from orbit_core.ir.printer import render_expr
from orbit_core.jsontypes import JsonValue


def key_text(
    key: e.Expr | None,
    input: JsonValue,
    execution: dict[str, str],
    vars: Mapping[str, JsonValue] | None = None,
) -> str:
    if key is None:
        return ""
    try:
        value = evaluate(key, Scope(input=input, execution=execution, vars=vars or {}))
    except EvalError:
        return ""
    if isinstance(value, bool) or value is None:
        return ""
    return str(value)


def key_label(key: e.Expr | None) -> str:
    """`customer_id` for `input.customer_id`; the expression otherwise."""
    if key is None:
        return ""
    if isinstance(key, e.Get) and isinstance(key.target, e.Input):
        return key.field
    return render_expr(key)


def priority(
    expr: e.Expr | None,
    input: JsonValue,
    execution: dict[str, str],
    vars: Mapping[str, JsonValue] | None = None,
) -> int:
    if expr is None:
        return 0
    try:
        value = evaluate(expr, Scope(input=input, execution=execution, vars=vars or {}))
    except EvalError:
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
