"""A stand-in evaluator and validator for the engine tests, installed only while
`orbit_core.evaluate` / `orbit_core.values` are still unimplemented (they are
being written in another branch). Covers just what the engine tests use."""

from __future__ import annotations

from typing import Any

from orbit_core import evaluate as _evaluate
from orbit_core import values as _values
from orbit_core.ir import expr as e
from orbit_core.ir import types as t

EvalError = _evaluate.EvalError


def _describe(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def evaluate(x: Any, scope: Any) -> Any:
    if isinstance(x, (e.Str, e.Int, e.Float, e.Bool)):
        return x.value
    if isinstance(x, e.Null):
        return None
    if isinstance(x, e.Duration):
        return x.ms
    if isinstance(x, e.Input):
        return scope.input
    if isinstance(x, e.Execution):
        return dict(scope.execution)
    if isinstance(x, e.Failure):
        return scope.failure
    if isinstance(x, e.Event):
        return scope.event
    if isinstance(x, e.StepRef):
        return scope.steps.get(x.name)
    if isinstance(x, e.Var):
        return scope.vars.get(x.name)
    if isinstance(x, e.Get):
        target = evaluate(x.target, scope)
        return target.get(x.field) if isinstance(target, dict) else None
    if isinstance(x, e.Index):
        target = evaluate(x.target, scope)
        index = evaluate(x.index, scope)
        if target is None:
            return None
        try:
            return target[index]
        except (IndexError, KeyError, TypeError):
            return None
    if isinstance(x, e.Object):
        return {en.key: evaluate(en.value, scope) for en in x.entries}
    if isinstance(x, e.List):
        return [evaluate(i, scope) for i in x.items]
    if isinstance(x, e.If):
        return evaluate(x.then if evaluate(x.cond, scope) else x.otherwise, scope)
    if isinstance(x, e.Unary):
        v = evaluate(x.arg, scope)
        return (not v) if x.op == "not" else -v
    if isinstance(x, e.Binary):
        a = evaluate(x.left, scope)
        if x.op == "and":
            return bool(a) and bool(evaluate(x.right, scope))
        if x.op == "or":
            return bool(a) or bool(evaluate(x.right, scope))
        b = evaluate(x.right, scope)
        if x.op == "eq":
            return a == b
        if x.op == "ne":
            return a != b
        if a is None or b is None:
            return None
        if x.op in ("div", "mod") and b == 0:
            raise EvalError("division by zero")
        ops = {
            "add": lambda: a + b,
            "sub": lambda: a - b,
            "mul": lambda: a * b,
            "div": lambda: a // b if isinstance(a, int) and isinstance(b, int) else a / b,
            "mod": lambda: a % b,
            "lt": lambda: a < b,
            "le": lambda: a <= b,
            "gt": lambda: a > b,
            "ge": lambda: a >= b,
        }
        return ops[x.op]()
    if isinstance(x, e.Call):
        args = x.args
        if x.fn == "len":
            return len(evaluate(args[0], scope))
        if x.fn == "string":
            return str(evaluate(args[0], scope))
        if x.fn == "is_null":
            return evaluate(args[0], scope) is None
        if x.fn == "coalesce":
            for a in args:
                v = evaluate(a, scope)
                if v is not None:
                    return v
            return None
        if x.fn == "fail":
            raise EvalError(str(evaluate(args[0], scope)))
        raise EvalError(f"unknown function {x.fn}")
    raise EvalError(f"cannot evaluate {type(x).__name__}")


def conform(value: Any, type_: Any, *, defaults: bool = True, strict: bool = False) -> Any:
    return _conform(value, type_, "$", defaults, strict)


def _conform(v: Any, ty: Any, path: str, defaults: bool, strict: bool) -> Any:
    if isinstance(ty, t.OptionalType):
        return None if v is None else _conform(v, ty.type, path, defaults, strict)
    if isinstance(ty, t.Primitive):
        kind = ty.kind
        ok = {
            "string": isinstance(v, str),
            "int": isinstance(v, int) and not isinstance(v, bool),
            "float": isinstance(v, (int, float)) and not isinstance(v, bool),
            "bool": isinstance(v, bool),
            "json": True,
            "duration": isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        }.get(kind, isinstance(v, str))
        if not ok:
            name = t.PRIMITIVE_NAMES[kind]
            raise _values.ValidationError(path, f"expected {name}, found {_describe(v)}")
        return v
    if isinstance(ty, t.ListType):
        if not isinstance(v, list):
            raise _values.ValidationError(path, f"expected a list, found {_describe(v)}")
        return [_conform(i, ty.items, f"{path}[{n}]", defaults, strict) for n, i in enumerate(v)]
    if isinstance(ty, t.MapType):
        if not isinstance(v, dict):
            raise _values.ValidationError(path, f"expected a map, found {_describe(v)}")
        return {k: _conform(i, ty.values, f"{path}.{k}", defaults, strict) for k, i in v.items()}
    if not isinstance(v, dict):
        raise _values.ValidationError(path, f"expected an object, found {_describe(v)}")
    out = dict(v)
    for f in ty.fields:
        if f.name not in out:
            if defaults and f.has_default:
                out[f.name] = f.default
                continue
            if isinstance(f.type, t.OptionalType):
                continue
            raise _values.ValidationError(
                f"{path}.{f.name}",
                f"missing required field `{f.name}` of type {t.render_type(f.type)}",
            )
        out[f.name] = _conform(out[f.name], f.type, f"{path}.{f.name}", defaults, strict)
    if strict:
        for k in v:
            if ty.field(k) is None:
                raise _values.ValidationError(f"{path}.{k}", "unknown field")
    return out


def install() -> None:
    """Installs the stand-ins where the real functions are not implemented yet."""
    try:
        _evaluate.evaluate(e.Int(1), _evaluate.Scope())
    except NotImplementedError:
        _evaluate.evaluate = evaluate  # type: ignore[assignment]
    try:
        _values.conform(1, t.INT)
    except NotImplementedError:
        _values.conform = conform  # type: ignore[assignment]
