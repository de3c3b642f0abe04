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
  reached; parsing resumes at that token, in the enclosing block (after it,
  if it closes a bracket the member opened). This is how chapter 26's
  example cascades from E0100 to E0102 and E0104.
- At the top level, anything but a declaration is E0104, and a declaration
  that does not parse is E0100; either way the driver skips to the next line
  that starts with a declaration keyword.
- A block still open at the end of the file is E0103, reported once.
- A stray character (`<error>` token) was reported by the lexer; the driver
  recovers around it without reporting it again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
from parsimonious.exceptions import ParseError
from parsimonious.expressions import TokenMatcher

from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.source import Span
from orbit_lang.suggest import closest
from orbit_lang.syntax import nesting
from orbit_lang.syntax.builder import Builder
from orbit_lang.syntax.grammar import EXPECTATIONS, GRAMMAR
from orbit_lang.syntax.lexer import EOF, ERROR, Token
from orbit_lang.syntax.nesting import TooDeep

DECLARATION_KEYWORDS = ("workflow", "schema", "task", "import", "test", "verify")
DECLARATION_NOTE = "top-level declarations are `workflow`, `schema`, `task`, `import` and `test`"
_SEPARATORS = (",", ";")
_OPENERS = {"{": "}", "(": ")", "[": "]"}
_CLOSERS = frozenset(_OPENERS.values())
_MATCHING_OPENER = {closer: opener for opener, closer in _OPENERS.items()}
_T = TypeVar("_T")


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
# Words that start a flow-control member (docs/language/flow-control.md), in
# a workflow and in a step.
_FLOW_KEYWORDS = ("concurrency", "rate", "priority", "fairness", "debounce")
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
            "migrate",
            *_FLOW_KEYWORDS,
            "search",
            # beyond the book: docs/retention.md
            "retention",
        ),
        ("step", "on"),
    ),
    "task": _BlockKind(
        "task_member",
        ("version", "description", "input", "output", "compensated_by", "effect"),
    ),
    "test": _BlockKind("test_member", ("workflow", "version", "input", "mock", "signal", "expect")),
    "verify": _BlockKind("verify_member", ("workflow", "version", "input", "invariant")),
    "step": _BlockKind("step_member", _STEP_KEYWORDS + _FLOW_KEYWORDS, ("compensate",)),
    "compensate": _BlockKind("step_simple_member", _STEP_KEYWORDS),
    "handler": _BlockKind("step_decl", (), ("step",)),
}


class _Furthest:
    """Stands in for parsimonious' ParseError while one rule is matched.

    parsimonious records a failing expression by assigning `error.expr`, then
    `error.pos`, whenever the failure is at least as far as the last one
    recorded and (because `expr` always reads as None here) whatever the
    expression is. We keep the description of the last describable failure at
    the furthest position: the last thing the parser tried there before it
    gave up, such as the `}` that would have closed an object literal.
    """

    __slots__ = ("_pending", "_pos", "depth", "expected", "too_deep")

    def __init__(self) -> None:
        self._pending: Any = None
        self._pos = -1
        self.expected = "a token"
        # Open nesting levels, and where the limit stopped the match.
        self.depth = 0
        self.too_deep: TooDeep | None = None

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
    error = ParseError(tokens)
    error.depth = 0
    mark = len(builder.diagnostics)
    try:
        node = GRAMMAR["program"].match_core(tokens, 0, defaultdict(dict), error)
        if node is not None:
            return builder.program(node)
    except TooDeep:
        # The recovering driver finds the member that nests too deeply; what
        # the builder reported so far it reports again.
        del builder.diagnostics[mark:]
    return _Recovery(builder).program()


