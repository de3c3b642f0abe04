"""Loads a compilation: the files named, everything they import, the prelude.

Imports are resolved relative to the directory of the importing file. Each
file is loaded once, identified by its resolved path, so cycles are harmless.
Load order is depth-first with a file's imports before the file itself (the
order the `ok` lines of `orbit check` follow), after the prelude.

Files are read by `orbit_lang.parser.read_source`: only regular files of at
most 2 MiB, so an import of a device, a pipe or a directory is E0206 at once
(with a note stating the rule) instead of a read that never ends.

Paths are kept as the user would write them, for diagnostics: a file named on
the command line keeps its spelling, and an import is joined to the directory
of the importing file's path and normalised (`workflows/../contracts/x.orbit`
prints as `contracts/x.orbit`).

Two ports let an editor reuse the loader (`orbit lsp`): `read` supplies a
file's text (the language server answers with an unsaved buffer before the
disk) and `parse` parses one file (the language server passes a cache keyed
by content, so an import that did not change is not parsed again). Both
default to what the command line uses.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import attrs

from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic, sort_key
from orbit_lang.parser import Unreadable, parse, read_source
from orbit_lang.prelude import PRELUDE_PATH, PRELUDE_SOURCE
from orbit_lang.source import SourceFile

# Gives the text of a file, or why it cannot be read (`parser.read_source`).
SourceReader = Callable[[str], "SourceFile | Unreadable"]
# Parses one file and never raises (`parser.parse`).
SourceParser = Callable[[SourceFile], "tuple[ast.Module, list[Diagnostic]]"]


@attrs.frozen
class Program:
    """Every module of one compilation, the prelude first."""

    modules: tuple[ast.Module, ...]
    sources: Mapping[str, SourceFile]

    @property
    def prelude(self) -> ast.Module:
        return self.modules[0]

    def declarations(self) -> Iterator[ast.Declaration]:
        for module in self.modules:
            yield from module.declarations

    @property
    def workflows(self) -> list[ast.Workflow]:
        """Every workflow, in load order."""
        return [d for d in self.declarations() if isinstance(d, ast.Workflow)]


def load_program(
    paths: Iterable[str | Path],
    *,
    read: SourceReader = read_source,
    parse: SourceParser = parse,
) -> tuple[Program, list[Diagnostic]]:
    """Loads and parses every file; never raises. Diagnostics are sorted by
    file (load order), line and column."""
    loader = _Loader(read, parse)
    loader.load_prelude()
    for path in paths:
        loader.load_root(str(path))
    return loader.program()


def load_source(text: str, path: str) -> tuple[Program, list[Diagnostic]]:
    """Like `load_program` for one file whose text is given rather than read
    (its imports are read from disk, relative to `path`)."""
    loader = _Loader(read_source, parse)
    loader.load_prelude()
    loader.seen.add(_identity(path))
    loader._load_tree(SourceFile(path, text))
    return loader.program()


class _Loader:
    def __init__(self, read: SourceReader, parse: SourceParser) -> None:
        self.read = read
        self.parse = parse
        self.modules: list[ast.Module] = []
        self.sources: dict[str, SourceFile] = {}
        self.diagnostics: list[Diagnostic] = []
        self.seen: set[str] = set()

    def program(self) -> tuple[Program, list[Diagnostic]]:
        order = {module.path: index for index, module in enumerate(self.modules)}
        diagnostics = sorted(self.diagnostics, key=lambda d: sort_key(d, order))
        return Program(tuple(self.modules), dict(self.sources)), diagnostics

    def load_prelude(self) -> None:
        source = SourceFile(PRELUDE_PATH, PRELUDE_SOURCE)
        module, diagnostics = self.parse(source)
        self.sources[source.path] = source
        self.modules.append(module)
        self.diagnostics.extend(diagnostics)

    def load_root(self, path: str) -> None:
        key = _identity(path)
        if key in self.seen:
            return
        self.seen.add(key)
        source = self.read(path)
        if isinstance(source, Unreadable):
            self.diagnostics.append(source.diagnostic(f"cannot read `{path}`", None))
            return
        self._load_tree(source)

    def _parse(self, source: SourceFile) -> ast.Module:
        module, diagnostics = self.parse(source)
        self.sources[source.path] = source
        self.diagnostics.extend(diagnostics)
        return module

    def _load_tree(self, root: SourceFile) -> None:
        # Iterative depth-first walk: a file is appended after its imports.
        stack: list[tuple[ast.Module, Iterator[ast.Import]]] = []
        module = self._parse(root)
        stack.append((module, _imports(module)))
        while stack:
            module, imports = stack[-1]
            child = self._next_import(module, imports)
            if child is None:
                stack.pop()
                self.modules.append(module)
            else:
                stack.append((child, _imports(child)))

    def _next_import(self, module: ast.Module, imports: Iterator[ast.Import]) -> ast.Module | None:
        """Reads the next not-yet-loaded import of `module`, if any."""
        for declaration in imports:
            path = _join(module.path, declaration.path.value)
            key = _identity(path)
            if key in self.seen:
                continue
            self.seen.add(key)
            source = self.read(path)
            if isinstance(source, Unreadable):
                message = f"cannot import `{declaration.path.value}`"
                self.diagnostics.append(source.diagnostic(message, declaration.span))
                continue
            return self._parse(source)
        return None


def _imports(module: ast.Module) -> Iterator[ast.Import]:
    return (d for d in module.declarations if isinstance(d, ast.Import))


def _join(importer: str, target: str) -> str:
    return os.path.normpath(os.path.join(os.path.dirname(importer), target))


def _identity(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):
        return os.path.abspath(path)
