"""The source map: positions and `///` doc comments for tools (docs/ir.md)."""

from __future__ import annotations

from orbit_lang import compile_source

SOURCE = """\
/// One line of an order.
schema Line {
    /// The stock keeping unit.
    sku: String
}

/// Reserves stock.
task "stock.reserve" {
    version "1.0.0"
    input { lines: List<Line> }
    output { id: String }
}

/// Takes an order.
workflow Order {
    version "1.0.0"
    input {
        /// What to reserve.
        lines: List<Line>
        buyer: { name: String }
    }
    /// A reviewer's answer.
    signal review { ok: Bool }
    /// Reserve first.
    step reserve { worker "stock.reserve" with { lines: input.lines } }
    step wait { await review timeout 1d }
    /// Whether it was reserved.
    query reserved = !is_null(reserve)
    on failure {
        /// Tell someone.
        step alert { compute failure.code }
    }
    return { id: reserve.id }
}
"""


def test_positions_and_doc_comments() -> None:
    (definition,) = compile_source(SOURCE, "order.orbit").definitions
    source_map = definition.source_map
    assert (source_map["file"], source_map["line"], source_map["column"]) == ("order.orbit", 15, 10)
    assert source_map["doc"] == "Takes an order."
    assert source_map["input"]["lines"] == {"line": 19, "column": 9, "doc": "What to reserve."}
    assert source_map["input"]["buyer"]["fields"] == {"name": {"line": 20, "column": 18}}
    assert source_map["steps"]["reserve"] == {"line": 25, "column": 10, "doc": "Reserve first."}
    assert source_map["steps"]["wait"] == {"line": 26, "column": 10}
    assert source_map["handlers"]["failure"]["alert"]["doc"] == "Tell someone."
    assert source_map["signals"]["review"]["doc"] == "A reviewer's answer."
    assert source_map["queries"]["reserved"]["doc"] == "Whether it was reserved."
    assert source_map["return"] == {"line": 33, "column": 5}
    contract = source_map["contracts"]["stock.reserve"]
    assert (contract["file"], contract["line"], contract["doc"]) == (
        "order.orbit",
        8,
        "Reserves stock.",
    )
    schema = source_map["schemas"]["Line"]
    assert schema["doc"] == "One line of an order."
    assert schema["fields"]["sku"]["doc"] == "The stock keeping unit."
