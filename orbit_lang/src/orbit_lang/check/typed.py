"""A checked expression (`Typed`), and what the built-in functions' rules
need of the expression checker (`Checking`).

`check.expressions` checks expressions and hands calls of built-in
functions to `check.builtins`, whose rules check the arguments with the
same checker: both modules use these, and neither imports the other's
module for them (`ExprChecker` satisfies `Checking`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from orbit_core.ir import expr as e
from orbit_lang import ast
from orbit_lang.check.types import Type
from orbit_lang.diagnostics import Label
from orbit_lang.source import Span


class Typed:
    """A checked expression: its type and its IR."""

    __slots__ = ("ir", "type")

    def __init__(self, type: Type, ir: e.Expr) -> None:
        self.type = type
        self.ir = ir


class Checking(Protocol):
    """The expression checker, as a built-in function's rule uses it."""

    # Lambda parameters in scope, innermost last.
    params: list[tuple[str, Type]]

    def check(self, node: ast.Expr, expected: Type | None = None) -> Typed: ...

    def infer(self, node: ast.Expr) -> Typed: ...

    def require(self, typed: Typed, expected: Type, span: Span) -> bool: ...

    def in_scope(self) -> Iterator[str]: ...

    def error(
        self,
        code: str,
        message: str,
        span: Span,
        *,
        labels: Iterable[Label] = (),
        notes: Iterable[str] = (),
        help: str | None = None,
    ) -> None: ...

    def poison(self) -> Typed: ...
