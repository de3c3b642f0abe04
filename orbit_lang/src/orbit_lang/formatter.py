"""`orbit fmt`: the canonical layout of ORBIT source (chapter 49).

The formatter works on the lexer's tokens, never on the syntax tree, so a
file with syntax or type errors can still be formatted; only a file that
does not lex is refused. It keeps every line break the author wrote (lines
are never joined or split) and every comment, and rewrites only what lies
between tokens: the indentation, the spaces inside a line and the number of
blank lines.

How a line is laid out:

- its indentation is one level per bracket (`{`, `(`, `[`) still open at
  its start, minus the closers it starts with, plus one level when it
  continues an expression (it starts with a binary operator other than `-`,
  or with `then`/`else`, or the line before ended with a binary operator);
- the space between two neighbouring tokens is decided by `_spaced` from the
  two tokens and a little context (a unary minus, the `<`/`>` of a generic
  type, a call's `(` or an index's `[`, the `:` of an `expect step` path);
- comments are copied (a line comment loses only trailing whitespace), one
  space apart from the code; block comments that span lines are verbatim.

Safety: the output is lexed again and must give the same token sequence
(type, text and whether a line break precedes each token, which is all the
parser sees besides doc comments), the same doc comment attached to each
token and the same comments (both up to trailing whitespace, which is
removed from every line). The parser is a function of exactly those, so
the output parses to the same syntax tree (only spans move, and doc texts
lose trailing blanks) and lowers to the same IR and definition hash. Anything else raises `FormatError` and the
caller must leave the file alone.
"""

from __future__ import annotations

import attrs

from orbit_lang.source import SourceFile
from orbit_lang.syntax.lexer import DURATION, EOF, FLOAT, INT, STRING, Token, tokenize

