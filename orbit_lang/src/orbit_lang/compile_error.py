"""`CompileError`: a failed compilation as one Python exception.

`compile_paths` returns a `CompileResult` whatever happens, which suits the
commands (they print every diagnostic and choose their exit status); code
that only wants the definitions would otherwise have to look at `ok` itself,
and a forgotten check surfaces much later as an empty list. `compile_files`
and `CompileResult.raise_on_errors` raise this instead. Its text is what
`orbit check` prints on stderr for the same files, without colour, so a
traceback points at the file, line and column of each mistake.
"""

from __future__ import annotations

from collections.abc import Mapping

from orbit_lang.diagnostics import Diagnostic, count
from orbit_lang.render import error_line, render_report
from orbit_lang.source import SourceFile


class CompileError(Exception):
    """The diagnostics of a compilation that produced no definitions."""

    def __init__(
        self,
        diagnostics: list[Diagnostic],
        sources: Mapping[str, SourceFile],
        *,
        strict: bool = False,
    ) -> None:
        self.diagnostics = tuple(diagnostics)
        self.sources = sources
        self.strict = strict
        super().__init__(_report(self.diagnostics, sources, strict=strict))

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    def __str__(self) -> str:
        return str(self.args[0])


def _report(
    diagnostics: tuple[Diagnostic, ...], sources: Mapping[str, SourceFile], *, strict: bool
) -> str:
    text = render_report(diagnostics, sources)
    errors, warnings = count(diagnostics)
    if not errors and strict and warnings:
        text += error_line(f"{warnings} warning(s) treated as errors (--strict)")
    return text.rstrip("\n")
