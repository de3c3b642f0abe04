"""Property tests of the formatter on generated and mutated programs.

- Any text either is refused for its lexical errors, or formats to a fixed
  point that parses to the same syntax tree (spans aside) with the same
  diagnostics: the safety check never has to step in.
- A program laid out badly (random indentation and spacing, trailing
  blanks, doubled blank lines; same tokens, comments and line breaks)
  formats to exactly the text its tidy original formats to.
- Formatting keeps the definition hashes of programs that compile.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_parser_properties import SEEDS, TOKENS, WHITESPACE, mutated

from orbit_lang import compile_source
from orbit_lang.formatter import FormatError, format_source
from orbit_lang.parser import parse_source
from orbit_lang.source import SourceFile, Span
from orbit_lang.syntax.lexer import EOF, tokenize

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def shape(node: Any) -> Any:
    """A syntax tree as plain data without its spans or doc comments'
    trailing blanks (which the formatter removes)."""
    if isinstance(node, Span):
        return None
    if attrs.has(type(node)):
        return (
            type(node).__name__,
            tuple(
                shape(getattr(node, f.name)) for f in attrs.fields(type(node)) if f.name != "span"
            ),
        )
    if isinstance(node, tuple | list):
        return tuple(shape(item) for item in node)
    if isinstance(node, str):
        return "\n".join(line.rstrip() for line in node.split("\n"))
    return node


def messy(text: str, rng: random.Random) -> str:
    """`text` with the same tokens, comments and line breaks, laid out badly."""
    out: list[str] = []
    pos = 0
    for token in tokenize(SourceFile("m.orbit", text)).tokens:
        gap = text[pos : token.start]
        if "/*" in gap:
            out.append(gap)  # block comments are verbatim; leave them be
        else:
            out.append(_messy_gap(gap, rng))
        if token.type == EOF:
            break
        out.append(token.text)
        pos = token.end
    return "".join(out)


def _messy_gap(gap: str, rng: random.Random) -> str:
    lines = gap.split("\n")
    pieces = []
    for i, line in enumerate(lines):
        body = line.strip(" \t")
        if i == 0:
            # After the previous token, on its line: tokens that were apart
            # stay apart.
            least = 1 if line or len(lines) > 1 else 0
            pieces.append(" " * rng.randint(least, 3) + body)
            continue
        lead = rng.choice(["", " ", "\t", "   ", "        "])
        if i == len(lines) - 1:
            pieces.append(lead + body + (" " if body else ""))
            continue
        pieces.append(lead + body + " " * rng.randint(0, 2))
        if not body and rng.random() < 0.3:
            pieces.append("")
    return "\n".join(pieces)


def _check_formats_safely(text: str) -> None:
    lexed = tokenize(SourceFile("p.orbit", text.removeprefix("\ufeff")))
    try:
        result = format_source(text, "p.orbit")
    except FormatError as error:
        assert lexed.diagnostics, error
        assert str(error).startswith("cannot format a file with lexical errors: ")
        return
    assert not lexed.diagnostics
    again = format_source(result.text, "p.orbit")
    assert not again.changed
    assert again.text == result.text
    tree, diagnostics = parse_source(text, "p.orbit")
    new_tree, new_diagnostics = parse_source(result.text, "p.orbit")
    assert shape(new_tree) == shape(tree)
    assert [(d.code, d.message) for d in new_diagnostics] == [
        (d.code, d.message) for d in diagnostics
    ]


@SETTINGS
@given(mutated())
def test_mutated_programs_format_safely(text: str) -> None:
    _check_formats_safely(text)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(TOKENS), WHITESPACE), max_size=60))
def test_token_soup_formats_safely(parts: list[tuple[str, str]]) -> None:
    _check_formats_safely("".join(token + space for token, space in parts))


@SETTINGS
@given(st.sampled_from(SEEDS), st.randoms(use_true_random=False))
def test_a_messy_layout_formats_like_the_original(text: str, rng: random.Random) -> None:
    mess = messy(text, rng)
    assert format_source(mess, "m.orbit").text == format_source(text, "m.orbit").text


def test_messy_changes_the_layout_but_not_the_tokens() -> None:
    text = SEEDS[0]
    mess = messy(text, random.Random(1))
    assert mess != text
    assert [(t.type, t.text, t.nl_before) for t in tokenize(SourceFile("a", mess)).tokens] == [
        (t.type, t.text, t.nl_before) for t in tokenize(SourceFile("a", text)).tokens
    ]


def _compiling_seeds() -> list[str]:
    seeds = []
    for text in SEEDS:
        if "import" in text:
            continue
        try:
            result = compile_source(text, "seed.orbit")
        except Exception:
            # Not the formatter's concern here: lowering integers beyond
            # 2**53 crashes the hash (reported separately).
            continue
        if result.ok and result.definitions:
            seeds.append(text)
    return seeds


COMPILING = _compiling_seeds()


def _hashes(text: str) -> list[str]:
    return [d.definition_hash for d in compile_source(text, "seed.orbit").definitions]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(COMPILING), st.randoms(use_true_random=False))
def test_formatting_keeps_definition_hashes(text: str, rng: random.Random) -> None:
    formatted = format_source(messy(text, rng), "m.orbit").text
    assert _hashes(formatted) == _hashes(text)


def test_there_are_compiling_seeds() -> None:
    assert len(COMPILING) > 20
