"""Parsing again after an edit, one top-level declaration at a time.

An editor re-parses a file on every keystroke; parsing a 2,000-line file
whole takes far longer than one declaration. `IncrementalParser` is a
`parse` port for the loader (`loader.load_program(parse=...)`) that cuts the
text into chunks at the lines where a top-level declaration starts (with the
comment and blank lines just above it, so doc comments stay with their
declaration), parses each chunk on its own and remembers the result by the
chunk's text. A chunk that moved (an edit above it) is not parsed again: its
tree is copied with every span moved by the same number of lines and
characters; columns never change because chunks start at line starts.

The result must be the one `parser.parse` gives for the whole text, so any
doubt falls back to `parser.parse`. Only error-free chunks, cut at
declaration boundaries, are put together, and a sequence of complete
declarations parses the same alone as in the whole file. A chunk with a
diagnostic may recover differently when the parser sees what follows it (an
unclosed `{` takes in the declarations below), so from the first such chunk
to the end the text is parsed as one piece, in place (the text above it
blanked out): the clean
chunks above it leave the lexer outside any string or comment and every
bracket paired, so that piece parses as it does at the end of the whole
file. A text with no declaration start at all is parsed whole.
"""

from __future__ import annotations

import itertools
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import attrs

from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.parser import parse
from orbit_lang.source import SourceFile, Span

_DECLARATION = re.compile(r"^(?:import|schema|task|workflow|test)\b", re.MULTILINE)
_ABOVE = re.compile(r"[ \t]*(?://.*)?\r?\n?\Z")
# Chunks remembered: a few large files' worth.
_CACHE_SIZE = 4096


def chunks(text: str) -> list[tuple[int, int, str]]:
    """The chunks of `text` as (offset, line index, text); their texts add up to `text`."""
    starts = [0]
    for match in _DECLARATION.finditer(text):
        start = match.start()
        # Move up over the comment and blank lines right above the keyword.
        while start > 0:
            previous = text.rfind("\n", 0, start - 1) + 1
            if not _ABOVE.fullmatch(text, previous, start):
                break
            start = previous
        if start > starts[-1]:
            starts.append(start)
    starts.append(len(text))
    found = []
    line = 0
    for begin, end in itertools.pairwise(starts):
        if end > begin:
            piece = text[begin:end]
            found.append((begin, line, piece))
            line += piece.count("\n")
    return found


class IncrementalParser:
    """`parser.parse` with memory of the declarations it parsed (see the module
    docstring); thread-safe for one caller at a time."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._chunks: OrderedDict[tuple[str, str], tuple[tuple[ast.Declaration, ...], bool]] = (
            OrderedDict()
        )
        self._size = size
        self.parsed_chunks = 0
        # The chunks of the last text of each path, where they were: an edit
        # leaves the chunks above it in place, so they are reused as they are.
        self._placed: dict[str, dict[tuple[str, int, int], tuple[ast.Declaration, ...]]] = {}

    def __call__(self, source: SourceFile) -> tuple[ast.Module, list[Diagnostic]]:
        pieces = chunks(source.text)
        if len(pieces) < 2:
            return parse(source)
        declarations: list[ast.Declaration] = []
        before = self._placed.get(source.path, {})
        placed: dict[tuple[str, int, int], tuple[ast.Declaration, ...]] = {}
        for offset, line, text in pieces:
            key = (text, line, offset)
            here = before.get(key)
            if here is None:
                parsed = self._chunk(source.path, text)
                if parsed is None:
                    self._placed[source.path] = placed
                    return self._rest(source, declarations, line, offset)
                here = parsed if offset == 0 else tuple(_shift(d, line, offset) for d in parsed)
            placed[key] = here
            declarations.extend(here)
        self._placed[source.path] = placed
        span = source.span(0, len(source.text))
        return ast.Module(source.path, tuple(declarations), span), []

    @staticmethod
    def _rest(
        source: SourceFile, declarations: list[ast.Declaration], line: int, offset: int
    ) -> tuple[ast.Module, list[Diagnostic]]:
        """The module when the chunk at `offset` does not parse alone: the
        chunks above it as they are, the text from it to the end parsed as
        one (see the module docstring)."""
        if offset == 0:
            return parse(source)
        # The text above as blanks and as many line breaks, so that the rest
        # is parsed where it stands (no spans to move) and its first token
        # follows a line break, as in the whole file.
        blank = " " * (offset - line) + "\n" * line
        module, diagnostics = parse(SourceFile(source.path, blank + source.text[offset:]))
        declarations.extend(module.declarations)
        span = source.span(0, len(source.text))
        return ast.Module(source.path, tuple(declarations), span), diagnostics

    def _chunk(self, path: str, text: str) -> tuple[ast.Declaration, ...] | None:
        key = (path, text)
        hit = self._chunks.get(key)
        if hit is None:
            self.parsed_chunks += 1
            module, diagnostics = parse(SourceFile(path, text))
            hit = (module.declarations, not diagnostics)
            self._chunks[key] = hit
            while len(self._chunks) > self._size:
                self._chunks.popitem(last=False)
        else:
            self._chunks.move_to_end(key)
        declarations, clean = hit
        return declarations if clean else None


# How to move a node of each type (`_shifter`), made on first use.
_SHIFTERS: dict[type, Callable[[Any, int, int], Any]] = {}
# Field types that never hold a span: copied without a look inside.
_PLAIN = {"str", "int", "float", "bool", "str | None", "int | None", "float | None"}


def _shift(node: Any, lines: int, offset: int) -> Any:
    """A copy of `node` with every span moved down `lines` lines and `offset` characters."""
    shifter = _SHIFTERS.get(type(node))
    if shifter is None:
        shifter = _SHIFTERS[type(node)] = _shifter(type(node))
    return shifter(node, lines, offset)


def _shift_span(span: Span, lines: int, offset: int) -> Span:
    return Span(
        span.file,
        span.line + lines,
        span.column,
        span.end_line + lines,
        span.end_column,
        span.start + offset,
        span.end + offset,
    )


def _shift_tuple(items: tuple[Any, ...], lines: int, offset: int) -> tuple[Any, ...]:
    return tuple([_shift(item, lines, offset) for item in items])


def _keep(node: Any, lines: int, offset: int) -> Any:
    return node


def _shifter(cls: type) -> Callable[[Any, int, int], Any]:
    """The function that moves a node of type `cls`. For a tree node it is
    written out field by field once (a walk that looks up each field's kind
    at every node spends most of its time doing that)."""
    if cls is Span:
        return _shift_span
    if cls is tuple:
        return _shift_tuple
    if not attrs.has(cls):
        return _keep  # strings, numbers, None, enumerations
    arguments = []
    for field in attrs.fields(cls):
        kind = str(field.type)
        value = f"node.{field.name}"
        if kind in _PLAIN:
            arguments.append(value)
        elif kind == "Span":
            arguments.append(f"shift_span({value}, lines, offset)")
        else:
            arguments.append(f"shift({value}, lines, offset)")
    code = f"def shift_node(node, lines, offset):\n    return cls({', '.join(arguments)})\n"
    scope: dict[str, Any] = {"cls": cls, "shift": _shift, "shift_span": _shift_span}
    # The text is made above from attrs field names only.
    exec(code, scope)
    shifter: Callable[[Any, int, int], Any] = scope["shift_node"]
    return shifter
