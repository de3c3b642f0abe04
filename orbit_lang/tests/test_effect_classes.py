"""Effect classes on task contracts (issue 38): `effect <class>` is parsed,
checked (E1000, E1001), formatted back as written and carried by the IR only
when declared, so sources without the clause keep their definition hash."""

from __future__ import annotations

import pytest

from orbit_core.ir import TaskContract
from orbit_core.ir.codec import IRError, from_json, to_json
from orbit_lang.compiler import compile_source
from orbit_lang.formatter import format_source

WORKFLOW = """
workflow W {
    version "1.0.0"
    step s { worker "pay.charge" }
}
"""


def _source(task_body: str) -> str:
    return 'task "pay.charge" {\n    version "1.0.0"\n' + task_body + "}\n" + WORKFLOW


@pytest.mark.parametrize("effect", ["idempotent", "compensable", "once", "pure"])
def test_each_class_reaches_the_ir(effect: str) -> None:
    result = compile_source(_source(f"    effect {effect}\n"))
    assert result.errors == 0, result.diagnostics
    contract = result.definitions[0].contracts["pay.charge"]
    assert isinstance(contract, TaskContract)
    assert contract.effect == effect
    document = to_json(result.definitions[0])
    assert document["contracts"]["pay.charge"]["effect"] == effect  # type: ignore[index,call-overload]
    assert from_json(document) == result.definitions[0]


def test_the_colon_is_optional_like_every_contract_member() -> None:
    result = compile_source(_source("    effect: once\n"))
    contract = result.definitions[0].contracts["pay.charge"]
    assert isinstance(contract, TaskContract) and contract.effect == "once"


def test_no_clause_no_member_and_the_same_hash() -> None:
    plain = compile_source(_source("")).definitions[0]
    contract = plain.contracts["pay.charge"]
    assert isinstance(contract, TaskContract) and contract.effect is None
    contracts = to_json(plain)["contracts"]
    assert isinstance(contracts, dict)
    assert "effect" not in contracts["pay.charge"]  # type: ignore[operator]
    declared = compile_source(_source("    effect pure\n")).definitions[0]
    assert declared.definition_hash != plain.definition_hash


def test_an_unknown_class_is_e1000_at_the_word_with_a_suggestion() -> None:
    result = compile_source(_source("    effect idempotnt\n"))
    [diagnostic] = result.diagnostics
    assert diagnostic.code == "E1000"
    assert diagnostic.message == "unknown effect class `idempotnt`"
    assert diagnostic.help == "did you mean `idempotent`?"
    assert diagnostic.span is not None
    assert (diagnostic.span.line, diagnostic.span.column) == (3, 12)


def test_two_clauses_are_e1001_pointing_at_the_first() -> None:
    result = compile_source(_source("    effect once\n    effect pure\n"))
    [diagnostic] = result.diagnostics
    assert diagnostic.code == "E1001"
    assert diagnostic.span is not None and diagnostic.span.line == 4
    assert [label.span.line for label in diagnostic.labels] == [3]


def test_a_missing_class_is_a_syntax_error_naming_the_classes() -> None:
    result = compile_source(_source("    effect\n"))
    assert result.errors >= 1
    assert "an effect class" in result.diagnostics[0].message


def test_the_formatter_prints_the_clause_back() -> None:
    messy = 'task "t" {\n  effect    once\n   effect:pure\n}\n'
    tidy = format_source(messy).text
    assert tidy == 'task "t" {\n    effect once\n    effect: pure\n}\n'
    assert format_source(tidy).text == tidy


def test_the_ir_refuses_an_unknown_class() -> None:
    document = to_json(compile_source(_source("    effect once\n")).definitions[0])
    contracts = document["contracts"]
    assert isinstance(contracts, dict)
    contracts["pay.charge"]["effect"] = "twice"  # type: ignore[index,call-overload]
    with pytest.raises(IRError, match="unknown effect class `twice`"):
        from_json(document)
