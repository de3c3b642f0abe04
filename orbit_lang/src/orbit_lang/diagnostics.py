"""The one diagnostics model shared by every phase and every renderer.

A diagnostic is data: a severity, a stable code, a one-line message, the
primary span (with an optional label text), secondary labels, notes and an
optional help line. Renderers (`orbit_lang.render`) turn it into the human
form or JSON; nothing else formats diagnostics.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Concatenate, ParamSpec, TypeVar

import attrs

from orbit_lang.source import Span


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@attrs.frozen
class Label:
    """A secondary span with the text printed after its `---` marker."""

    span: Span
    message: str = ""


def _build(
    severity: Severity,
    code: str,
    message: str,
    span: Span | None,
    *,
    label: str = "",
    labels: Iterable[Label] = (),
    notes: Iterable[str] = (),
    help: str | None = None,
) -> Diagnostic:
    return Diagnostic(severity, code, message, span, label, tuple(labels), tuple(notes), help)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _preset(severity: Severity, build: Callable[Concatenate[Severity, _P], _R]) -> Callable[_P, _R]:
    """`build` with its leading severity argument fixed, keeping the rest of its signature."""

    def built(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return build(severity, *args, **kwargs)

    return built


@attrs.frozen
class Diagnostic:
    severity: Severity
    code: str
    message: str
    # None only for problems that have no place in a source file, such as a
    # file named on the command line that cannot be read.
    span: Span | None
    label: str = ""
    labels: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None

    # `Diagnostic.error(code, message, span, label=..., labels=..., notes=..., help=...)`
    # and `Diagnostic.warning(...)`, which accept any iterables of labels and notes.
    error = staticmethod(_preset(Severity.ERROR, _build))
    warning = staticmethod(_preset(Severity.WARNING, _build))

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def count(diagnostics: Iterable[Diagnostic]) -> tuple[int, int]:
    """The number of errors and of warnings."""
    errors = warnings = 0
    for diagnostic in diagnostics:
        if diagnostic.is_error:
            errors += 1
        else:
            warnings += 1
    return errors, warnings


def sort_key(diagnostic: Diagnostic, file_order: dict[str, int]) -> tuple[int, int, int]:
    """Orders diagnostics by file (load order), then line and column.

    Python's sort is stable, so diagnostics at the same position keep the
    order in which the phases reported them (the first error at a position
    is the real one; later ones follow from recovery).
    """
    span = diagnostic.span
    if span is None:
        return (-1, 0, 0)
    return (file_order.get(span.file, len(file_order)), span.line, span.column)
