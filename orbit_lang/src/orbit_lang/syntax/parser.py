"""Parses the tokens of one file into declarations, recovering from errors.

A file that is valid is parsed by one match of the grammar's `program` rule.
Only when that fails does the recovering driver below take over; it uses the
same grammar one declaration, block header or member at a time, so one run
reports every syntax error in the file:

- An unknown word in a block is E0102 (`unexpected `x` in step`, with a
  suggestion for a misspelt member); the rest of its line is skipped, with
  bracketed groups skipped whole.
- A member that starts with its keyword but does not parse is E0100
  (`expected <what>, found <token>`) at the furthest token the grammar
  reached; parsing resumes at that token, in the enclosing block. This is how
  chapter 26's example cascades from E0100 to E0102 and E0104.
- At the top level, anything but a declaration is E0104; the driver skips to
  the next line that starts with a declaration keyword.
- A block still open at the end of the file is E0103, reported once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from parsimonious.exceptions import ParseError
from parsimonious.expressions import TokenMatcher

from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.source import Span
from orbit_lang.suggest import closest
from orbit_lang.syntax.builder import Builder
from orbit_lang.syntax.grammar import EXPECTATIONS, GRAMMAR
from orbit_lang.syntax.lexer import EOF, Token

DECLARATION_KEYWORDS = ("workflow", "schema", "task", "import", "test")
DECLARATION_NOTE = "top-level declarations are `workflow`, `schema`, `task`, `import` and `test`"
_SEPARATORS = (",", ";")
_OPENERS = {"{": "}", "(": ")", "[": "]"}
_CLOSERS = frozenset(_OPENERS.values())


@attrs.frozen
class _BlockKind:
    """How the driver reads the members of one kind of block."""

    member_rule: str
    # Words that start a member handled by `member_rule`.
    keywords: tuple[str, ...]
    # Words that start a member with a block of its own, recovered member by
    # member: `step`, `on` and `compensate`.
    nested: tuple[str, ...] = ()


_STEP_KEYWORDS = (
    "worker",
    "workflow",
    "sleep",
    "await",
    "compute",
    "using",
    "after",
    "with",
    "timeout",
    "queue_timeout",
    "retry",
    "idempotency_key",
    "when",
    "for",
    "max_parallel",
)
_BLOCKS = {
    "workflow": _BlockKind(
        "workflow_member",
        (
            "version",
            "description",
            "timeout",
            "input",
            "output",
            "signal",
            "query",
            "return",
            "continue_as_new",
            "limits",
        ),
        ("step", "on"),
    ),
    "task": _BlockKind(
        "task_member", ("version", "description", "input", "output", "compensated_by")
    ),
    "test": _BlockKind("test_member", ("workflow", "version", "input", "mock", "signal", "expect")),
    "step": _BlockKind("step_member", _STEP_KEYWORDS, ("compensate",)),
    "compensate": _BlockKind("step_simple_member", _STEP_KEYWORDS),
    "handler": _BlockKind("step_decl", (), ("step",)),
}


class _Furthest:
    """Stands in for parsimonious' ParseError while one rule is matched.

    parsimonious records a failing expression by assigning `error.expr`, then
    `error.pos`, whenever the failure is at least as far as the last one
    recorded and (because `expr` always reads as None here) whatever the
    expression is. We keep the description of the last describable failure at
    the furthest position: that is the innermost thing the parser was still
    trying when it gave up, such as the `}` closing an object literal.
    """

    __slots__ = ("_pending", "_pos", "expected")

    def __init__(self) -> None:
        self._pending: Any = None
        self._pos = -1
        self.expected = "a token"

    @property
    def expr(self) -> None:
        return None

    @expr.setter
    def expr(self, value: Any) -> None:
        self._pending = value

    @property
    def pos(self) -> int:
        return self._pos

    @pos.setter
    def pos(self, value: int) -> None:
        description = _describe(self._pending)
        if description is not None and value >= self._pos:
            self._pos = value
            self.expected = description


def _describe(expression: Any) -> str | None:
    name = expression.name
    if name in EXPECTATIONS:
        return EXPECTATIONS[name]
    if isinstance(expression, TokenMatcher):
        literal: str = expression.literal
        return EXPECTATIONS.get(literal, f"`{literal}`")
    return None


def parse_tokens(builder: Builder) -> list[ast.Declaration]:
    """The declarations of one file; problems go to `builder.diagnostics`."""
    tokens = builder.tokens
    node = GRAMMAR["program"].match_core(tokens, 0, defaultdict(dict), ParseError(tokens))
    if node is not None:
        return builder.program(node)
    return _Recovery(builder).program()


class _Recovery:
    def __init__(self, builder: Builder) -> None:
        self.builder = builder
        self.tokens: Sequence[Token] = builder.tokens
        self.diagnostics = builder.diagnostics
        self.reported_unclosed = False

    # Matching -----------------------------------------------------------------

    def match(self, rule: str, pos: int) -> tuple[Any, _Furthest]:
        # A fresh packrat cache: a failure replayed from the cache is recorded
        # only where the cached rule started, which would hide how far the
        # parser actually got.
        furthest = _Furthest()
        node = GRAMMAR[rule].match_core(self.tokens, pos, defaultdict(dict), furthest)
        return node, furthest

    def expected(self, furthest: _Furthest, start: int) -> int:
        """Reports what the grammar expected; returns where to resume."""
        pos = max(furthest.pos, start + 1)
        token = self.tokens[pos]
        # At the end of the file the block that is still open says it better.
        if token.type != EOF:
            self.error("E0100", f"expected {furthest.expected}, found {token.describe()}", pos)
        return pos

    def error(self, code: str, message: str, index: int, **extra: Any) -> None:
        self.diagnostics.append(
            Diagnostic.error(code, message, self.builder.token_span(index), **extra)
        )

    def skip_line(self, pos: int) -> int:
        """Skips the token at `pos` and the rest of its line, and any
        bracketed group that starts on it; stops before a `}` that closes the
        enclosing block."""
        depth = 1 if self.tokens[pos].type in _OPENERS else 0
        pos += 1
        while True:
            token = self.tokens[pos]
            kind = token.type
            if kind == EOF or (depth == 0 and (token.nl_before or kind in _CLOSERS)):
                return pos
            if kind in _OPENERS:
                depth += 1
            elif kind in _CLOSERS:
                depth -= 1
            pos += 1

    # Top level ------------------------------------------------------------------

    def program(self) -> list[ast.Declaration]:
        declarations: list[ast.Declaration] = []
        tokens = self.tokens
        pos = 0
        while tokens[pos].type != EOF:
            kind = tokens[pos].type
            if kind in _SEPARATORS:
                pos += 1
            elif kind in DECLARATION_KEYWORDS:
                declaration, pos = self.declaration(pos)
                if declaration is not None:
                    declarations.append(declaration)
            else:
                self.error(
                    "E0104",
                    f"expected a declaration, found {tokens[pos].describe()}",
                    pos,
                    notes=(DECLARATION_NOTE,),
                )
                pos = self.skip_line(pos)
                while tokens[pos].type != EOF and not (
                    tokens[pos].nl_before and tokens[pos].type in DECLARATION_KEYWORDS
                ):
                    pos = self.skip_line(pos)
        return declarations

    def declaration(self, pos: int) -> tuple[ast.Declaration | None, int]:
        node, furthest = self.match("declaration", pos)
        if node is not None:
            return self.builder.declaration(node), node.end
        kind = self.tokens[pos].type
        if kind not in _BLOCKS:
            return None, self.expected(furthest, pos)
        head, furthest = self.match(f"{kind}_head", pos)
        if head is None:
            return None, self.expected(furthest, pos)
        members, end = self.members(kind, kind, head.end)
        span = self.builder.range_span(pos, end)
        make: dict[str, Callable[[Any, list[Any], Span], ast.Declaration]] = {
            "workflow": self.builder.make_workflow,
            "task": self.builder.make_task,
            "test": self.builder.make_test,
        }
        return make[kind](head, members, span), end

    # Blocks ---------------------------------------------------------------------

    def members(self, kind: str, context: str, pos: int) -> tuple[list[Any], int]:
        """The members of a block whose `{` is just before `pos`; returns them
        and the position after the closing `}`."""
        block = _BLOCKS[kind]
        tokens = self.tokens
        opening = pos - 1
        members: list[Any] = []
        while True:
            token = tokens[pos]
            word = token.type
            if word == "}":
                return members, pos + 1
            if word == EOF:
                self.unclosed(context, opening)
                return members, pos
            if word in _SEPARATORS:
                pos += 1
                continue
            if word in block.nested:
                member, pos = self.nested(word, pos)
                if member is not None:
                    members.append(member)
                continue
            if word in block.keywords:
                node, furthest = self.match(block.member_rule, pos)
                if node is not None:
                    members.append(self.builder.member(node))
                    pos = node.end
                else:
                    pos = self.expected(furthest, pos)
                continue
            suggestion = closest(word, block.keywords + block.nested) if token.is_word else None
            self.error(
                "E0102",
                f"unexpected {token.describe()} in {context}",
                pos,
                help=f"did you mean `{suggestion}`?" if suggestion else None,
            )
            pos = self.skip_line(pos)

    def nested(self, word: str, pos: int) -> tuple[Any, int]:
        """A `step`, `compensate` or `on` member: whole if it parses, else
        header first, then member by member."""
        if word == "on":
            return self.handler(pos)
        rule, kind, context = {
            "step": ("step_decl", "step", "step"),
            "compensate": ("compensate", "compensate", "`compensate` block"),
        }[word]
        node, _ = self.match(rule, pos)
        if node is not None:
            return self.builder.member(node), node.end
        head, furthest = self.match(f"{rule.removesuffix('_decl')}_head", pos)
        if head is None:
            return None, self.expected(furthest, pos)
        members, end = self.members(kind, context, head.end)
        span = self.builder.range_span(pos, end)
        if word == "step":
            return self.builder.make_step(head, members, span), end
        return self.builder.make_compensate(head, members, span), end

    def handler(self, pos: int) -> tuple[Any, int]:
        kind_token = self.tokens[pos + 1]
        kind = kind_token.type
        if kind in ("failure", "cancel", "timeout"):
            rule, head_rule = "on_outcome", "on_outcome_head"
        elif kind == "event":
            rule, head_rule = "on_event", "on_event_head"
        elif kind_token.is_word:
            end = pos + 2 if self.tokens[pos + 2].type == "{" else pos + 1
            self.diagnostics.append(
                Diagnostic.error(
                    "E0105",
                    f"`on {kind}` handlers are not supported",
                    self.builder.range_span(pos, end + 1),
                    help="use `on failure`, `on cancel`, `on timeout` or `on event <signal>`",
                )
            )
            return None, self.skip_line(pos)
        else:
            self.error(
                "E0100",
                f"expected {EXPECTATIONS['outcome_kind']}, found {kind_token.describe()}",
                pos + 1,
            )
            return None, self.skip_line(pos)
        node, _ = self.match(rule, pos)
        if node is not None:
            return self.builder.member(node), node.end
        head, furthest = self.match(head_rule, pos)
        if head is None:
            return None, self.expected(furthest, pos)
        context = f"`on {kind}` block"
        steps, end = self.members("handler", context, head.end)
        span = self.builder.range_span(pos, end)
        if rule == "on_outcome":
            return self.builder.make_outcome(head, steps, span), end
        return self.builder.make_event(head, steps, span), end

    def unclosed(self, context: str, opening: int) -> None:
        """E0103 at the innermost bracket still open at the end of the file
        (or, if recovery closed the brackets differently, at `opening`)."""
        if self.reported_unclosed:
            return
        self.reported_unclosed = True
        stack: list[int] = []
        for index, token in enumerate(self.tokens):
            if token.type in _OPENERS:
                stack.append(index)
            elif token.type in _CLOSERS and stack:
                stack.pop()
        index = stack[-1] if stack else opening
        opener = self.tokens[index].type
        self.error("E0103", f"unclosed `{opener}` in {context}", index)
