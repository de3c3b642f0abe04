"""Property tests: the parser never raises, and every diagnostic is located
inside the file it reports on.

Inputs are random text, random token soup, and mutations (deletions,
insertions of tokens or characters, duplications, truncations) of valid
programs: the parser's golden files and the book's examples.
"""

from __future__ import annotations

from pathlib import Path

from book_programs import BOOK, book_programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbit_lang import ast
from orbit_lang.parser import parse_source
from orbit_lang.render import render_human, render_json
from orbit_lang.source import SourceFile

HERE = Path(__file__).parent


def _seeds() -> list[str]:
    texts = [
        p.read_text(encoding="utf-8")
        for p in sorted((HERE / "data" / "parser" / "ok").glob("*.orbit"))
    ]
    texts += [(BOOK / e["source"]).read_text(encoding="utf-8") for e in book_programs()]
    return texts


SEEDS = _seeds()
TOKENS = [
    "workflow",
    "schema",
    "task",
    "import",
    "test",
    "step",
    "on",
    "failure",
    "event",
    "version",
    "input",
    "output",
    "return",
    "worker",
    "sleep",
    "await",
    "compute",
    "with",
    "when",
    "for",
    "in",
    "after",
    "retry",
    "compensate",
    "limits",
    "query",
    "signal",
    "continue_as_new",
    "mock",
    "expect",
    "returns",
    "fails",
    "times",
    "then",
    "if",
    "else",
    "true",
    "false",
    "null",
    "List",
    "Map",
    "x",
    "input",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    ",",
    ":",
    ";",
    ".",
    "?",
    "=",
    "!",
    "+",
    "-",
    "*",
    "/",
    "%",
    "==",
    "!=",
    "<=",
    ">=",
    "&&",
    "||",
    "=>",
    '"s"',
    '"\\q"',
    '"open',
    "1",
    "1.5",
    "5s",
    "5sec",
    "99999999999999999999",
    "/*",
    "*/",
    "//",
    "///",
    "#",
    "é",
    "\\",
    '"',
    "\n",
    "\t",
]
WHITESPACE = st.sampled_from([" ", "\n", "  ", "\n    ", "\r\n", ""])


def _assert_located(text: str) -> None:
    module, diagnostics = parse_source(text, "fuzz.orbit")
    assert isinstance(module, ast.Module)
    source = SourceFile("fuzz.orbit", text)
    for diagnostic in diagnostics:
        span = diagnostic.span
        assert span is not None
        assert span.file == "fuzz.orbit"
        assert 0 <= span.start <= span.end <= len(text)
        assert (span.line, span.column) == source.position(span.start)
        assert (span.end_line, span.end_column) == source.position(span.end)
        render_human(diagnostic, {"fuzz.orbit": source})
    render_json(diagnostics)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["delete", "insert", "char", "duplicate", "truncate"]))
        if kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 12)) :]
        elif kind == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif kind == "char":
            text = text[:at] + draw(st.characters()) + text[at:]
        elif kind == "duplicate":
            text = text[:at] + text[at : at + draw(st.integers(1, 40))] + text[at:]
        else:
            text = text[:at]
    return text


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    st.text(
        alphabet=st.sampled_from(list('{}()[]<>,:;.?=!+-*/%"\\ \n\tabcxyz019_é#$')), max_size=200
    )
)
def test_random_text(text: str) -> None:
    _assert_located(text)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(TOKENS), WHITESPACE), max_size=60))
def test_token_soup(parts: list[tuple[str, str]]) -> None:
    _assert_located("".join(token + space for token, space in parts))


@SETTINGS
@given(mutated())
def test_mutated_valid_programs(text: str) -> None:
    _assert_located(text)
