"""The nesting limit: how deep an expression or a type may go.

The parser, the checker and lowering all recurse on nesting, so a hostile or
generated file could otherwise exhaust the interpreter's stack. Two measures
keep every tree they see at most MAX_NESTING levels deep:

- while parsing, the `expression` and `type` rules count how many of them are
  open (brackets, `if`, lambdas, generic and record types all nest through
  one of the two; `counted` wraps their bodies); the one that would open
  level MAX_NESTING + 1 stops the match by raising `TooDeep` at its first
  token;
- while building the AST, every expression node records its height, because
  operator chains (`a + b + c`, `!!x`, `a.b.c`) are flat in the grammar but
  nested in the tree; the node that would be MAX_NESTING + 1 high raises
  `TooDeep` at its operator.

The recovering driver (`orbit_lang.syntax.parser`) turns `TooDeep` into one
located E0100 and drops the member (or declaration) that holds it, as it
drops any member that does not parse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orbit_lang.source import Span

MAX_NESTING = 100
MESSAGE = "expression nested too deeply"
NOTE = f"expressions and types may nest at most {MAX_NESTING} levels deep"
HELP = "compute parts of it in separate steps, or flatten the nesting"


class TooDeep(Exception):
    """Raised where nesting passes MAX_NESTING: at a token index while
    parsing, or at a span while building the AST."""

    def __init__(self, index: int | None = None, span: Span | None = None) -> None:
        super().__init__(index, span)
        self.index = index
        self.span = span


def counted(body: str) -> Callable[[Any, int, Any, Any, Any], Any]:
    """A grammar rule that matches the rule `body` and counts as one level
    of nesting: a custom rule in parsimonious' documented five-argument form
    (`parsimonious.expressions.expression`), which calls another rule of the
    grammar through `match_core`, as that documentation shows.

    The count lives on the `error` object that parsimonious threads through
    every match (its `depth` attribute), so concurrent parses do not share
    it. The node returned is `body`'s own."""

    def rule(tokens: Any, pos: int, cache: Any, error: Any, grammar: Any) -> Any:
        depth = error.depth + 1
        if depth > MAX_NESTING:
            raise TooDeep(index=pos)
        error.depth = depth
        try:
            return grammar[body].match_core(tokens, pos, cache, error)
        finally:
            error.depth = depth - 1

    rule.__name__ = f"counted_{body}"
    return rule
