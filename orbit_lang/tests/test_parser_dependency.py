"""What the parser relies on in parsimonious beyond its documented API.

Documented and used as documented: `TokenGrammar(rules, **custom_rules)`,
custom rules of five arguments that call other rules through `match_core`
(`parsimonious.expressions.expression`, used by `syntax.nesting.counted`),
and the nodes' `expr_name`, `start`, `end` and `children`.

Not documented: the `error` argument's protocol. A failing named rule
assigns `error.expr`, then `error.pos`, when it failed at least as far as
the failure recorded before; the recovering driver (`syntax.parser._Furthest`)
reads what the grammar expected from that. orbit_lang's pyproject pins
parsimonious to at most the version checked here: to let a newer one in,
run these tests and the syntax tests with it, then update VERIFIED.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from orbit_lang.source import SourceFile
from orbit_lang.syntax.grammar import GRAMMAR
from orbit_lang.syntax.lexer import tokenize
from orbit_lang.syntax.parser import _Furthest

VERIFIED = "0.11.0"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_installed_parsimonious_is_the_version_checked() -> None:
    installed = importlib.metadata.version("parsimonious")
    assert installed == VERIFIED, (
        f"parsimonious {installed} is installed, the parser was checked with {VERIFIED}: "
        "see this module's docstring"
    )
    pins = re.findall(r'"parsimonious([^"]*)"', PYPROJECT.read_text(encoding="utf-8"))
    assert pins == [f">=0.10,<={VERIFIED}"], pins


class _Recorder:
    """An `error` that records the order of parsimonious' assignments."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.depth = 0
        self._pos = -1

    @property
    def expr(self) -> None:
        return None  # as `_Furthest` answers: so every failing rule records

    @expr.setter
    def expr(self, value: Any) -> None:
        self.log.append("expr")

    @property
    def pos(self) -> int:
        return self._pos

    @pos.setter
    def pos(self, value: int) -> None:
        self.log.append("pos")
        self._pos = max(self._pos, value)


def _tokens(text: str) -> list[Any]:
    return list(tokenize(SourceFile("t.orbit", text)).tokens)


def test_a_failing_rule_records_its_expression_then_its_position() -> None:
    recorder = _Recorder()
    tokens = _tokens("List<String")
    node = GRAMMAR["type"].match_core(tokens, 0, defaultdict(dict), recorder)
    assert node is None
    assert recorder.log, "parsimonious no longer reports failures through `error`"
    assert recorder.log == ["expr", "pos"] * (len(recorder.log) // 2), recorder.log
    assert recorder.pos == 3  # the token after `String`, where `>` was expected


def test_the_driver_reads_what_was_expected_at_the_furthest_token() -> None:
    furthest = _Furthest()
    tokens = _tokens("List<String")
    assert GRAMMAR["type"].match_core(tokens, 0, defaultdict(dict), furthest) is None
    assert (furthest.pos, furthest.expected) == (3, "`>`")
