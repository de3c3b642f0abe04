"""Parsing one file: `parse_source` and `parse_file` never raise.

Both return the module (possibly partial) and every diagnostic found in the
file, lexical and syntactic, in source order.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from pathlib import Path

from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.source import SourceFile, Span
from orbit_lang.syntax.builder import Builder
from orbit_lang.syntax.lexer import tokenize
from orbit_lang.syntax.parser import parse_tokens

# Each level of bracket nesting costs a few dozen Python frames in the
# packrat parser; this allows several hundred levels.
_RECURSION_LIMIT = 20_000


@contextlib.contextmanager
def _parsing() -> Iterator[None]:
    """Pauses the cycle collector and lifts the recursion limit.

    Parsing allocates hundreds of thousands of short-lived, acyclic objects;
    letting the collector walk them repeatedly costs more than the parse.
    """
    gc_was_enabled = gc.isenabled()
    limit = sys.getrecursionlimit()
    gc.disable()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
        if gc_was_enabled:
            gc.enable()


def parse(source: SourceFile) -> tuple[ast.Module, list[Diagnostic]]:
    lexed = tokenize(source)
    diagnostics = list(lexed.diagnostics)
    builder = Builder(source, lexed.tokens, lexed.doc_lines, diagnostics)
    try:
        with _parsing():
            declarations = parse_tokens(builder)
    except RecursionError:
        declarations = []
        diagnostics.append(_too_deep(source, lexed.tokens))
    diagnostics.sort(key=lambda d: d.span.start if d.span else -1)
    module = ast.Module(source.path, tuple(declarations), source.span(0, len(source.text)))
    return module, diagnostics


def _too_deep(source: SourceFile, tokens: list) -> Diagnostic:  # type: ignore[type-arg]
    depth = deepest = 0
    where = 0
    for token in tokens:
        if token.type in ("{", "(", "["):
            depth += 1
            if depth > deepest:
                deepest, where = depth, token.start
        elif token.type in ("}", ")", "]"):
            depth -= 1
    return Diagnostic.error(
        "E0100",
        "expected a closing bracket, found brackets nested too deeply to parse",
        source.span(where, where + 1),
    )


def parse_source(text: str, path: str) -> tuple[ast.Module, list[Diagnostic]]:
    """Parses `text` as the file `path` (the name diagnostics print)."""
    return parse(SourceFile(path, text))


def read_source(path: str | Path) -> SourceFile | str:
    """The file's text as a SourceFile, or the reason it cannot be read.

    Invalid UTF-8 is decoded as U+FFFD, which the lexer then reports where it
    stands outside a string or comment.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        return os_reason(error)
    return SourceFile(str(path), data.decode("utf-8", errors="replace"))


def os_reason(error: OSError) -> str:
    """An OS error as the book prints it: `No such file or directory (os error 2)`."""
    if error.errno is not None and error.strerror:
        return f"{error.strerror} (os error {error.errno})"
    return str(error)


def parse_file(path: str | Path) -> tuple[ast.Module, list[Diagnostic]]:
    """Reads and parses a file; an unreadable file is E0206."""
    source = read_source(path)
    if isinstance(source, str):
        empty = Span(str(path), 1, 1, 1, 1, 0, 0)
        diagnostic = Diagnostic.error("E0206", f"cannot read `{path}`: {source}", None)
        return ast.Module(str(path), (), empty), [diagnostic]
    return parse(source)
