"""Collects the diagnostics of the checking phases."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ParamSpec

from orbit_lang.diagnostics import Diagnostic, Label
from orbit_lang.source import Span
from orbit_lang.suggest import closest

_P = ParamSpec("_P")


def _appending(build: Callable[_P, Diagnostic], into: list[Diagnostic]) -> Callable[_P, None]:
    """`build`, but what it builds goes onto `into` instead of being returned."""

    def append(*args: _P.args, **kwargs: _P.kwargs) -> None:
        into.append(build(*args, **kwargs))

    return append


class Reporter:
    """`report.error(code, message, span, ...)` and `report.warning(...)` take what
    `Diagnostic.error` and `Diagnostic.warning` take and collect the result."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.error = _appending(Diagnostic.error, self.diagnostics)
        self.warning = _appending(Diagnostic.warning, self.diagnostics)

    @property
    def error_count(self) -> int:
        return sum(1 for d in self.diagnostics if d.is_error)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """`did you mean `x`?` for the closest candidate, if one is close enough."""
    match = closest(name, candidates)
    return None if match is None else f"did you mean `{match}`?"


def first_declared(span: Span) -> Label:
    return Label(span, "first declared here")


def duplicate_member(report: Reporter, word: str, span: Span, first: Span) -> None:
    """E0106 for a member written twice where one is allowed."""
    report.error(
        "E0106",
        f"duplicate `{word}`",
        span,
        labels=[first_declared(first)],
        help=f"keep one `{word}`",
    )
