"""`orbit_lang.incremental`: parsing by declarations gives exactly what
`parser.parse` gives for the whole text, before and after edits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orbit_lang import incremental
from orbit_lang.incremental import IncrementalParser, chunks
from orbit_lang.parser import parse
from orbit_lang.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    p
    for folder in ("orbit_lang/tests/data", "tests/book", "examples", "orbit_cli/tests/fixtures")
    for p in (ROOT / folder).rglob("*.orbit")
)


def _same(parser: IncrementalParser, path: str, text: str) -> None:
    source = SourceFile(path, text)
    assert parser(source) == parse(source)


def test_chunks_cover_the_text_and_keep_doc_comments() -> None:
    text = '// head\n\n/// A schema.\nschema A { x: Int }\n\n// note\ntask "t" {\n}\n'
    pieces = chunks(text)
    assert "".join(piece for _, _, piece in pieces) == text
    # The comment and blank lines above a declaration go with it.
    second = text.index("\n\n// note") + 1
    assert [(offset, line) for offset, line, _ in pieces] == [(0, 0), (second, 4)]
    assert pieces[1][2].startswith("\n// note\ntask")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_parses_the_same(path: Path) -> None:
    _same(IncrementalParser(), str(path), path.read_text(encoding="utf-8", errors="replace"))


def test_edits_anywhere_parse_the_same() -> None:
    text = (ROOT / "tests/book/cases/order_receipt/order_processing.orbit").read_text()
    parser = IncrementalParser()
    _same(parser, "o.orbit", text)
    # Characters typed at many places: inside strings, names, between
    # declarations, and ones that break the syntax; then the text restored.
    for index in range(0, len(text), max(1, len(text) // 40)):
        for typed in ("x", "\n", "{", '"', "/// doc\n"):
            _same(parser, "o.orbit", text[:index] + typed + text[index:])
    _same(parser, "o.orbit", text)
    assert parser.parsed_chunks < 40 * 5 * 4


def test_a_broken_declaration_is_parsed_from_where_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = (ROOT / "tests/book/cases/order_receipt/order_processing.orbit").read_text()
    parser = IncrementalParser()
    _same(parser, "o.orbit", text)
    parsed: list[int] = []

    def counting(source: SourceFile) -> Any:
        parsed.append(len(source.text.lstrip()))
        return parse(source)

    monkeypatch.setattr(incremental, "parse", counting)
    # An unclosed `{` in the last declaration: what is above it is not parsed again.
    last = chunks(text)[-1][0]
    at = text.index("\n", text.index("{", last)) + 1
    broken = text[:at] + "    step x {\n" + text[at:]
    _same(parser, "o.orbit", broken)
    assert parsed and max(parsed) < len(text) - last + 20
