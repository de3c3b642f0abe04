"""Inputs at and beyond the compiler's limits: each is a located diagnostic,
never an exception (issue 11, item 5)."""

from __future__ import annotations

from orbit_lang import ast, compile_source
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.parser import parse_source

STEP = 'workflow W {{\n    version "1.0.0"\n    step a {{ compute {} }}\n}}\n'


def _errors(text: str) -> list[Diagnostic]:
    return [d for d in compile_source(text, "limits.orbit").diagnostics if d.is_error]


def _only(text: str, code: str, message: str) -> Diagnostic:
    errors = _errors(text)
    assert [(d.code, d.message) for d in errors] == [(code, message)]
    return errors[0]


def test_integer_literal_longer_than_python_converts_is_e0006() -> None:
    digits = "1" * 5000
    found = _only(STEP.format(digits), "E0006", "integer literal out of range")
    assert found.span is not None
    assert (found.span.line, found.span.column) == (3, 22)
    assert found.span.end - found.span.start == len(digits)


def test_integer_literal_range_is_decided_on_significant_digits() -> None:
    # Leading zeros do not count: this is 1, however long it is written.
    assert _errors(STEP.format("0" * 5000 + "1")) == []
    assert _errors(STEP.format("0" * 5000 + "9_007_199_254_740_991")) == []
    _only(STEP.format("9_223_372_036_854_775_808"), "E0006", "integer literal out of range")
    _only(STEP.format("1" + "0" * 19), "E0006", "integer literal out of range")


def test_float_literal_beyond_the_double_range_is_e0006() -> None:
    _only(STEP.format("1" * 400 + ".5"), "E0006", "float literal out of range")
    _only(STEP.format("1" * 5000 + ".5"), "E0006", "float literal out of range")
    # Many digits that still fit are fine, and so is underflow to zero.
    assert _errors(STEP.format("1" * 300 + ".5")) == []
    assert _errors(STEP.format("0." + "0" * 5000 + "1")) == []


def test_duration_literal_with_thousands_of_digits_is_e0006() -> None:
    text = 'workflow W {{\n    version "1.0.0"\n    step a {{ sleep {} }}\n}}\n'
    _only(text.format("1" * 5000 + "s"), "E0006", "duration literal out of range")
    _only(text.format("1" * 5000 + ".5ms"), "E0006", "duration literal out of range")
    assert _errors(text.format("0" * 5000 + "1.5s")) == []


def test_leading_zeros_before_the_largest_int_still_parse() -> None:
    text = "workflow W {\n return " + "0" * 5000 + "9223372036854775807\n}\n"
    module, diagnostics = parse_source(text, "zeros.orbit")
    assert diagnostics == []
    (workflow,) = module.declarations
    assert isinstance(workflow, ast.Workflow)
    (member,) = workflow.members
    assert isinstance(member, ast.Return)
    assert isinstance(member.expression, ast.IntLiteral)
    assert member.expression.value == 2**63 - 1
