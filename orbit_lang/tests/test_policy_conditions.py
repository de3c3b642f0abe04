"""The three-valued reasoning of `require_approval` (orbit_lang.policy):
comparisons decided by the rule's threshold as intervals, compute fields
replaced by their expressions, and unknown pieces never assumed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbit_core.ir import Step
from orbit_core.ir import expr as e
from orbit_lang.policy import Threshold, _Conditions, _holds, _implies

AMOUNT = e.Get(e.Input(), "amount")
OPS = ["ge", "gt", "le", "lt", "eq", "ne"]
SYMBOL = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "eq": "==", "ne": "!="}


def threshold(op: str = ">=", value: float = 10000) -> Threshold:
    return Threshold(("amount",), op, value, f"input.amount {op} {value}")


def compare(op: str, value: float) -> e.Expr:
    return e.Binary(op, AMOUNT, e.Float(value))


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (compare("ge", 1000.0), True),
        (compare("lt", 1000.0), False),
        (compare("ge", 50000.0), None),
        (e.Binary("lt", e.Int(1000), AMOUNT), True),  # number on the left
        (e.Unary("not", compare("lt", 1000.0)), True),
        (e.Binary("and", compare("lt", 5000.0), e.Get(e.Input(), "vip")), False),
        (e.Binary("or", compare("ge", 1000.0), e.Call("f", ())), True),
        (e.Call("f", ()), None),
        (e.Binary("ge", e.Get(e.Input(), "other"), e.Float(1.0)), None),
    ],
)
def test_conditions_under_the_threshold(condition: e.Expr, expected: bool | None) -> None:
    assert _Conditions((), threshold()).value(condition) is expected


def test_compute_fields_stand_for_their_expressions() -> None:
    assess = Step(
        "assess",
        "compute",
        compute=e.Object((e.Entry("needs_approval", compare("ge", 1000.0)),)),
    )
    analysis = _Conditions((assess,), threshold())
    needs = e.Get(e.StepRef("assess"), "needs_approval")
    assert analysis.value(needs) is True
    approved = e.Call("coalesce", (e.Get(e.StepRef("decision"), "approved"), e.Bool(False)))
    gate = e.Binary("or", e.Unary("not", needs), approved)
    assert analysis.reads(gate, "decision")
    assert not analysis.reads(needs, "decision")


def test_a_compute_step_with_a_condition_is_not_expanded() -> None:
    assess = Step(
        "assess",
        "compute",
        when=e.Bool(True),
        compute=e.Object((e.Entry("needs_approval", compare("ge", 1000.0)),)),
    )
    needs = e.Get(e.StepRef("assess"), "needs_approval")
    assert _Conditions((assess,), threshold()).value(needs) is None


@given(
    p_op=st.sampled_from(OPS),
    p=st.integers(-20, 20),
    q_op=st.sampled_from(OPS),
    q=st.integers(-20, 20),
    x=st.integers(-60, 60).map(lambda n: n / 2),
)
def test_a_decided_comparison_holds_for_every_value_the_threshold_admits(
    p_op: str, p: int, q_op: str, q: int, x: float
) -> None:
    decided = _implies(p_op, float(p), q_op, float(q))
    if decided is not None and _holds(p_op, x, float(p)):
        assert _holds(q_op, x, float(q)) is decided
