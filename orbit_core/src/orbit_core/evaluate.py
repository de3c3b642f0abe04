"""The expression evaluator: runs IR expressions against an execution's data.

API shared by the engine, the compiler's constant folding, `orbit test` and
queries. Semantics are those of the book's chapters 26 and 27; see
`orbit_core.eval` for the parts.
"""

from __future__ import annotations

from orbit_core.eval.compiler import compiled, compiled_cache
from orbit_core.eval.scope import EvalError, Scope
from orbit_core.ir.expr import Expr
from orbit_core.jsontypes import JsonValue

__all__ = ["EvalError", "Scope", "evaluate"]

TOO_DEEP = "expression or value nested too deeply"


def evaluate(expr: Expr, scope: Scope) -> JsonValue:
    """The JSON value of `expr`; raises EvalError on a runtime error.

    The result may share lists and objects with the scope (a field read returns
    the stored value itself); copy before changing it.
    """
    # The cache lookup of `compiled`, in line: every step evaluates at least
    # one expression, and a Python call costs more than the lookup.
    entry = compiled_cache.get(id(expr))
    try:
        fn = entry[1] if entry is not None else compiled(expr)
        value: JsonValue = fn(scope, scope.vars)
        return value
    except RecursionError:
        raise EvalError(TOO_DEEP) from None