# The grammar's binary operators (orbit_lang.syntax.grammar, which a test
# compares with this copy): importing the grammar would build the parser,
# which formatting never needs.
BINARY_OPERATORS = frozenset(
    {"||", "&&", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"}
)
_OPENERS = frozenset("{([")
_CLOSERS = frozenset("})]")
# Words after which an expression starts: a `(` or `[` after them opens a
# group or a list, not a call or an index.
_EXPRESSION_KEYWORDS = frozenset(
    {
        "if",
        "then",
        "else",
        "return",
        "with",
        "when",
        "compute",
        "in",
        "returns",
        "output",
        "max_parallel",
        "idempotency_key",
        "priority",
    }
)
_LITERALS = frozenset({STRING, INT, FLOAT, DURATION})
_NUMBERS = frozenset({INT, FLOAT, DURATION})
_TIGHT_BEFORE = frozenset({",", ";", ":", ".", "?"})
# Two characters that would lex as something else if their tokens touched.
_JOINS = frozenset({"!=", "==", "<=", ">=", "=>", "//", "/*", "&&", "||", "*/"})
# Roles of tokens whose spacing depends on context.
_UNARY = 1
_GENERIC = 2
_PATH_COLON = 3


class FormatError(Exception):
    """Why a file was not formatted: lexical errors, or a failed safety check."""


@attrs.frozen
class Formatted:
    text: str
    changed: bool


def format_source(text: str, path: str = "<input>") -> Formatted:
    """The canonical layout of `text`; raises FormatError when the file has
    lexical errors or the result would not lex to the same program."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom) :]
    lexed = tokenize(SourceFile(path, body))
    if lexed.diagnostics:
        first = lexed.diagnostics[0]
        raise FormatError(f"cannot format a file with lexical errors: {first.message}")
    newline = "\r\n" if "\r\n" in body[: body.find("\n") + 1 or len(body)] else "\n"
    out = _Layout(body, lexed.tokens, newline).run()
    result = bom + out
    if result == text:
        return Formatted(text, changed=False)
    _check_safe(body, lexed.tokens, lexed.doc_lines, out, path)
    return Formatted(result, changed=True)


class _Layout:
    def __init__(self, text: str, tokens: list[Token], newline: str) -> None:
        self.text = text
        self.tokens = tokens
        self.newline = newline
        self.lines: list[str] = []
        # The line being built.
        self.parts: list[str] = []
        self.first: Token | None = None
        self.starts_with_comment = False
        self.leading = True
        self.leading_closers = 0
        self.last: Token | None = None
        self.last_role = 0
        self.after_comment = False
        # Across lines.
        self.depth = 0
        self.line_depth = 0
        self.prev_last: Token | None = None
        self.prev_last_role = 0
        self.prev_opens = False
        self.pending_blank = False
        self.generics: list[int] = []
        self.step_path = False

    def run(self) -> str:
        pos = 0
        prev: Token | None = None
        prev_role = 0
        for token in self.tokens:
            if token.start > pos:
                self._gap(pos, token.start)
            if token.type == EOF:
                break
            role = self._role(token, prev, prev_role)
            self._token(token, role, prev, prev_role)
            prev, prev_role = token, role
            pos = token.end
        self._end_line()
        if not self.lines:
            return ""
        return self.newline.join(self.lines) + self.newline

    # -- the gaps between tokens: whitespace, line breaks and comments ------

    def _gap(self, start: int, end: int) -> None:
        text = self.text
        if text.find("/", start, end) < 0:
            for _ in range(text.count("\n", start, end)):
                self._end_line()
            return
        pos = start
        while pos < end:
            char = text[pos]
            if char == "\n":
                self._end_line()
                pos += 1
            elif char == "/" and text.startswith("//", pos):
                stop = text.find("\n", pos, end)
                stop = end if stop < 0 else stop
                self._comment(text[pos:stop].rstrip())
                pos = stop
            elif char == "/":
                stop = _block_end(text, pos)
                self._comment(self._block(text[pos:stop]))
                pos = stop
            else:
                pos += 1

    def _block(self, comment: str) -> str:
        if "\n" not in comment:
            return comment
        # Verbatim, except that its line breaks follow the file's.
        return self.newline.join(line.removesuffix("\r") for line in comment.split("\n"))

    def _comment(self, comment: str) -> None:
        if not self.parts:
            self.starts_with_comment = True
        self.parts.append(" " + comment if self.parts else comment)
        self.after_comment = True
        self.leading = False

    def _end_line(self) -> None:
        if not self.parts:
            # A blank line: kept (one at most) unless it follows an opening
            # bracket, starts the file or precedes a closing one.
            if self.lines and not self.prev_opens:
                self.pending_blank = True
            return
        first = self.first
        level = self.line_depth
        if first is not None and not self.starts_with_comment:
            level -= self.leading_closers
            if self._continues(first):
                level += 1
            if first.type in _CLOSERS:
                self.pending_blank = False
        if self.pending_blank:
            self.lines.append("")
            self.pending_blank = False
        self.lines.append("    " * max(level, 0) + "".join(self.parts))
        if self.last is not None:
            self.prev_last = self.last
            self.prev_last_role = self.last_role
            self.prev_opens = self.last.type in _OPENERS
        else:
            self.prev_opens = False
        self.parts = []
        self.first = None
        self.starts_with_comment = False
        self.leading = True
        self.leading_closers = 0
        self.last = None
        self.after_comment = False
        self.line_depth = self.depth

    def _continues(self, first: Token) -> bool:
        kind = first.type
        if kind in ("then", "else"):
            return True
        if kind in BINARY_OPERATORS and kind not in ("-", "<", ">"):
            return True
        last = self.prev_last
        return (
            last is not None
            and last.type in BINARY_OPERATORS
            and self.prev_last_role not in (_UNARY, _GENERIC)
        )

    # -- tokens -------------------------------------------------------------

    def _role(self, token: Token, prev: Token | None, prev_role: int) -> int:
        kind = token.type
        if kind == "-":
            if prev is None or token.nl_before or prev_role == _UNARY or not _ends_operand(prev):
                return _UNARY
            return 0
        if kind == "!":
            return _UNARY
        if kind == "<":
            if prev is not None and prev.type in ("List", "Map"):
                self.generics.append(self.depth)
                return _GENERIC
            return 0
        if kind == ">":
            if self.generics and self.generics[-1] == self.depth:
                self.generics.pop()
                return _GENERIC
            return 0
        if kind == ":" and self.step_path:
            return _PATH_COLON
        return 0

    def _token(self, token: Token, role: int, prev: Token | None, prev_role: int) -> None:
        kind = token.type
        parts = self.parts
        if self.first is None:
            self.first = token
        if self.leading:
            if kind in _CLOSERS:
                self.leading_closers += 1
            else:
                self.leading = False
        if not parts:
            parts.append(token.text)
        elif self.after_comment or (prev is not None and _spaced(prev, prev_role, token, role)):
            parts.append(" " + token.text)
        else:
            parts.append(token.text)
        self.after_comment = False
        self.last = token
        self.last_role = role
        if kind in _OPENERS:
            self.depth += 1
        elif kind in _CLOSERS:
            self.depth = max(self.depth - 1, 0)
            while self.generics and self.generics[-1] > self.depth:
                self.generics.pop()
        # `expect step on_failure:summary ...`: the path's colons stay tight.
        if kind == "step" and prev is not None and prev.type == "expect":
            self.step_path = True
        elif self.step_path and kind != ":" and prev is not None and prev.type not in (":", "step"):
            self.step_path = False


def _ends_operand(token: Token) -> bool:
    kind = token.type
    if kind in _LITERALS or kind in (")", "]", "}", "?"):
        return True
    return token.is_word and kind not in _EXPRESSION_KEYWORDS


def _spaced(a: Token, a_role: int, b: Token, b_role: int) -> bool:
    """Whether one space separates the neighbours `a` and `b` on a line."""
    at, bt = a.type, b.type
    if bt in _TIGHT_BEFORE or b_role == _PATH_COLON:
        return bt == ":" and a_role == _PATH_COLON
    if at == "{":
        return bt != "}"
    if bt == "}":
        return True
    if bt in ("(", "[") and at not in ("(", "[") and a_role != _UNARY:
        # A call or an index follows its operand; a group or a list is spaced.
        tight = _ends_operand(a) and at not in ("}", "?")
    else:
        tight = (
            at in ("(", "[", ".")
            or bt in (")", "]")
            or a_role in (_UNARY, _PATH_COLON)
            or b_role == _GENERIC
            or (at == "<" and a_role == _GENERIC)
        )
        if not tight:
            return True
    # Neighbours written together must not become one token.
    return not tight or _would_join(a, b)


def _would_join(a: Token, b: Token) -> bool:
    if a.text[-1:] + b.text[:1] in _JOINS:
        return True
    # `1 . 5` must not become the float `1.5`, nor `x . 5` a member `.5`.
    return (a.type in _NUMBERS and b.type == ".") or (a.type == "." and b.type in _NUMBERS)


def _block_end(text: str, start: int) -> int:
    """The end of the (nested) block comment at `start`; the lexer has
    already checked that it is terminated."""
    depth = 0
    pos = start
    while True:
        opening = text.find("/*", pos)
        closing = text.find("*/", pos)
        if closing < 0:
            return len(text)
        if 0 <= opening < closing:
            depth += 1
            pos = opening + 2
        else:
            depth -= 1
            pos = closing + 2
            if depth == 0:
                return pos


def comments(text: str, tokens: list[Token]) -> list[str]:
    """Every comment of a lexed file, in order, as the formatter compares them."""
    found: list[str] = []
    pos = 0
    for token in tokens:
        end = token.start
        while True:
            slash = text.find("/", pos, end)
            if slash < 0:
                break
            if text.startswith("//", slash):
                stop = text.find("\n", slash, end)
                stop = end if stop < 0 else stop
                found.append(text[slash:stop].rstrip())
            else:
                stop = _block_end(text, slash)
                found.append(text[slash:stop].replace("\r\n", "\n"))
            pos = stop
        pos = token.end
    return found


def _docs(tokens: list[Token], doc_lines: dict[int, str]) -> list[tuple[int, str]]:
    """The doc comment the parser would attach to each token (by token index),
    without trailing whitespace, which the formatter removes from every line."""
    attached: list[tuple[int, str]] = []
    if not doc_lines:
        return attached
    for index, token in enumerate(tokens):
        if token.nl_before and token.line - 1 in doc_lines and token.type != EOF:
            lines: list[str] = []
            line = token.line - 1
            while line in doc_lines:
                lines.append(doc_lines[line].rstrip())
                line -= 1
            attached.append((index, "\n".join(reversed(lines))))
    return attached


def _check_safe(
    before: str, tokens: list[Token], doc_lines: dict[int, str], after: str, path: str
) -> None:
    relexed = tokenize(SourceFile(path, after))
    if relexed.diagnostics:
        raise FormatError(_unsafe(f"the output does not lex: {relexed.diagnostics[0].message}"))
    new = relexed.tokens
    if len(new) != len(tokens):
        raise FormatError(_unsafe("the output has a different number of tokens"))
    for old_token, new_token in zip(tokens, new, strict=True):
        if old_token.type != new_token.type or old_token.text != new_token.text:
            raise FormatError(
                _unsafe(
                    f"token `{old_token.text}` at line {old_token.line} became `{new_token.text}`"
                )
            )
        if old_token.nl_before != new_token.nl_before:
            raise FormatError(
                _unsafe(f"a line break around line {old_token.line} was added or removed")
            )
    if _docs(tokens, doc_lines) != _docs(new, relexed.doc_lines):
        raise FormatError(_unsafe("a doc comment moved"))
    if comments(before, tokens) != comments(after, new):
        raise FormatError(_unsafe("a comment changed"))


def _unsafe(detail: str) -> str:
    return f"formatter safety check failed ({detail}); the file was left unchanged"
