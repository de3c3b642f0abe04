"""Property tests: the compiler never raises on user input, and a program it
compiles always yields definitions whose hashes verify.

Inputs are mutations (token deletions, insertions and replacements) of
valid and invalid programs: the checker's golden cases, the golden IR
sources and the book's examples.
"""

from __future__ import annotations

from pathlib import Path

from book_programs import BOOK, book_programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbit_core.ir import definition_hash, from_json, to_json
from orbit_lang import compile_source

HERE = Path(__file__).parent


def _seeds() -> list[str]:
    paths = sorted((HERE / "data" / "check").rglob("*.orbit"))
    paths += sorted((HERE / "data" / "ir").glob("*.orbit"))
    texts = [p.read_text(encoding="utf-8") for p in paths]
    texts += [(BOOK / e["source"]).read_text(encoding="utf-8") for e in book_programs()]
    return texts


SEEDS = _seeds()
WORDS = [
    "step",
    "when",
    "for",
    "x",
    "in",
    "after",
    "with",
    "compensate",
    "worker",
    "await",
    "sleep",
    "compute",
    "on",
    "event",
    "failure",
    "retry",
    "map",
    "filter",
    "coalesce",
    "is_null",
    "if",
    "then",
    "else",
    "null",
    "input",
    "execution",
    "output",
    "true",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    ".",
    "?",
    "!",
    "-",
    "+",
    "==",
    "&&",
    "||",
    "=>",
    "1",
    "1.5",
    "5s",
    "0s",
    '"s"',
    '"a.run"',
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    words = draw(st.sampled_from(SEEDS)).split(" ")
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, max(0, len(words) - 1)))
        action = draw(st.sampled_from(("delete", "insert", "replace")))
        if action == "delete" and len(words) > 1:
            del words[index]
        elif action == "insert":
            words.insert(index, draw(st.sampled_from(WORDS)))
        else:
            words[index] = draw(st.sampled_from(WORDS))
    return " ".join(words)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_the_compiler_never_raises(text: str) -> None:
    result = compile_source(text, "fuzz.orbit")
    if result.ok:
        for definition in result.definitions:
            document = to_json(definition)
            assert definition_hash(from_json(document)) == definition.definition_hash
    else:
        assert result.definitions == []
