"""The compiler driver: load, check, lower.

`compile_paths` is what `orbit check`, `compile`, `validate` and `deploy`
call. Definitions are produced only for a program without errors (and,
with `strict`, without warnings), children first, then in load order.
`compile_program` also takes the checker to run, so that `orbit lsp` can
pass `orbit_lang.checkcache.IncrementalChecker`, which gives the same
diagnostics as `check_program` while checking again only what an edit
touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from orbit_core.ir import Definition
from orbit_lang import ast
from orbit_lang.check import CheckedProgram, CheckedWorkflow, check_program
from orbit_lang.check.migration import check_migrations
from orbit_lang.compile_error import CompileError
from orbit_lang.diagnostics import Diagnostic, count, sort_key
from orbit_lang.envelope import check_envelopes
from orbit_lang.loader import Program, load_program, load_source
from orbit_lang.lower import lower
from orbit_lang.parser import read_source
from orbit_lang.render import render_human_all
from orbit_lang.source import SourceFile

# Checks a loaded program (`check.check_program` or a cached equivalent).
ProgramCheck = Callable[[Program], CheckedProgram]


@attrs.frozen
class CompileResult:
    definitions: list[Definition]
    diagnostics: list[Diagnostic]
    sources: Mapping[str, SourceFile]
    strict: bool
    # Every workflow of the compilation, children first (also when the
    # compilation failed, for tools that list them).
    workflows: list[CheckedWorkflow]

    @property
    def errors(self) -> int:
        return count(self.diagnostics)[0]

    @property
    def warnings(self) -> int:
        return count(self.diagnostics)[1]

    @property
    def ok(self) -> bool:
        errors, warnings = count(self.diagnostics)
        return errors == 0 and not (self.strict and warnings)

    def raise_on_errors(self) -> list[Definition]:
        """The definitions, or `CompileError` when the compilation failed."""
        if not self.ok:
            raise CompileError(self.diagnostics, self.sources, strict=self.strict)
        return self.definitions


def compile_paths(paths: Sequence[Path | str], strict: bool = False) -> CompileResult:
    """Compiles the files named and everything they import."""
    program, diagnostics = load_program(paths)
    return _compile(program, diagnostics, strict)


def compile_files(paths: Sequence[Path | str], strict: bool = False) -> list[Definition]:
    """The definitions of the files named (children first), or `CompileError`
    carrying every diagnostic when they do not compile: the call to use from
    Python, where a result whose `ok` nobody looks at would hide a typo."""
    return compile_paths(paths, strict).raise_on_errors()


def check_paths(paths: Sequence[Path | str], strict: bool = False) -> CompileResult:
    """Like `compile_paths` without lowering: the diagnostics and the
    checked workflows, and no definitions (what `orbit check` needs)."""
    program, diagnostics = load_program(paths)
    return _compile(program, diagnostics, strict, lowered=False)


def compile_program(
    program: Program,
    diagnostics: Sequence[Diagnostic],
    strict: bool = False,
    lowered: bool = True,
    check: ProgramCheck = check_program,
) -> CompileResult:
    """Checks and lowers a program already loaded (`loader.load_program`),
    for tools that also read its declarations (`orbit test`, `orbit lsp`,
    which does not lower and passes its own `check`)."""
    return _compile(program, list(diagnostics), strict, lowered, check)


def compile_source(text: str, path: str = "source.orbit", strict: bool = False) -> CompileResult:
    """Compiles one file given as text (imports are read from disk)."""
    program, diagnostics = load_source(text, path)
    return _compile(program, diagnostics, strict)


def _compile(
    program: Program,
    parsed: list[Diagnostic],
    strict: bool,
    lowered: bool = True,
    check: ProgramCheck = check_program,
) -> CompileResult:
    try:
        # Deep trees need the raised recursion limit (orbit_lang.process).
        return _check_and_lower(program, parsed, strict, lowered, check)
    except RecursionError:
        too_deep = Diagnostic.error("E0100", "expressions are nested too deeply to compile", None)
        return CompileResult([], [*parsed, too_deep], program.sources, strict, [])


def _check_and_lower(
    program: Program, parsed: list[Diagnostic], strict: bool, lowered: bool, check: ProgramCheck
) -> CompileResult:
    checked = check(program)
    # `migrate from` blocks compile the old version's file on their own.
    migrating, migrations = check_migrations(checked.workflows, _compile_one)
    order = {module.path: index for index, module in enumerate(program.modules)}
    diagnostics = sorted(
        [*parsed, *checked.diagnostics, *migrating], key=lambda d: sort_key(d, order)
    )
    errors, warnings = count(diagnostics)
    if errors == 0:
        # The envelope needs a whole, valid definition (issue 44).
        found = check_envelopes((w.node, w.definition) for w in checked.workflows)
        if found:
            diagnostics = sorted([*diagnostics, *found], key=lambda d: sort_key(d, order))
            errors, warnings = count(diagnostics)
    definitions: list[Definition] = []
    if lowered and errors == 0 and not (strict and warnings):
        tasks: dict[str, ast.Task] = {}
        schemas: dict[str, ast.Schema] = {}
        for declaration in program.declarations():
            if isinstance(declaration, ast.Task):
                tasks.setdefault(declaration.name.value, declaration)
            elif isinstance(declaration, ast.Schema):
                schemas.setdefault(declaration.name.name, declaration)
        definitions, refused = lower(checked.workflows, tasks, schemas, migrations)
        diagnostics = sorted([*diagnostics, *refused], key=lambda d: sort_key(d, order))
    return CompileResult(definitions, diagnostics, program.sources, strict, checked.workflows)


def _compile_one(path: Path) -> CompileResult:
    return compile_paths([path])


def render_diagnostics(
    diagnostics: Iterable[Diagnostic],
    color: bool = False,
    sources: Mapping[str, SourceFile] | None = None,
) -> str:
    """Every diagnostic in the human form, each followed by a blank line.
    Without `sources`, the files the diagnostics point into are read again."""
    diagnostics = list(diagnostics)
    if sources is None:
        found: dict[str, SourceFile] = {}
        for diagnostic in diagnostics:
            span = diagnostic.span
            if span is not None and span.file not in found:
                source = read_source(span.file)
                if isinstance(source, SourceFile):
                    found[span.file] = source
        sources = found
    return render_human_all(diagnostics, sources, color=color)
