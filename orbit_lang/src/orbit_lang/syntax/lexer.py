"""The token layer under the grammar.

One regular expression recognises every token; strings, nested block
comments and numbers get small hand-written scanners because their errors
(E0001-E0006) need precise spans. The lexer never stops at an error: it
reports the problem and hands the parser a usable token (a string is cut at
the end of its line, an unknown duration unit still yields a duration), so
one run reports every problem in a file.

Comments are not tokens; a character that starts no token becomes an
`<error>` token after its E0001. Each token records whether a line break (or a block
comment spanning lines) precedes it, which is all the line rule needs.
"""

from __future__ import annotations

import math
import re
import sys
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any

import attrs

from orbit_lang.diagnostics import Diagnostic
from orbit_lang.source import SourceFile

INT_MAX = 2**63 - 1
_INT_MAX_DIGITS = len(str(INT_MAX))
# Exact for every in-range duration: 19 digits times an 8-digit factor.
_DURATION_CONTEXT = Context(prec=40)

# Token types that are not spelled by their own text.
INT = "<int>"
FLOAT = "<float>"
DURATION = "<duration>"
STRING = "<string>"
EOF = "<eof>"
# A character that starts no token (E0001). The parser still sees it, so that
# recovery skips the rest of its line, but never reports it a second time.
ERROR = "<error>"

RESERVED = frozenset({"true", "false", "null"})

DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\f\v\ufeff]+)
    |(?P<newline>\n)
    |(?P<comment>//[^\n]*)
    |(?P<block>/\*)
    |(?P<number>[0-9][0-9_]*(?:\.[0-9][0-9_]*)?)(?P<unit>[A-Za-z_][A-Za-z0-9_]*)?
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<string>")
    |(?P<punct>==|!=|<=|>=|&&|\|\||=>|[{}()\[\]<>,:;.?=!+\-*/%])
    """,
    re.VERBOSE,
)
_BLOCK_DELIMITER = re.compile(r"/\*|\*/|\n")
_STRING_PART = re.compile(r'[^"\\\n]+')
_UNICODE_ESCAPE = re.compile(r"\{([0-9A-Fa-f]+)\}")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


# Mutable and slotted: tokens are built in the hot loop and never shared
# outside the parser, so the cost of `frozen` buys nothing here.
@attrs.define(slots=True)
class Token:
    type: str
    text: str
    start: int
    end: int
    line: int
    column: int
    nl_before: bool
    # The decoded literal: int, float, milliseconds or str.
    value: Any = None

    @property
    def end_column(self) -> int:
        return self.column + (self.end - self.start)

    @property
    def is_word(self) -> bool:
        return self.type == self.text and (self.text[:1].isalpha() or self.text[:1] == "_")

    def describe(self) -> str:
        """How messages name this token: `}`, `step`, `"text"`, or end of file."""
        if self.type == EOF:
            return "end of file"
        return f"`{self.text}`"


@attrs.frozen
class LexResult:
    tokens: list[Token]
    diagnostics: list[Diagnostic]
    # 1-based line -> text of a `///` doc comment that is alone on its line.
    doc_lines: dict[int, str]


def tokenize(source: SourceFile) -> LexResult:
    return _Lexer(source).run()


class _Lexer:
    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.text = source.text
        self.tokens: list[Token] = []
        self.diagnostics: list[Diagnostic] = []
        self.doc_lines: dict[int, str] = {}
        self.line = 1
        self.line_start = 0
        self.nl_before = True
        self.line_has_token = False

    def run(self) -> LexResult:
        text = self.text
        size = len(text)
        pos = 0
        match = _TOKEN.match
        while pos < size:
            m = match(text, pos)
            if m is None:
                pos = self._bad_character(pos)
                continue
            kind = m.lastgroup
            end = m.end()
            if kind == "space":
                pass
            elif kind == "newline":
                self._newline(end)
            elif kind == "comment":
                self._line_comment(pos, end)
            elif kind == "block":
                end = self._block_comment(pos)
            elif kind == "word":
                word = m.group()
                self._emit(word, word, pos, end)
            elif kind == "punct":
                punct = m.group()
                self._emit(punct, punct, pos, end)
            elif kind == "string":
                end = self._string(pos)
            else:
                self._number(m, pos, end)
            pos = end
        self.tokens.append(Token(EOF, "", size, size, self.line, size - self.line_start + 1, True))
        return LexResult(self.tokens, self.diagnostics, self.doc_lines)

    def _newline(self, end: int) -> None:
        self.line += 1
        self.line_start = end
        self.nl_before = True
        self.line_has_token = False

    def _emit(self, type_: str, text: str, start: int, end: int, value: Any = None) -> None:
        self.tokens.append(
            Token(
                type_,
                text,
                start,
                end,
                self.line,
                start - self.line_start + 1,
                self.nl_before,
                value,
            )
        )
        self.nl_before = False
        self.line_has_token = True

    def _error(
        self, code: str, message: str, start: int, end: int, help: str | None = None
    ) -> None:
        self.diagnostics.append(
            Diagnostic.error(code, message, self.source.span(start, end), help=help)
        )

    def _bad_character(self, pos: int) -> int:
        char = self.text[pos]
        self._error("E0001", f"unexpected character `{char}`", pos, pos + 1)
        self._emit(ERROR, char, pos, pos + 1)
        return pos + 1

    def _line_comment(self, start: int, end: int) -> None:
        body = self.text[start:end]
        if body.startswith("///") and not body.startswith("////") and not self.line_has_token:
            doc = body[3:].rstrip("\r")
            self.doc_lines[self.line] = doc[1:] if doc.startswith(" ") else doc

    def _block_comment(self, start: int) -> int:
        depth = 0
        pos = start
        text = self.text
        while True:
            m = _BLOCK_DELIMITER.search(text, pos)
            if m is None:
                self._error("E0003", "unterminated block comment", start, start + 2)
                return len(text)
            token = m.group()
            pos = m.end()
            if token == "\n":
                # A comment spanning lines separates what is around it.
                self._newline(pos)
            elif token == "/*":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return pos

    def _string(self, start: int) -> int:
        text = self.text
        size = len(text)
        pos = start + 1
        parts: list[str] = []
        while True:
            m = _STRING_PART.match(text, pos)
            if m is not None:
                parts.append(m.group())
                pos = m.end()
            if pos >= size or text[pos] == "\n":
                end = pos - 1 if pos > start + 1 and text[pos - 1] == "\r" else pos
                self._error("E0002", "unterminated string literal", start, end)
                self._emit(STRING, text[start:end], start, end, "".join(parts))
                return end
            char = text[pos]
            if char == '"':
                end = pos + 1
                self._emit(STRING, text[start:end], start, end, "".join(parts))
                return end
            pos = self._escape(pos, parts)

    def _escape(self, pos: int, parts: list[str]) -> int:
        """Decodes the escape at `pos` (a backslash) and returns where it ends."""
        text = self.text
        letter = text[pos + 1 : pos + 2]
        if letter in _SIMPLE_ESCAPES:
            parts.append(_SIMPLE_ESCAPES[letter])
            return pos + 2
        if letter == "u":
            m = _UNICODE_ESCAPE.match(text, pos + 2)
            if m is not None:
                code = int(m.group(1), 16)
                if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
                    parts.append(chr(code))
                    return m.end()
                end = m.end()
            else:
                end = pos + 2
            self._error("E0004", f"invalid unicode escape `{text[pos:end]}`", pos, end)
            return end
        if letter in ("", "\n", "\r"):
            # The backslash ends the line; the string is unterminated.
            return pos + 1
        self._error("E0004", f"unknown escape sequence `\\{letter}`", pos, pos + 2)
        return pos + 2

    def _number(self, m: re.Match[str], start: int, end: int) -> None:
        digits = m.group("number")
        unit = m.group("unit")
        plain = digits.replace("_", "")
        if unit is None:
            if "." in plain:
                self._float(digits, plain, start, end)
            else:
                self._int(digits, plain, start, end)
            return
        factor = DURATION_UNITS_MS.get(unit)
        if factor is None:
            self._error(
                "E0005",
                f"unknown duration unit `{unit}`",
                start,
                end,
                help="the units are `ms`, `s`, `m`, `h` and `d`",
            )
            self._emit(DURATION, m.group(), start, end, 0)
            return
        whole = plain.partition(".")[0].lstrip("0")
        # Every unit is at least a millisecond, so a whole part that is
        # longer than INT_MAX is out of range before any arithmetic.
        ms = INT_MAX + 1
        if len(whole) <= _INT_MAX_DIGITS:
            with localcontext(_DURATION_CONTEXT):
                ms = int((Decimal(plain) * factor).to_integral_value(rounding=ROUND_HALF_UP))
        if ms > INT_MAX:
            self._error("E0006", "duration literal out of range", start, end)
            ms = INT_MAX
        self._emit(DURATION, m.group(), start, end, ms)

    def _int(self, digits: str, plain: str, start: int, end: int) -> None:
        # Decide the range on the digit count first: `int()` of a very long
        # string is slow, and refuses more than 4,300 digits outright.
        significant = plain.lstrip("0")
        value = int(significant) if 0 < len(significant) <= _INT_MAX_DIGITS else 0
        if len(significant) > _INT_MAX_DIGITS or value > INT_MAX:
            self._error(
                "E0006",
                "integer literal out of range",
                start,
                end,
                help="use a smaller value, or a `Float`",
            )
            value = INT_MAX
        self._emit(INT, digits, start, end, value)

    def _float(self, digits: str, plain: str, start: int, end: int) -> None:
        value = float(plain)
        if math.isinf(value):
            # IR numbers are finite JSON numbers; the same code as integers.
            self._error("E0006", "float literal out of range", start, end)
            value = sys.float_info.max
        self._emit(FLOAT, digits, start, end, value)