class _Recovery:
    def __init__(self, builder: Builder) -> None:
        self.builder = builder
        self.tokens: Sequence[Token] = builder.tokens
        self.diagnostics = builder.diagnostics
        self.partner = _pair_brackets(self.tokens)
        # Indexes of the `{` of the blocks being read, innermost last.
        self.blocks: list[int] = []
        self.reported_unclosed = False

    # Matching -----------------------------------------------------------------

    def match(self, rule: str, pos: int) -> tuple[Any, _Furthest]:
        # A fresh packrat cache: a failure replayed from the cache is recorded
        # only where the cached rule started, which would hide how far the
        # parser actually got.
        furthest = _Furthest()
        try:
            node = GRAMMAR[rule].match_core(self.tokens, pos, defaultdict(dict), furthest)
        except TooDeep as error:
            furthest.too_deep = error
            return None, furthest
        return node, furthest

    def build(self, make: Callable[[Any], _T], node: Any) -> _T | TooDeep:
        """`make(node)`, or where it found nesting too deep (with what it
        reported before that taken back: the caller builds the parts again)."""
        mark = len(self.diagnostics)
        try:
            return make(node)
        except TooDeep as error:
            del self.diagnostics[mark:]
            return error

    def too_deep(self, error: TooDeep) -> None:
        span = error.span
        if span is None:
            assert error.index is not None
            if self.tokens[error.index].type == ERROR:
                return
            span = self.builder.token_span(error.index)
        self.diagnostics.append(
            Diagnostic.error(
                "E0100", nesting.MESSAGE, span, notes=(nesting.NOTE,), help=nesting.HELP
            )
        )

    def expected(self, furthest: _Furthest, start: int) -> int:
        """Reports what the grammar expected; returns where to resume."""
        if furthest.too_deep is not None:
            self.too_deep(furthest.too_deep)
            return self.skip_line(start)
        pos = max(furthest.pos, start + 1)
        token = self.tokens[pos]
        # At the end of the file, an unclosed block (E0103) says it better.
        if token.type != EOF or not self.unclosed():
            self.error("E0100", f"expected {furthest.expected}, found {token.describe()}", pos)
        if token.type in _CLOSERS and start <= self.partner[pos] < pos:
            # The bracket closes a group of the member that failed (`b: }` in
            # a record): the member ends there.
            return pos + 1
        return pos

    def error(self, code: str, message: str, index: int, **extra: Any) -> None:
        # A stray character was reported by the lexer (E0001) already.
        if self.tokens[index].type == ERROR:
            return
        self.diagnostics.append(
            Diagnostic.error(code, message, self.builder.token_span(index), **extra)
        )

    def skip_line(self, pos: int) -> int:
        """Skips the token at `pos` and the rest of its line. A bracketed group
        is skipped whole, even across lines; a closing bracket opened before
        the block being read ends the skip (it closes that block)."""
        tokens = self.tokens
        partner = self.partner
        opening = self.blocks[-1] if self.blocks else -1
        first = True
        while True:
            token = tokens[pos]
            kind = token.type
            if kind == EOF or (not first and token.nl_before):
                return pos
            if kind in _CLOSERS and partner[pos] <= opening:
                return pos if not first else pos + 1
            first = False
            if kind in _OPENERS and partner[pos] > pos:
                pos = partner[pos]
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
                continue
            if kind in DECLARATION_KEYWORDS:
                declaration, end = self.declaration(pos)
                if declaration is not None:
                    declarations.append(declaration)
                    pos = end
                    continue
            else:
                self.error(
                    "E0104",
                    f"expected a declaration, found {tokens[pos].describe()}",
                    pos,
                    notes=(DECLARATION_NOTE,),
                )
            # Resynchronise on the next line that starts a declaration.
            pos = self.skip_line(pos)
            while tokens[pos].type != EOF and not (
                tokens[pos].nl_before and tokens[pos].type in DECLARATION_KEYWORDS
            ):
                pos = self.skip_line(pos)
        return declarations

    def declaration(self, pos: int) -> tuple[ast.Declaration | None, int]:
        node, furthest = self.match("declaration", pos)
        kind = self.tokens[pos].type
        if node is not None:
            declaration = self.build(self.builder.declaration, node)
            if not isinstance(declaration, TooDeep):
                return declaration, node.end
            if kind not in _BLOCKS:
                self.too_deep(declaration)
                return None, pos
            # Read it member by member: only the member that is too deep goes.
        elif kind not in _BLOCKS:
            self.expected(furthest, pos)
            return None, pos
        head, furthest = self.match(f"{kind}_head", pos)
        if head is None:
            self.expected(furthest, pos)
            return None, pos
        members, end = self.members(kind, kind, head.end)
        span = self.builder.range_span(pos, end)
        make: dict[str, Callable[[Any, list[Any], Span], ast.Declaration]] = {
            "workflow": self.builder.make_workflow,
            "task": self.builder.make_task,
            "test": self.builder.make_test,
            "verify": self.builder.make_verify,
        }
        return make[kind](head, members, span), end

    # Blocks ---------------------------------------------------------------------

    def members(self, kind: str, context: str, pos: int) -> tuple[list[Any], int]:
        """The members of a block whose `{` is just before `pos`; returns them
        and the position after the closing `}`.

        Any `}` closes the block, even one that recovery left over from a
        member (chapter 26's example depends on that)."""
        block = _BLOCKS[kind]
        tokens = self.tokens
        members: list[Any] = []
        self.blocks.append(pos - 1)
        try:
            while True:
                token = tokens[pos]
                word = token.type
                if word == "}":
                    return members, pos + 1
                if word == EOF:
                    self.unclosed()
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
                    if node is None:
                        pos = self.expected(furthest, pos)
                        continue
                    member = self.build(self.builder.member, node)
                    if isinstance(member, TooDeep):
                        self.too_deep(member)
                        pos = node.end
                        continue
                    members.append(member)
                    pos = node.end
                    if self.cut_short(block, pos, furthest):
                        # The member matched a prefix of what was written,
                        # e.g. `max` of `max(1 2)`: report where it broke.
                        pos = self.expected(furthest, pos - 1)
                    continue
                suggestion = closest(word, block.keywords + block.nested) if token.is_word else None
                self.error(
                    "E0102",
                    f"unexpected {token.describe()} in {context}",
                    pos,
                    help=f"did you mean `{suggestion}`?" if suggestion else None,
                )
                pos = self.skip_line(pos)
        finally:
            self.blocks.pop()

    def cut_short(self, block: _BlockKind, pos: int, furthest: _Furthest) -> bool:
        """Whether a member that matched ends before a token on its own line
        that cannot follow it, while the grammar had got further."""
        token = self.tokens[pos]
        return (
            furthest.pos > pos
            and not token.nl_before
            and token.type not in ("}", EOF, *_SEPARATORS)
            and token.type not in block.keywords
            and token.type not in block.nested
        )

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
            member = self.build(self.builder.member, node)
            if not isinstance(member, TooDeep):
                return member, node.end
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
            member = self.build(self.builder.member, node)
            if not isinstance(member, TooDeep):
                return member, node.end
        head, furthest = self.match(head_rule, pos)
        if head is None:
            return None, self.expected(furthest, pos)
        context = f"`on {kind}` block"
        steps, end = self.members("handler", context, head.end)
        span = self.builder.range_span(pos, end)
        if rule == "on_outcome":
            return self.builder.make_outcome(head, steps, span), end
        return self.builder.make_event(head, steps, span), end

    def unclosed(self) -> bool:
        """E0103, once per file, at the innermost `{` left open at the end of
        the file; False if no block is open."""
        if self.reported_unclosed:
            return True
        partner = self.partner
        braces = [i for i, token in enumerate(self.tokens) if token.type == "{" and partner[i] < 0]
        if braces:
            index = braces[-1]
        elif self.blocks:
            index = self.blocks[-1]
        else:
            return False
        self.reported_unclosed = True
        self.error("E0103", f"unclosed `{{` in {self.context_of(index)}", index)
        return True

    def context_of(self, brace: int) -> str:
        """What the `{` at `brace` opens, as messages name it."""
        words = [self.tokens[i].type for i in range(max(0, brace - 3), brace)]
        for keyword in ("workflow", "task", "test", "schema", "step", "signal"):
            if len(words) >= 2 and words[-2] == keyword:
                return keyword
        if len(words) >= 2 and words[-2] == "on":
            return f"`on {words[-1]}` block"
        if len(words) >= 3 and words[-3:-1] == ["on", "event"]:
            return "`on event` block"
        if words and words[-1] in ("compensate", "retry", "limits", "search", "input", "output"):
            return f"`{words[-1]}` block"
        return "object"


def _pair_brackets(tokens: Sequence[Token]) -> list[int]:
    """For each bracket token, the index of its partner (-1 if it has none);
    for other tokens, -1. A closer pairs with the nearest open bracket of its
    kind; brackets left open in between stay unpaired.

    Linear: besides the stack of open brackets, each kind keeps the stack
    positions of its own openers, so a closer finds its partner without
    scanning openers of the other kinds (a file of `(` followed by as many
    `]` would otherwise take quadratic time)."""
    partner = [-1] * len(tokens)
    stack: list[int] = []
    # Per opener kind, (position in `stack`, token index) of its openers in
    # token order; an entry whose opener has left the stack is stale.
    by_kind: dict[str, list[tuple[int, int]]] = {opener: [] for opener in _OPENERS}
    for index, token in enumerate(tokens):
        kind = token.type
        if kind in _OPENERS:
            by_kind[kind].append((len(stack), index))
            stack.append(index)
        elif kind in _CLOSERS:
            entries = by_kind[_MATCHING_OPENER[kind]]
            while entries:
                depth, opener = entries.pop()
                if depth < len(stack) and stack[depth] == opener:
                    partner[index] = opener
                    partner[opener] = index
                    del stack[depth:]
                    break
    return partner
