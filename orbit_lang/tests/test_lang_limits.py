"""Inputs at and beyond the compiler's limits: each is a located diagnostic,
never an exception (issue 11, item 5)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from orbit_core import ir
from orbit_core.ir.walk import expr_depth
from orbit_lang import ast, compile_source
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.parser import parse_source
from orbit_lang.syntax.nesting import MAX_NESTING

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


# Each builds an expression nested exactly `levels` deep.
NESTINGS: dict[str, Callable[[int], str]] = {
    "parentheses": lambda n: "(" * (n - 1) + "1" + ")" * (n - 1),
    "lists": lambda n: "[" * (n - 1) + "1" + "]" * (n - 1),
    "objects": lambda n: "{ a: " * (n - 1) + "1" + " }" * (n - 1),
    "calls": lambda n: "len(" * (n - 1) + "x" + ")" * (n - 1),
    "conditionals": lambda n: "if c then 1 else " * (n - 1) + "2",
    "lambdas": lambda n: "x => " * (n - 1) + "1",
    "indexes": lambda n: "x" + "[0]" * (n - 1),
    "nested indexes": lambda n: "x[" * (n - 1) + "0" + "]" * (n - 1),
    "operators": lambda n: " + ".join(["1"] * n),
    "negations": lambda n: "!" * (n - 1) + "x",
    "fields": lambda n: "x" + ".a" * (n - 1),
    "operators in lists": lambda n: "[" * (n - 40) + " * ".join(["2"] * 40) + "]" * (n - 40),
    # The left operand of a left-associative chain is the deepest.
    "lists in operators": lambda n: "[" * (n - 40) + "1" + "]" * (n - 40) + " + 1" * 39,
}


def _return(expression: str) -> list[Diagnostic]:
    return parse_source(f"workflow W {{\n    return {expression}\n}}\n", "nest.orbit")[1]


@pytest.mark.parametrize("kind", NESTINGS)
def test_expressions_nest_up_to_the_limit(kind: str) -> None:
    assert _return(NESTINGS[kind](MAX_NESTING)) == []


@pytest.mark.parametrize("kind", NESTINGS)
@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 20 * MAX_NESTING])
def test_deeper_nesting_is_one_located_error(kind: str, levels: int) -> None:
    diagnostics = _return(NESTINGS[kind](levels))
    assert [(d.code, d.message) for d in diagnostics] == [("E0100", "expression nested too deeply")]
    (found,) = diagnostics
    assert found.span is not None and found.span.line == 2
    assert found.notes == ("expressions and types may nest at most 100 levels deep",)


def test_the_error_points_where_the_limit_is_passed() -> None:
    [parens] = _return("(" * 100 + "1" + ")" * 100)
    assert parens.span is not None and parens.span.column == 12 + 100  # the `1`
    [chain] = _return(" + ".join(["1"] * 101))
    # Operators associate to the left: the 100th `+` is the 101st level.
    assert chain.span is not None and chain.span.column == 12 + 4 * 100 - 2


def test_types_nest_up_to_the_limit() -> None:
    def schema(levels: int) -> list[Diagnostic]:
        text = "schema S {\n    f: " + "List<" * (levels - 1) + "Int" + ">" * (levels - 1) + "\n}\n"
        return parse_source(text, "types.orbit")[1]

    assert schema(MAX_NESTING) == []
    [found] = schema(MAX_NESTING + 1)
    assert (found.code, found.message) == ("E0100", "expression nested too deeply")
    assert found.span is not None and (found.span.line, found.span.column) == (2, 8 + 5 * 100)
    records = "schema S {\n    f: " + "{ a: " * 150 + "Int" + " }" * 150 + "\n}\n"
    assert [d.message for d in parse_source(records, "records.orbit")[1]] == [
        "expression nested too deeply"
    ]


def test_only_the_member_that_nests_too_deeply_is_dropped() -> None:
    text = (
        'workflow W {\n    version "1.0.0"\n    input { n: Int }\n'
        "    step a { compute " + " + ".join(["input.n"] * 150) + " }\n"
        '    step b { compute "fine"\n        when input.n > 0 }\n'
        "    return b\n}\n"
    )
    result = compile_source(text, "member.orbit")
    found = [(d.code, d.span.line if d.span else None) for d in result.diagnostics]
    # Step `a` lost its only action, so it also does nothing; step `b` and
    # the rest of the workflow are checked as usual.
    assert found == [("E0301", 4), ("E0100", 4)]


def test_brackets_closed_by_the_wrong_kind_take_linear_time() -> None:
    # Pairing each `]` used to scan every open `(`: quadratic, hours here.
    text = "workflow W {\n    return " + "(" * 50_000 + "]" * 50_000 + "\n}\n"
    started = time.monotonic()
    diagnostics = parse_source(text, "brackets.orbit")[1]
    assert time.monotonic() - started < 5
    assert diagnostics and all(d.span is not None for d in diagnostics)


def test_a_very_long_unknown_name_gets_no_suggestion_quickly() -> None:
    # Comparing two 3,000-character names used to fill a 9-million-cell table.
    long = "a" * 3000
    text = (
        'workflow W {\n    version "1.0.0"\n'
        f"    step {long} {{ compute 1 }}\n    step b {{ compute {long}b }}\n}}\n"
    )
    started = time.process_time()
    errors = _errors(text)
    assert time.process_time() - started < 2
    assert [(d.code, d.help) for d in errors] == [("E0401", None)]


# ---------------------------------------------------------------- compiled depth
#
# The runtime refuses a document nested deeper than 128 levels (RULINGS §22).
# One source level can be three IR levels (an object literal), so the source
# limit alone lets through expressions whose IR is far too deep.


def _objects(levels: int) -> str:
    return "{ a: " * levels + "1" + " }" * levels


def _deployable(text: str) -> list[ir.Definition]:
    result = compile_source(text, "depth.orbit")
    assert [d.message for d in result.diagnostics] == []
    for definition in result.definitions:
        document = ir.to_json(definition)
        assert ir.from_json(document) == definition  # the runtime's own check
    return result.definitions


def test_an_expression_whose_ir_fits_compiles_and_deploys() -> None:
    # 40 object literals: 3 levels each and the innermost `1`.
    (definition,) = _deployable(STEP.format(_objects(40)))
    (step,) = definition.steps
    assert step.compute is not None and expr_depth(step.compute) == 121


@pytest.mark.parametrize("levels", [41, 98])
def test_an_expression_whose_ir_is_too_deep_is_e0100_at_the_expression(levels: int) -> None:
    text = STEP.format(_objects(levels))
    found = _only(text, "E0100", "expression nested too deeply")
    assert found.span is not None
    assert (found.span.line, found.span.column) == (3, 22)
    assert found.span.end - found.span.start == len(_objects(levels))
    assert found.notes == (
        f"compiled, it nests {3 * levels + 1} levels deep; a compiled expression may nest at "
        "most 122 (object literals count three levels, lists and calls two, other "
        "expressions one)",
    )
    assert found.help == "compute parts of it in separate steps, or flatten the nesting"


def test_the_deepest_place_for_an_expression_still_deploys() -> None:
    # A handler step's `with` sits five containers down; an expression of the
    # largest depth allowed (122) still makes a document the runtime takes.
    lists = "[" * 59 + "1" + "]" * 59
    text = (
        'task "a.run" { input { n: JSON }; output JSON }\n'
        'workflow W {\n    version "1.0.0"\n    signal go { n: Int }\n'
        "    on event go {\n        step s {\n"
        '            worker "a.run"\n'
        f"            with {{ n: {lists} }}\n"
        "        }\n    }\n}\n"
    )
    (definition,) = _deployable(text)
    (handler,) = definition.events
    assert handler.steps[0].with_ is not None and expr_depth(handler.steps[0].with_) == 122
    deeper = text.replace(lists, "[" + lists + "]")
    assert [(d.code, d.message) for d in _errors(deeper)] == [
        ("E0100", "expression nested too deeply")
    ]


def test_long_operator_chains_fit_within_the_source_limit() -> None:
    # One IR level per operator: the source limit (100) keeps a chain shallow
    # enough anywhere, and a longer one is the parser's E0100.
    _deployable(STEP.format(" + ".join(["[1]"] * (MAX_NESTING - 1))))
    assert [d.code for d in _errors(STEP.format(" + ".join(["1"] * 120)))] == ["E0301", "E0100"]


def test_record_types_nested_too_deeply_for_the_runtime_are_e0100_at_the_workflow() -> None:
    # Each inline record is three IR levels; a field default is not an
    # expression of the definition, so deep defaults are fine.
    text = (
        'workflow W {\n    version "1.0.0"\n'
        "    input { x: " + "{ a: " * 45 + "Int" + " }" * 45 + " }\n"
        "    step a { compute 1 }\n}\n"
    )
    found = _only(text, "E0100", "workflow `W` compiles to a definition nested too deeply")
    assert found.span is not None and (found.span.line, found.span.column) == (1, 10)
    assert found.notes[0].startswith("at $.input.fields[0].type.fields[0].type")
    assert found.notes[0].endswith(
        ": nested deeper than 128 levels, the most a runtime accepts; "
        "inline record types count three levels per level of nesting"
    )
    shallow = text.replace("{ a: " * 45, "{ a: " * 30).replace(" }" * 45, " }" * 30)
    _deployable(shallow)


def test_a_deep_default_value_is_not_an_expression_of_the_definition() -> None:
    text = (
        'workflow W {\n    version "1.0.0"\n'
        "    input { x: JSON = " + _objects(60) + " }\n"
        "    step a { compute 1 }\n}\n"
    )
    (definition,) = _deployable(text)
    value = definition.input.fields[0].default
    for _ in range(60):
        value = value["a"]
    assert value == 1


# ---------------------------------------------------------------- large integers


def test_integers_beyond_2_53_compile_to_strings_and_round_trip() -> None:
    text = STEP.format("[-9223372036854775807 - 1, 9223372036854775807, 9007199254740991]")
    (definition,) = _deployable(text)
    steps: Any = ir.to_json(definition)["steps"]  # JSON, looked into below
    (step,) = steps
    assert [item.get("value") for item in step["compute"]["items"]] == [
        None,
        "9223372036854775807",
        9007199254740991,
    ]


def test_a_json_default_with_an_integer_beyond_2_53_is_e0205() -> None:
    text = (
        'workflow W {\n    version "1.0.0"\n'
        "    input { j: JSON = { a: [1, 9007199254740992] }, k: JSON = 9007199254740991 }\n"
        "    step a { compute 1 }\n}\n"
    )
    found = _only(
        text,
        "E0205",
        "invalid default value: a `JSON` value at `$.a[1]` holds an integer beyond "
        "±9007199254740991, which a definition cannot store",
    )
    assert found.span is not None and (found.span.line, found.span.column) == (3, 23)
    assert found.help == "give the field an `Int` type, or write the number as a string"
    typed = text.replace("j: JSON = { a: [1, 9007199254740992] }", "j: List<Int> = [1, 2**53]")
    typed = typed.replace("2**53", str(2**53))
    _deployable(typed)
