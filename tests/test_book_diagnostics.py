"""Every diagnostic the book renders, rebuilt as data and rendered again.

scripts/extract_book_examples.py copies each rendered diagnostic of the book
(syntax and later phases alike: E03xx, W06xx, P01xx ...) into
tests/book/diagnostics/. This test reads one back into a Diagnostic (the
quoted source lines become a source file, `^^^` the primary span, `---` the
labels) and checks that the renderer prints exactly the book's text, so the
renderer is ready for every phase's diagnostics.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orbit_lang.diagnostics import Diagnostic, Label, Severity
from orbit_lang.render import render_human
from orbit_lang.source import SourceFile, Span

BLOCKS = sorted((Path(__file__).parent / "book" / "diagnostics").glob("*.txt"))
HEADER = re.compile(r"^(error|warning)\[(\w+)\]: (.*)$")
ARROW = re.compile(r"^\s*--> (.+):(\d+):(\d+)$")
SOURCE = re.compile(r"^(\d+)\s*\| ?(.*)$")
MARKER = re.compile(r"^\s*\| ( *)(\^+|-+)(?: (.*))?$")
EXTRA = re.compile(r"^\s*= (note|help): (.*)$")


def _parse(text: str) -> tuple[Diagnostic, SourceFile]:
    lines = text.splitlines()
    severity, code, message = HEADER.match(lines[0]).groups()  # type: ignore[union-attr]
    arrow = ARROW.match(lines[1])
    assert arrow, lines[1]
    path = arrow.group(1)
    quoted: dict[int, str] = {}
    marks: list[tuple[int, int, int, bool, str]] = []
    notes: list[str] = []
    help_text = None
    current = 0
    for line in lines[2:]:
        if m := SOURCE.match(line):
            current = int(m.group(1))
            quoted[current] = m.group(2)
        elif m := MARKER.match(line):
            column = len(m.group(1)) + 1
            marks.append((current, column, len(m.group(2)), m.group(2)[0] == "^", m.group(3) or ""))
        elif m := EXTRA.match(line):
            if m.group(1) == "note":
                notes.append(m.group(2))
            else:
                help_text = m.group(2)
    last = max(quoted)
    source = SourceFile(path, "\n".join(quoted.get(n, "") for n in range(1, last + 1)) + "\n")

    def span(line: int, column: int, length: int) -> Span:
        start = source.offset(line, column)
        return source.span(start, start + length)

    primary = next(m for m in marks if m[3])
    diagnostic = Diagnostic(
        Severity(severity),
        code,
        message,
        span(*primary[:3]),
        primary[4],
        tuple(Label(span(*m[:3]), m[4]) for m in marks if not m[3]),
        tuple(notes),
        help_text,
    )
    return diagnostic, source


RENDERED = [b for b in BLOCKS if "-->" in b.read_text(encoding="utf-8")]


@pytest.mark.parametrize("path", RENDERED, ids=[b.stem for b in RENDERED])
def test_renderer_reprints_the_book(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    diagnostic, source = _parse(text)
    assert render_human(diagnostic, {source.path: source}) == text


def test_the_extraction_found_the_rendered_diagnostics() -> None:
    assert len(RENDERED) >= 60
