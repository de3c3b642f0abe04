"""Properties of the evaluator over generated expressions and values."""

from __future__ import annotations

import gc
import math
from typing import Any

import orjson
from evalkit import INT_MAX, INT_MIN, b, call, error_of, run, u
from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_core.eval import compiler
from orbit_core.eval.builtins import NAMES
from orbit_core.eval.jsonvalue import format_float, to_json_text
from orbit_core.evaluate import EvalError, Scope, evaluate
from orbit_core.ir import expr as e

FIELDS = ["a", "b", "c"]
STEPS = ["s1", "s2"]
VARS = ["v", "w"]

i64 = st.integers(min_value=INT_MIN, max_value=INT_MAX)
finite = st.floats(allow_nan=False, allow_infinity=False)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | i64
    | st.integers(min_value=-(2**70), max_value=2**70)
    | finite
    | st.text(max_size=4)
    | st.sampled_from(["1", " 2 ", "1.5", "x"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=2), children, max_size=3)
    ),
    max_leaves=8,
)

leaves: st.SearchStrategy[e.Expr] = st.one_of(
    i64.map(e.Int),
    finite.map(e.Float),
    st.text(max_size=3).map(e.Str),
    st.booleans().map(e.Bool),
    st.just(e.Null()),
    st.integers(min_value=0, max_value=10**9).map(e.Duration),
    st.just(e.Input()),
    st.just(e.Execution()),
    st.just(e.Failure()),
    st.just(e.Event()),
    st.sampled_from(STEPS).map(e.StepRef),
    st.sampled_from(VARS).map(e.Var),
)


def _extend(children: st.SearchStrategy[e.Expr]) -> st.SearchStrategy[e.Expr]:
    args = st.lists(children, max_size=3).map(tuple)
    return st.one_of(
        st.builds(e.Get, children, st.sampled_from(FIELDS)),
        st.builds(e.Index, children, children),
        st.builds(e.Call, st.sampled_from([*sorted(NAMES), "nope"]), args, st.booleans()),
        st.builds(
            lambda fn, items, param, body: e.Call(fn, (items, e.Lambda(param, body))),
            st.sampled_from(["map", "filter", "find", "any", "all"]),
            children,
            st.sampled_from(VARS),
            children,
        ),
        st.builds(e.Lambda, st.sampled_from(VARS), children),
        st.builds(e.Unary, st.sampled_from(e.UNARY_OPS), children),
        st.builds(e.Binary, st.sampled_from(e.BINARY_OPS), children, children),
        st.builds(e.If, children, children, children),
        st.lists(st.tuples(st.sampled_from(FIELDS), children), max_size=3).map(
            lambda kv: e.Object(tuple(e.Entry(k, v) for k, v in dict(kv).items()))
        ),
        args.map(e.List),
    )


expressions = st.recursive(leaves, _extend, max_leaves=12)

scopes = st.builds(
    Scope,
    input=json_values,
    execution=st.just({"id": "e-1", "workflow": "W", "version": "1.0.0"}),
    steps=st.dictionaries(st.sampled_from(STEPS), json_values, max_size=2),
    vars=st.dictionaries(st.sampled_from(VARS), json_values, max_size=2),
    failure=json_values,
    event=json_values,
)


def _is_json(value: Any) -> bool:
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_is_json(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _is_json(v) for k, v in value.items())
    return False


@settings(max_examples=500, deadline=None)
@given(expressions, scopes)
def test_evaluation_raises_nothing_but_eval_error_and_yields_json(
    expr: e.Expr, scope: Scope
) -> None:
    try:
        value = evaluate(expr, scope)
    except EvalError:
        return
    assert _is_json(value)
    to_json_text(value)
    assert evaluate(expr, scope) == value  # deterministic


@given(i64, i64)
def test_integer_division_truncates_and_the_remainder_follows_the_dividend(a: int, d: int) -> None:
    if d == 0:
        assert error_of(b("div", a, d)) == "division by zero"
        assert error_of(b("mod", a, d)) == "division by zero"
        return
    r = run(b("mod", a, d))
    assert abs(r) < abs(d)
    assert r == 0 or (r < 0) == (a < 0)
    exact_q = (a - r) // d
    if INT_MIN <= exact_q <= INT_MAX:
        assert run(b("div", a, d)) == exact_q
    else:
        assert error_of(b("div", a, d)) == "integer overflow"


@given(i64, i64, st.sampled_from(["add", "sub", "mul"]))
def test_integer_arithmetic_fails_exactly_when_it_leaves_64_bits(a: int, c: int, op: str) -> None:
    exact = {"add": a + c, "sub": a - c, "mul": a * c}[op]
    if INT_MIN <= exact <= INT_MAX:
        assert run(b(op, a, c)) == exact
    else:
        assert error_of(b(op, a, c)) == "integer overflow"


@given(finite)
def test_float_text_round_trips_and_matches_the_ryu_layout(value: float) -> None:
    text = format_float(value)
    assert float(text) == value
    assert "+" not in text
    assert "." in text or "e" in text
    # orjson lays floats out like the book's runtime except for the `+` in exponents
    assert text == orjson.dumps(value).decode().replace("e+", "e")


@given(json_values)
def test_json_text_parses_back(value: Any) -> None:
    assert orjson.loads(to_json_text(value)) == value if _fits_orjson(value) else True


def _fits_orjson(value: Any) -> bool:
    if type(value) is int:
        return -(2**63) <= value < 2**64
    if type(value) is list:
        return all(_fits_orjson(v) for v in value)
    if type(value) is dict:
        return all(_fits_orjson(v) for v in value.values())
    return True


def test_compiled_expressions_are_cached_and_released_with_the_expression() -> None:
    expr = b("add", 1, 2)
    first = compiler.compiled(expr)
    assert compiler.compiled(expr) is first
    key = id(expr)
    assert key in compiler.compiled_cache
    del expr, first
    gc.collect()
    assert key not in compiler.compiled_cache


def test_equal_but_distinct_expressions_each_evaluate_correctly() -> None:
    assert run(b("add", 1, 2)) == 3
    assert run(b("add", 1, 2)) == 3


def test_very_deep_expressions_fail_with_an_eval_error() -> None:
    node: e.Expr = e.Bool(True)
    for _ in range(20_000):
        node = u("not", node)
    assert error_of(node) == "expression or value nested too deeply"


def test_very_deep_values_fail_string_with_an_eval_error() -> None:
    value: Any = []
    for _ in range(5_000):
        value = [value]
    assert error_of(call("string", e.Input()), Scope(input=value)) == (
        "expression or value nested too deeply"
    )
