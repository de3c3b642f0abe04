"""The `search` block (docs/language/visibility.md): typed into the IR,
located diagnostics E1300..E1303, absent from the IR when not written, and
printed back by the formatter unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_core import ir
from orbit_core.ir import expr as e
from orbit_core.ir.types import FLOAT, STRING, OptionalType, Primitive
from orbit_lang import compile_source
from orbit_lang.formatter import format_source

ROOT = Path(__file__).resolve().parents[2]

CONTRACTS = """\
task "risk.score" {
    version "1.0.0"
    input { customer: String }
    output { level: String, score: Float, tags: List<String> }
}
"""


def workflow(*search: str, extra: str = "") -> str:
    body = "\n        ".join(search)
    return (
        f"{CONTRACTS}\nworkflow Orders {{\n"
        '    version "1.0.0"\n'
        "    input { customer: String, amount: Float, note: String?, at: Timestamp,"
        " lines: List<String> }\n"
        f"    search {{\n        {body}\n    }}\n"
        '    step score { worker "risk.score" with { customer: input.customer } }\n'
        f"{extra}}}\n"
    )


def errors(source: str) -> list[tuple[str, str, int]]:
    result = compile_source(source, "orders.orbit")
    return [
        (d.code, d.message, d.span.line)
        for d in result.diagnostics
        if d.severity.name == "ERROR" and d.span is not None
    ]


def test_the_example_compiles_with_typed_fields() -> None:
    text = (ROOT / "examples" / "visibility.orbit").read_text(encoding="utf-8")
    result = compile_source(text, "visibility.orbit")
    assert result.errors == 0, [d.message for d in result.diagnostics]
    (defn,) = result.definitions
    assert defn.search == (
        ir.SearchField("customer", e.Get(e.Input(), "customer"), STRING),
        ir.SearchField("amount", e.Get(e.Input(), "amount"), FLOAT),
    )
    document = ir.to_json(defn)
    fields = document["search"]
    assert isinstance(fields, list)
    assert [f["name"] for f in fields if isinstance(f, dict)] == ["customer", "amount"]
    assert ir.from_json(document) == defn


def test_fields_over_step_outputs_and_optional_inputs() -> None:
    source = workflow(
        "risk: score.level", "note: input.note", "at: input.at", "big: input.amount > 500.0"
    )
    result = compile_source(source, "orders.orbit")
    assert result.errors == 0, [d.message for d in result.diagnostics]
    types = {f.name: f.type for f in result.definitions[0].search}
    assert types == {
        "risk": STRING,
        "note": OptionalType(STRING),
        "at": Primitive("timestamp"),
        "big": Primitive("bool"),
    }


def test_without_a_search_block_the_ir_has_no_search_member() -> None:
    source = workflow("x: input.customer").replace(
        "    search {\n        x: input.customer\n    }\n", ""
    )
    (defn,) = compile_source(source, "orders.orbit").definitions
    assert defn.search == ()
    assert "search" not in ir.to_json(defn)


@pytest.mark.parametrize(
    ("search", "code", "message"),
    [
        (
            ("customer: input.customer", "customer: input.amount"),
            "E1300",
            "search field `customer` is declared more than once",
        ),
        (
            ("lines: input.lines",),
            "E1301",
            "search field `lines` has type `List<String>`, which cannot be searched",
        ),
        (
            ("tags: score",),
            "E1301",
            "search field `tags` has type "
            "`{ level: String, score: Float, tags: List<String> }`, which cannot be searched",
        ),
        (
            ("status: input.customer",),
            "E1302",
            "`status` is a built-in search field and cannot be declared",
        ),
    ],
)
def test_each_mistake_has_its_located_diagnostic(
    search: tuple[str, ...], code: str, message: str
) -> None:
    found = errors(workflow(*search))
    # The search block starts on line 10 of the source; its entries follow.
    assert [(c, m) for c, m, _ in found] == [(code, message)]
    assert found[0][2] >= 11


def test_too_many_fields() -> None:
    fields = [f"f{i}: input.customer" for i in range(33)]
    found = errors(workflow(*fields))
    assert [(c, line) for c, _, line in found] == [("E1303", 10)]
    assert "at most 32 search fields" in found[0][1]


def test_unknown_names_keep_their_existing_codes() -> None:
    found = errors(workflow("x: input.nosuch", "y: nostep.level"))
    assert [c for c, _, _ in found] == ["E0402", "E0401"]


def test_search_written_twice_is_a_duplicate_member() -> None:
    source = workflow("x: input.customer", extra="    search { y: input.amount }\n")
    assert [c for c, _, _ in errors(source)] == ["E0106"]


def test_the_formatter_prints_the_block_canonically() -> None:
    messy = workflow("customer:input.customer ,amount:   input.amount").replace(
        "    search {", "  search   {"
    )
    canonical = workflow("customer: input.customer, amount: input.amount")
    assert format_source(messy, "o.orbit").text == canonical
    assert format_source(canonical, "o.orbit").text == canonical
