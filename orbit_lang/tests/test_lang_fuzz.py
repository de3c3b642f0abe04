"""A fuzz of the compiler: whatever the source, `compile_source` returns
diagnostics; it never raises and never takes more than a few seconds.

The inputs are the book's programs and the golden sources, mutated at the
token and the character level (tokens deleted, duplicated, swapped or
replaced; random characters inserted; the text cut short; a span wrapped in
deep nesting; very long names and literals), and token soup drawn from the
language's vocabulary. Every diagnostic must be located inside its file and
render both as text and as JSON, and every definition compiled must be one
the runtime accepts and reads back unchanged.

The run is bounded and derandomised for CI (the same examples each time).
`ORBIT_FUZZ_EXAMPLES=N` asks for N examples per test, drawn at random: use it
to search further, and turn each finding into a regression test in
test_lang_limits.py or beside the code it concerns.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest
from book_programs import BOOK, book_programs
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from orbit_core import ir
from orbit_lang import compile_source
from orbit_lang.render import render_json, render_report
from orbit_lang.source import SourceFile
from orbit_lang.syntax.lexer import tokenize

DATA = Path(__file__).parent / "data"
SECONDS_PER_INPUT = 5.0
_EXAMPLES = os.environ.get("ORBIT_FUZZ_EXAMPLES")
FUZZ = settings(
    max_examples=int(_EXAMPLES) if _EXAMPLES else 600,
    derandomize=_EXAMPLES is None,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # The explain phase traces every line, which would distort the timings.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
# 600 inputs take 10-20 s on a quiet machine; the per-test default (60 s) is
# too short when the machine is loaded, and each input has its own bound.
pytestmark = pytest.mark.timeout(600)


def _corpus() -> list[str]:
    paths = sorted(DATA.rglob("*.orbit"))
    texts = [p.read_text(encoding="utf-8") for p in paths]
    texts += [(BOOK / e["source"]).read_text(encoding="utf-8") for e in book_programs()]
    return texts


CORPUS = _corpus()

# Spellings the mutations insert: the vocabulary of the language and some
# characters and runs that stress the lexer.
VOCABULARY = [
    *"{}()[]<>,:;.?=!+-*/%",
    *("==", "!=", "<=", ">=", "&&", "||", "=>", "//", "/*", "*/", "///", '"', "\\", "\n"),
    *("workflow", "schema", "task", "import", "test", "step", "on", "failure", "cancel"),
    *("timeout", "event", "compensate", "worker", "sleep", "await", "compute", "using"),
    *("after", "with", "retry", "when", "for", "in", "max_parallel", "version", "input"),
    *("output", "signal", "query", "return", "continue_as_new", "limits", "if", "then"),
    *("else", "true", "false", "null", "List", "Map", "Int", "Float", "String", "Bool"),
    *("mock", "returns", "fails", "hangs", "expect", "status", "step", "runs", "times"),
    *("0", "1", "-1", "9223372036854775807", "9223372036854775808", "1.5", "1e5", "5s"),
    *("500ms", "2d", "1.5h", "5sec", "0x1F", '"a"', '"\\u{1F600}"', '"\\q"', "x", "_", "é"),
    *("\t", "\r", "\x00", "\ufeff", "\u00b2", "#", "$", "`", "'", "\ufffd", "\U0001f600"),
    *('"../../../../dev/zero"', '"/dev/zero"', '"."', '""'),
]
_long = st.sampled_from(["9", "a", "_", "1_", "0.", "(", "[", "{", '"', "x.", "!", "a+"])
_runs = st.builds(lambda part, n: part * n, _long, st.integers(100, 6000))
_tokens = st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=3), _runs)


def _pieces(text: str) -> list[str]:
    """The text as tokens with what lies between them (spaces, comments)
    attached to the token before: joined again, they give the text back."""
    tokens = tokenize(SourceFile("fuzz.orbit", text)).tokens
    starts = [t.start for t in tokens if t.start < len(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    pieces = _pieces(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 6))):
        if not pieces:
            pieces = [""]
        i = draw(st.integers(0, len(pieces) - 1))
        j = draw(st.integers(i, min(len(pieces), i + 40)))
        kind = draw(
            st.sampled_from(
                ["delete", "duplicate", "swap", "insert", "replace", "chars", "cut", "nest"]
            )
        )
        if kind == "delete":
            del pieces[i:j]
        elif kind == "duplicate":
            pieces[i:i] = pieces[i:j] * draw(st.integers(1, 50))
        elif kind == "swap":
            k = draw(st.integers(0, len(pieces) - 1))
            pieces[i], pieces[k] = pieces[k], pieces[i]
        elif kind == "insert":
            pieces.insert(i, " " + draw(_tokens) + " ")
        elif kind == "replace":
            pieces[i] = draw(_tokens) + " "
        elif kind == "chars":
            piece = pieces[i]
            at = draw(st.integers(0, len(piece)))
            pieces[i] = piece[:at] + draw(st.text(min_size=1, max_size=8)) + piece[at:]
        elif kind == "cut":
            del pieces[i:]
        else:
            opener, closer = draw(st.sampled_from([("(", ")"), ("[", "]"), ("{", "}"), ("<", ">")]))
            depth = draw(st.integers(1, 400))
            pieces[j:j] = [closer * depth]
            pieces[i:i] = [opener * depth]
    return "".join(pieces)


soup = st.lists(_tokens, max_size=200).map(" ".join)


class _Overtime(Exception):
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupts a compile that uses too much CPU time (on the main thread,
    where signals arrive); elsewhere only the measured time is checked.
    CPU time, not wall time: a loaded CI machine must not fail the fuzz."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise _Overtime(f"compiling took more than {seconds} s of CPU time")

    previous = signal.signal(signal.SIGVTALRM, interrupt)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def _compiles_cleanly(text: str) -> None:
    """The fuzz's assertions, for one source."""
    path = "fuzz/source.orbit"  # a directory that does not exist: imports fail fast
    started = time.process_time()
    with _time_limit(2 * SECONDS_PER_INPUT):
        result = compile_source(text, path)
        render_report(result.diagnostics, result.sources)
        render_json(result.diagnostics)
    elapsed = time.process_time() - started
    assert elapsed <= SECONDS_PER_INPUT, f"compiling took {elapsed:.1f} s of CPU time"
    for diagnostic in result.diagnostics:
        span = diagnostic.span
        assert span is not None, diagnostic
        assert span.file in result.sources, diagnostic
        size = len(result.sources[span.file].text)
        assert 0 <= span.start <= span.end <= size, diagnostic
        assert span.line >= 1 and span.column >= 1, diagnostic
    assert result.ok == (result.errors == 0)
    if result.ok:
        assert len(result.definitions) == len(result.workflows)
    for definition in result.definitions:
        # What the compiler writes, the runtime accepts (shape, depth,
        # integers) and reads back to the same definition and hash.
        document = ir.to_json(definition)
        assert ir.from_json(document) == definition
        assert ir.hash_document(document) == definition.definition_hash


def test_the_corpus_compiles_within_the_limits() -> None:
    assert len(CORPUS) > 10
    for text in CORPUS:
        _compiles_cleanly(text)


@FUZZ
@given(mutated())
def test_mutated_sources_never_crash_or_hang(text: str) -> None:
    _compiles_cleanly(text)


@FUZZ
@given(soup)
def test_token_soup_never_crashes_or_hangs(text: str) -> None:
    _compiles_cleanly(text)


@FUZZ
@given(st.text(max_size=300))
def test_random_text_never_crashes_or_hangs(text: str) -> None:
    _compiles_cleanly(text)


def test_large_integers_compile() -> None:
    # Chapter 26's way to write the minimum Int: the fuzz's `9223372036854775807`
    # once crashed the definition hash (RFC 8785 holds integers up to 2^53).
    text = 'workflow W {\n    version "1.0.0"\n    step a { compute -9223372036854775807 - 1 }\n}\n'
    assert compile_source(text, "min.orbit").ok
