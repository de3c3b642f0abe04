"""Parsing one file: `parse_source` and `parse_file` never raise.

Both return the module (possibly partial) and every diagnostic found in the
file, lexical and syntactic, in source order.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import attrs

from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.source import SourceFile, Span
from orbit_lang.syntax import nesting
from orbit_lang.syntax.builder import Builder
from orbit_lang.syntax.lexer import tokenize
from orbit_lang.syntax.parser import parse_tokens


def parse(source: SourceFile) -> tuple[ast.Module, list[Diagnostic]]:
    lexed = tokenize(source)
    diagnostics = list(lexed.diagnostics)
    builder = Builder(source, lexed.tokens, lexed.doc_lines, diagnostics)
    try:
        declarations = parse_tokens(builder)
    except RecursionError:
        declarations = []
        diagnostics.append(_too_deep(source, lexed.tokens))
    diagnostics.sort(key=lambda d: d.span.start if d.span else -1)
    module = ast.Module(source.path, tuple(declarations), source.span(0, len(source.text)))
    return module, diagnostics


def _too_deep(source: SourceFile, tokens: list) -> Diagnostic:  # type: ignore[type-arg]
    # A safety net: the nesting limit (orbit_lang.syntax.nesting) stops the
    # parser long before the interpreter's stack runs out, in a process that
    # raised the recursion limit (orbit_lang.process); in one that did not, a
    # deep source ends here.
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
        "E0100", nesting.MESSAGE, source.span(where, where + 1), notes=(nesting.NOTE,)
    )


def parse_source(text: str, path: str) -> tuple[ast.Module, list[Diagnostic]]:
    """Parses `text` as the file `path` (the name diagnostics print)."""
    return parse(SourceFile(path, text))


# Source files are text a person writes: the book's largest example is a few
# KiB and a generated program of 20,000 lines about 600 KiB. The cap keeps a
# mistaken path (a log, an image, a disk) from stalling the compiler.
MAX_SOURCE_BYTES = 2 * 1024 * 1024
SOURCE_FILES_NOTE = "only regular files of at most 2 MiB (2,097,152 bytes) are read as source"

# Opening a FIFO for reading blocks until a writer appears, unless it is
# opened non-blocking; a terminal must not become the controlling one.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


@attrs.frozen
class Unreadable:
    """Why a file cannot be read as source: the `<reason>` of E0206, and a
    note for the reasons that are ORBIT's rules rather than the system's."""

    reason: str
    note: str | None = None

    def diagnostic(self, message: str, span: Span | None) -> Diagnostic:
        notes = () if self.note is None else (self.note,)
        return Diagnostic.error("E0206", f"{message}: {self.reason}", span, notes=notes)


def read_source(path: str | Path) -> SourceFile | Unreadable:
    """The file's text as a SourceFile, or why it cannot be read.

    Only a regular file of at most MAX_SOURCE_BYTES is read: a directory, a
    device, a pipe or a socket is refused without reading from it, checked
    before opening and again on the open file (the path may have changed in
    between). Invalid UTF-8 is decoded as U+FFFD, which the lexer then
    reports where it stands outside a string or comment.
    """
    try:
        refused = _refusal(os.stat(path))
        if refused is not None:
            return refused
        fd = os.open(path, _OPEN_FLAGS)
        try:
            refused = _refusal(os.fstat(fd))
            if refused is not None:
                return refused
            data = _read_at_most(fd, MAX_SOURCE_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as error:
        return Unreadable(os_reason(error))
    if len(data) > MAX_SOURCE_BYTES:
        # The file grew after the size check.
        return Unreadable("the file is too large", SOURCE_FILES_NOTE)
    return SourceFile(str(path), data.decode("utf-8", errors="replace"))


def _refusal(status: os.stat_result) -> Unreadable | None:
    mode = status.st_mode
    if stat.S_ISREG(mode):
        if status.st_size > MAX_SOURCE_BYTES:
            return Unreadable(
                f"the file is too large ({status.st_size:,} bytes)", SOURCE_FILES_NOTE
            )
        return None
    if stat.S_ISDIR(mode):
        # What reading a directory reports, as the book's reasons are worded.
        return Unreadable(os_reason(IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))))
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return Unreadable(f"not a regular file ({kind})", SOURCE_FILES_NOTE)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(limit - size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def os_reason(error: OSError) -> str:
    """An OS error as the book prints it: `No such file or directory (os error 2)`."""
    if error.errno is not None and error.strerror:
        return f"{error.strerror} (os error {error.errno})"
    return str(error)


def parse_file(path: str | Path) -> tuple[ast.Module, list[Diagnostic]]:
    """Reads and parses a file; an unreadable file is E0206."""
    source = read_source(path)
    if isinstance(source, Unreadable):
        empty = Span(str(path), 1, 1, 1, 1, 0, 0)
        diagnostic = source.diagnostic(f"cannot read `{path}`", None)
        return ast.Module(str(path), (), empty), [diagnostic]
    return parse(source)
