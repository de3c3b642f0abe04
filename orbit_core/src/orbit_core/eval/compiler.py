"""Turns an IR expression into a tree of Python closures, once per expression.

The engine evaluates `with` and `when` for every step, so the per-node work of
dispatching on the node class is paid once, at compile time; each closure then
calls its children directly. A closure takes the scope and the variables in
force (loop variable, lambda parameters), which lambdas extend without copying
the scope.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any

from orbit_core.eval import builtins, operators
from orbit_core.eval.jsonvalue import describe_value
from orbit_core.eval.scope import EvalError, Scope
from orbit_core.ir import expr as e

Env = Mapping[str, Any]
Compiled = Callable[[Scope, Env], Any]

LAMBDA_OUTSIDE_CALL = "a lambda can only be passed to `map`, `filter`, `any`, `all` or `find`"

compiled_cache: dict[int, tuple[weakref.ref[e.Expr], Compiled]] = {}


def compiled(expr: e.Expr) -> Compiled:
    """The closure for `expr`, built on first use and kept while `expr` lives."""
    entry = compiled_cache.get(id(expr))
    if entry is not None:
        return entry[1]
    fn = compile_expr(expr)
    key = id(expr)
    ref = weakref.ref(expr, lambda _ref: compiled_cache.pop(key, None))
    compiled_cache[key] = (ref, fn)
    return fn


def compile_expr(expr: e.Expr) -> Compiled:
    return _COMPILERS[type(expr)](expr)


def _constant(value: Any) -> Compiled:
    return lambda scope, env: value


def _failing(message: str) -> Compiled:
    """Errors the compiler would have reported surface only if evaluation reaches them."""

    def fail(scope: Scope, env: Env) -> Any:
        raise EvalError(message)

    return fail


# ---------------------------------------------------------------- roots


def _input(node: e.Input) -> Compiled:
    return lambda scope, env: scope.input


def _execution(node: e.Execution) -> Compiled:
    def run(scope: Scope, env: Env) -> Any:
        meta = scope.execution
        return meta if type(meta) is dict else dict(meta)

    return run


def _failure(node: e.Failure) -> Compiled:
    return lambda scope, env: scope.failure


def _event(node: e.Event) -> Compiled:
    return lambda scope, env: scope.event


def _step(node: e.StepRef) -> Compiled:
    name = node.name
    return lambda scope, env: scope.steps.get(name)


def _var(node: e.Var) -> Compiled:
    name = node.name
    return lambda scope, env: env.get(name)


# ---------------------------------------------------------------- access


def _field_of(value: Any, field: str) -> Any:
    """`value.field` for anything but a dict (the fast path is inlined)."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(field)
    raise EvalError(f"cannot read field `{field}` of {describe_value(value)}")


def _get(node: e.Get) -> Compiled:
    field = node.field
    target = node.target
    # The common shapes `input.x` and `step.x` skip one closure call.
    if isinstance(target, e.Input):

        def get_input(scope: Scope, env: Env) -> Any:
            value = scope.input
            if type(value) is dict:
                return value.get(field)
            return _field_of(value, field)

        return get_input
    if isinstance(target, e.StepRef):
        step = target.name

        def get_step(scope: Scope, env: Env) -> Any:
            value = scope.steps.get(step)
            if type(value) is dict:
                return value.get(field)
            return _field_of(value, field)

        return get_step
    inner = compile_expr(target)

    def get(scope: Scope, env: Env) -> Any:
        value = inner(scope, env)
        if type(value) is dict:
            return value.get(field)
        return _field_of(value, field)

    return get


def index_value(target: Any, index: Any) -> Any:
    t = type(target)
    if t is list:
        if type(index) is not int:
            raise EvalError(f"cannot index an array with {describe_value(index)}")
        size = len(target)
        if index < 0:
            index += size
        return target[index] if 0 <= index < size else None
    if t is dict:
        if type(index) is not str:
            raise EvalError(f"cannot index an object with {describe_value(index)}")
        return target.get(index)
    if target is None:
        return None
    raise EvalError(f"cannot index {describe_value(target)}")


def _index(node: e.Index) -> Compiled:
    target = compile_expr(node.target)
    index = compile_expr(node.index)
    return lambda scope, env: index_value(target(scope, env), index(scope, env))


# ---------------------------------------------------------------- operators


def _unary(node: e.Unary) -> Compiled:
    op = operators.UNARY[node.op]
    arg = compile_expr(node.arg)
    return lambda scope, env: op(arg(scope, env))


