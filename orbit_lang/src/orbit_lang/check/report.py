"""Collects the diagnostics of the checking phases."""

from __future__ import annotations

from collections.abc import Iterable

from orbit_lang.diagnostics import Diagnostic, Label
from orbit_lang.source import Span
from orbit_lang.suggest import closest


class Reporter:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def error(
        self,
        code: str,
        message: str,
        span: Span | None,
        *,
        label: str = "",
        labels: Iterable[Label] = (),
        notes: Iterable[str] = (),
        help: str | None = None,
    ) -> None:
        self.diagnostics.append(
            Diagnostic.error(
                code, message, span, label=label, labels=labels, notes=notes, help=help
            )
        )

    def warning(
        self,
        code: str,
        message: str,
        span: Span | None,
        *,
        label: str = "",
        labels: Iterable[Label] = (),
        notes: Iterable[str] = (),
        help: str | None = None,
    ) -> None:
        self.diagnostics.append(
            Diagnostic.warning(
                code, message, span, label=label, labels=labels, notes=notes, help=help
            )
        )

    @property
    def error_count(self) -> int:
        return sum(1 for d in self.diagnostics if d.is_error)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """`did you mean `x`?` for the closest candidate, if one is close enough."""
    match = closest(name, candidates)
    return None if match is None else f"did you mean `{match}`?"


def first_declared(span: Span) -> Label:
    return Label(span, "first declared here")
