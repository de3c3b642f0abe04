"""Open buffers and the analysis of one document by the real compiler.

An analysis after an edit redoes little: `ParseCache` parses only the
declarations the edit touched (`orbit_lang.incremental`) and `Checkers`
keeps an `orbit_lang.checkcache.IncrementalChecker` per document, which
checks again only the workflows whose text, or that of a declaration they
refer to, changed. Nothing is lowered. The diagnostics are those of a whole
`orbit check` of the same texts.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

from orbit_lang import ast
from orbit_lang.check import CheckedWorkflow
from orbit_lang.checkcache import IncrementalChecker
from orbit_lang.compiler import CompileResult, compile_program
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.incremental import IncrementalParser
from orbit_lang.loader import Program, load_program
from orbit_lang.parser import Unreadable, read_source
from orbit_lang.source import SourceFile

# Parsed files kept: the open documents and their imports, a few versions
# of each (each version of a large file keeps a tree of its own).
_CACHE_SIZE = 64
# Documents whose last check is remembered: more than anyone keeps open.
_CHECKERS = 64


def identity(path: str) -> str:
    """The key a path is known by: absolute and resolved, as the loader does."""
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):
        return os.path.abspath(path)


class ParseCache:
    """The loader's `parse` port with memory: a file whose path and text were
    parsed before is not parsed again (least recently used entries go), and a
    changed file is parsed again declaration by declaration
    (`orbit_lang.incremental`)."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._entries: OrderedDict[tuple[str, bytes], tuple[ast.Module, list[Diagnostic]]] = (
            OrderedDict()
        )
        self._size = size
        self._lock = threading.Lock()
        self._incremental = IncrementalParser()
        self.misses = 0

    def __call__(self, source: SourceFile) -> tuple[ast.Module, list[Diagnostic]]:
        key = (source.path, hashlib.blake2b(source.text.encode("utf-8", "surrogatepass")).digest())
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[0], list(hit[1])
        self.misses += 1
        module, diagnostics = self._incremental(source)
        with self._lock:
            self._entries[key] = (module, list(diagnostics))
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return module, diagnostics


class Checkers:
    """An `IncrementalChecker` per document analysed (the least recently
    analysed go): each remembers the last check of its document's program."""

    def __init__(self, size: int = _CHECKERS) -> None:
        self._checkers: OrderedDict[str, IncrementalChecker] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def __call__(self, path: str) -> IncrementalChecker:
        key = identity(path)
        with self._lock:
            checker = self._checkers.get(key)
            if checker is None:
                checker = self._checkers[key] = IncrementalChecker()
                while len(self._checkers) > self._size:
                    self._checkers.popitem(last=False)
            self._checkers.move_to_end(key)
            return checker


@attrs.frozen
class Analysis:
    """One document checked with everything it imports."""

    path: str
    version: int | None
    text: str
    program: Program
    result: CompileResult

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.result.diagnostics

    @property
    def module(self) -> ast.Module | None:
        for module in self.program.modules:
            if module.path == self.path:
                return module
        return None

    @property
    def files(self) -> list[str]:
        """Every file of the program but the prelude."""
        return [m.path for m in self.program.modules[1:]]

    def declarations(self) -> Iterator[ast.Declaration]:
        return self.program.declarations()

    def task(self, name: str) -> ast.Task | None:
        for d in self.declarations():
            if isinstance(d, ast.Task) and d.name.value == name:
                return d
        return None

    def workflow(self, name: str) -> ast.Workflow | None:
        for d in self.declarations():
            if isinstance(d, ast.Workflow) and d.name.name == name:
                return d
        return None

    def schema(self, name: str) -> ast.Schema | None:
        for d in self.declarations():
            if isinstance(d, ast.Schema) and d.name.name == name:
                return d
        return None

    def checked(self, workflow: ast.Workflow) -> CheckedWorkflow | None:
        for checked in self.result.workflows:
            if checked.node is workflow:
                return checked
        for checked in self.result.workflows:
            if checked.node.name.name == workflow.name.name:
                return checked
        return None


class Overlay:
    """The loader's `read` port: an open buffer is read before the file on disk."""

    def __init__(self, buffers: Mapping[str, str]) -> None:
        self._buffers = dict(buffers)

    def __call__(self, path: str) -> SourceFile | Unreadable:
        text = self._buffers.get(identity(path))
        if text is not None:
            return SourceFile(path, text)
        return read_source(path)


def analyse(
    path: str,
    buffers: Mapping[str, str],
    cache: ParseCache,
    version: int | None = None,
    checkers: Checkers | None = None,
) -> Analysis:
    """Loads, parses and checks the document at `path` (never raises on user
    input: the loader and compiler report problems as diagnostics). With
    `checkers`, workflows an edit did not touch are not checked again."""
    reader = Overlay(buffers)
    program, parsed = load_program([path], read=reader, parse=cache)
    if checkers is None:
        result = compile_program(program, parsed, lowered=False)
    else:
        result = compile_program(program, parsed, lowered=False, check=checkers(path))
    source = program.sources.get(path)
    text = source.text if source is not None else buffers.get(identity(path), "")
    return Analysis(path, version, text, program, result)
