"""The filter language of `orbit ps --where` and `GET /v1/executions?where=`.

    filter     = or
    or         = and ("or" and)*
    and        = unary ("and" unary)*
    unary      = "not" unary | "(" filter ")" | comparison
    comparison = field op value | field ["not"] "in" "[" value ("," value)* "]"
    op         = "==" | "!=" | "<" | "<=" | ">" | ">="
    value      = string | number | "true" | "false" | word

A field is a declared search field or a built-in one (`status`, `workflow`,
`version`, `started`, `ended`, `waiting_for`, also spelt `waiting-for`).
Strings are written in double quotes with JSON's escapes; a bare word is a
status (`RUNNING`). Timestamps are strings (`"2024-05-01T00:00:00Z"`, or
`"2024-05-01"` for midnight UTC). `and` binds tighter than `or`.

The parser only builds the tree; `orbit_core.visibility.check` types it. It
is meant to be reused by anything that selects executions (batch
operations, migration plans), so it knows nothing of HTTP or SQL. Every
error is a `FilterError` carrying the 1-based column it points at.
"""

from __future__ import annotations

import json
import re
from typing import TypeAlias

import attrs

from orbit_core.errors import InvalidError

MAX_LENGTH = 4096
MAX_DEPTH = 32
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false"})


class FilterError(InvalidError):
    """A filter that cannot be parsed or does not fit the fields it names
    (`INVALID_FILTER`, HTTP 400). `column` is 1-based, None when the whole
    filter is at fault."""

    def __init__(self, message: str, column: int | None = None) -> None:
        where = f" at column {column}" if column is not None else ""
        super().__init__(f"invalid filter{where}: {message}", "INVALID_FILTER")
        self.detail = message
        self.column = column


Value: TypeAlias = str | float | int | bool


@attrs.frozen
class Word:
    """A bare word in value position (a status such as `RUNNING`)."""

    text: str


Literal: TypeAlias = Value | Word


@attrs.frozen
class Compare:
    field: str
    op: str  # one of COMPARISONS, "in" or "not in"
    values: tuple[Literal, ...]
    column: int  # of the field
    value_column: int


@attrs.frozen
class And:
    parts: tuple[Node, ...]


@attrs.frozen
class Or:
    parts: tuple[Node, ...]


@attrs.frozen
class Not:
    part: Node


Node: TypeAlias = Compare | And | Or | Not

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\\x00-\x1f]|\\.)*")
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,)
    """,
    re.VERBOSE,
)


@attrs.frozen
class _Token:
    kind: str  # string, number, word, op, end
    text: str
    column: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            char = text[pos]
            if char == '"':
                raise FilterError("unterminated string", pos + 1)
            hint = " (use `and`, `or`, `not`)" if char in "&|!" else ""
            if char == "=":
                hint = " (equality is `==`)"
            raise FilterError(f"unexpected character `{char}`{hint}", pos + 1)
        kind = m.lastgroup or ""
        if kind != "space":
            out.append(_Token(kind, m.group(), pos + 1))
        pos = m.end()
    out.append(_Token("end", "", len(text) + 1))
    return out


def _describe(token: _Token) -> str:
    return "the end of the filter" if token.kind == "end" else f"`{token.text}`"


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def at_word(self, word: str) -> bool:
        return self.token.kind == "word" and self.token.text == word

    def expect_op(self, op: str, what: str) -> _Token:
        if self.token.kind != "op" or self.token.text != op:
            raise FilterError(f"expected {what}, found {_describe(self.token)}", self.token.column)
        return self.take()

    def parse(self) -> Node:
        node = self.or_()
        if self.token.kind != "end":
            raise FilterError(
                f"expected `and`, `or` or the end of the filter, found {_describe(self.token)}",
                self.token.column,
            )
        return node

    def or_(self) -> Node:
        parts = [self.and_()]
        while self.at_word("or"):
            self.take()
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_(self) -> Node:
        parts = [self.unary()]
        while self.at_word("and"):
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def unary(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(f"nested more than {MAX_DEPTH} levels", self.token.column)
        try:
            if self.at_word("not"):
                self.take()
                return Not(self.unary())
            if self.token.kind == "op" and self.token.text == "(":
                self.take()
                node = self.or_()
                self.expect_op(")", "`)`")
                return node
            return self.comparison()
        finally:
            self.depth -= 1

    def comparison(self) -> Compare:
        token = self.token
        if token.kind != "word" or token.text in KEYWORDS:
            raise FilterError(f"expected a field name, found {_describe(token)}", token.column)
        self.take()
        field = token.text.replace("-", "_")
        op_token = self.token
        if self.at_word("in") or self.at_word("not"):
            negated = self.take().text == "not"
            if negated and not self.at_word("in"):
                raise FilterError(
                    f"expected `in`, found {_describe(self.token)}", self.token.column
                )
            if negated:
                self.take()
            start = self.expect_op("[", "`[`")
            values = [self.value()]
            while self.token.kind == "op" and self.token.text == ",":
                self.take()
                values.append(self.value())
            self.expect_op("]", "`,` or `]`")
            op = "not in" if negated else "in"
            return Compare(field, op, tuple(values), token.column, start.column + 1)
        if op_token.kind != "op" or op_token.text not in COMPARISONS:
            raise FilterError(
                f"expected a comparison (==, !=, <, <=, >, >=) or `in` after `{token.text}`, "
                f"found {_describe(op_token)}",
                op_token.column,
            )
        self.take()
        value_column = self.token.column
        return Compare(field, op_token.text, (self.value(),), token.column, value_column)

    def value(self) -> Literal:
        token = self.take()
        if token.kind == "string":
            try:
                text: str = json.loads(token.text)
            except ValueError:
                raise FilterError("invalid escape in string", token.column) from None
            return text
        if token.kind == "number":
            if re.fullmatch(r"-?\d+", token.text):
                return int(token.text)
            return float(token.text)
        if token.kind == "word" and token.text in ("true", "false"):
            return token.text == "true"
        if token.kind == "word" and token.text not in KEYWORDS:
            return Word(token.text)
        raise FilterError(f"expected a value, found {_describe(token)}", token.column)


def parse_filter(text: str) -> Node:
    """The tree of a filter; raises FilterError with the column at fault."""
    if len(text) > MAX_LENGTH:
        raise FilterError(f"longer than {MAX_LENGTH} characters")
    if not text.strip():
        raise FilterError("the filter is empty")
    return _Parser(text).parse()