def _binary(node: e.Binary) -> Compiled:
    left = compile_expr(node.left)
    right = compile_expr(node.right)
    if node.op == "and":
        return _and(left, right)
    if node.op == "or":
        return _or(left, right)
    op = operators.BINARY[node.op]
    return lambda scope, env: op(left(scope, env), right(scope, env))


def _and(left: Compiled, right: Compiled) -> Compiled:
    def run(scope: Scope, env: Env) -> Any:
        a = left(scope, env)
        if a is False:
            return False
        if a is not True:
            raise operators.logical_left_error("and", a)
        b = right(scope, env)
        if b is True or b is False:
            return b
        raise operators.logical_right_error("and", b)

    return run


def _or(left: Compiled, right: Compiled) -> Compiled:
    def run(scope: Scope, env: Env) -> Any:
        a = left(scope, env)
        if a is True:
            return True
        if a is not False:
            raise operators.logical_left_error("or", a)
        b = right(scope, env)
        if b is True or b is False:
            return b
        raise operators.logical_right_error("or", b)

    return run


def _if(node: e.If) -> Compiled:
    cond = compile_expr(node.cond)
    then = compile_expr(node.then)
    otherwise = compile_expr(node.otherwise)

    def run(scope: Scope, env: Env) -> Any:
        c = cond(scope, env)
        if c is True:
            return then(scope, env)
        if c is False or c is None:
            return otherwise(scope, env)
        raise EvalError(f"`if` condition must be `Bool`, found {describe_value(c)}")

    return run


# ---------------------------------------------------------------- literals


def _object(node: e.Object) -> Compiled:
    entries = tuple((entry.key, compile_expr(entry.value)) for entry in node.entries)
    # a fresh dict per evaluation: callers may keep or change what they get
    return lambda scope, env: {key: value(scope, env) for key, value in entries}


def _list(node: e.List) -> Compiled:
    items = tuple(compile_expr(item) for item in node.items)
    return lambda scope, env: [item(scope, env) for item in items]


def _lambda(node: e.Lambda) -> Compiled:
    return _failing(LAMBDA_OUTSIDE_CALL)


# ---------------------------------------------------------------- calls


def _plural(n: int) -> str:
    return f"{n} argument" if n == 1 else f"{n} arguments"


def _call(node: e.Call) -> Compiled:
    name = node.fn
    count = len(node.args)
    if name in builtins.COLLECTION:
        return _collection_call(node)
    if name == "sum":
        if count != 1:
            return _failing(f"`sum` takes 1 argument, found {count}")
        items = compile_expr(node.args[0])
        float_sum = node.float_sum
        return lambda scope, env: builtins.total(items(scope, env), float_sum)
    spec = builtins.EAGER.get(name)
    if spec is None:
        return _failing(f"unknown function `{name}`")
    if count < spec.min_args or (spec.max_args is not None and count > spec.max_args):
        wanted = _plural(spec.min_args)
        if spec.max_args is None:
            wanted = "at least " + wanted
        return _failing(f"`{name}` takes {wanted}, found {count}")
    fn = spec.fn
    args = tuple(compile_expr(arg) for arg in node.args)
    if count == 1:
        (a,) = args
        return lambda scope, env: fn(a(scope, env))
    if count == 2:
        a, b = args
        return lambda scope, env: fn(a(scope, env), b(scope, env))
    return lambda scope, env: fn(*[arg(scope, env) for arg in args])


def _collection_call(node: e.Call) -> Compiled:
    name = node.fn
    if len(node.args) != 2:
        return _failing(f"`{name}` takes 2 arguments, found {len(node.args)}")
    fn_node = node.args[1]
    if not isinstance(fn_node, e.Lambda):
        return _failing(f"argument 2 of `{name}` must be a lambda")
    items = compile_expr(node.args[0])
    body = compile_expr(fn_node.body)
    param = fn_node.param
    impl = builtins.COLLECTION[name]
    return lambda scope, env: impl(items(scope, env), param, body, scope, env)


_COMPILERS: dict[type, Callable[[Any], Compiled]] = {
    e.Str: lambda node: _constant(node.value),
    e.Int: lambda node: _constant(node.value),
    e.Float: lambda node: _constant(float(node.value)),
    e.Bool: lambda node: _constant(node.value),
    e.Null: lambda node: _constant(None),
    e.Duration: lambda node: _constant(node.ms),
    e.Input: _input,
    e.Execution: _execution,
    e.Failure: _failure,
    e.Event: _event,
    e.StepRef: _step,
    e.Var: _var,
    e.Get: _get,
    e.Index: _index,
    e.Lambda: _lambda,
    e.Call: _call,
    e.Unary: _unary,
    e.Binary: _binary,
    e.If: _if,
    e.Object: _object,
    e.List: _list,
}
