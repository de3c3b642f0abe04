"""A workflow's `retention` (beyond the book, docs/retention.md): parsed,
checked (E1400), printed back by the formatter, and carried in the IR only
when it is declared."""

from __future__ import annotations

from orbit_core.ir.codec import to_json
from orbit_lang.compiler import compile_source
from orbit_lang.formatter import format_source

TASK = 'task "t" { version "1.0.0" input: { a: Int } output: { b: Int } }\n'


def workflow(member: str) -> str:
    return (
        TASK
        + 'workflow W {\n    version "1.0.0"\n'
        + member
        + '    step s { worker "t" with { a: 1 } }\n}\n'
    )


def test_a_declared_retention_is_in_the_ir() -> None:
    for member in ("    retention 90d\n", "    retention: 90m\n"):
        result = compile_source(workflow(member))
        assert result.ok, result.diagnostics
        document = to_json(result.definitions[0])
        expected = 90 * 86_400_000 if "90d" in member else 5_400_000
        assert document["retention_ms"] == expected
        assert document["ir_version"] == "orbit-ir/2"


def test_without_retention_the_ir_and_hash_are_as_before() -> None:
    plain = compile_source(workflow(""))
    assert plain.ok
    document = to_json(plain.definitions[0])
    assert "retention_ms" not in document and document["ir_version"] == "orbit-ir/1"
    kept = compile_source(workflow("    retention 30d\n"))
    assert kept.definitions[0].definition_hash != plain.definitions[0].definition_hash


def test_a_bad_retention_is_a_located_diagnostic() -> None:
    source = workflow("    retention 0s\n")
    result = compile_source(source, "w.orbit")
    assert not result.ok
    [found] = [d for d in result.diagnostics if d.code == "E1400"]
    assert found.message == "`retention` must be greater than zero"
    assert found.span is not None
    assert source[found.span.start : found.span.end] == "0s"


def test_a_retention_without_unit_or_twice_is_refused() -> None:
    codes = {d.code for d in compile_source(workflow("    retention 30\n")).diagnostics}
    assert "E0101" in codes
    twice = workflow("    retention 30d\n    retention 1d\n")
    assert "E0106" in {d.code for d in compile_source(twice).diagnostics}


def test_the_formatter_prints_retention_canonically() -> None:
    messy = workflow("    retention   :   30d\n")
    formatted = format_source(messy)
    assert "    retention: 30d\n" in formatted.text
    assert format_source(formatted.text).changed is False
    assert format_source(workflow("    retention 30d\n")).changed is False
