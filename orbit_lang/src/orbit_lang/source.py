"""Source files and the spans that locate every token, node and diagnostic.

Positions are 1-based lines and columns counted in characters (code points),
exactly as diagnostics print them. An end column is exclusive: a span over
`abc` starting at column 5 ends at column 8, which is the `end_column` the
JSON diagnostics report. `start` and `end` are character offsets into the
file's text (end exclusive).
"""

from __future__ import annotations

import bisect

import attrs


@attrs.frozen
class Span:
    """A half-open region of one source file."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    start: int
    end: int

    def to(self, other: Span) -> Span:
        """The span from the start of `self` to the end of `other`."""
        return Span(
            self.file,
            self.line,
            self.column,
            other.end_line,
            other.end_column,
            self.start,
            other.end,
        )


@attrs.frozen(eq=False)
class SourceFile:
    """The text of one file with a line index for offset to position lookups.

    `path` is the file name as diagnostics print it (as given on the command
    line, or resolved from the importing file's directory).
    """

    path: str
    text: str
    _line_starts: tuple[int, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        starts = [0]
        find = self.text.find
        pos = find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        object.__setattr__(self, "_line_starts", tuple(starts))

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based (line, column) of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def offset(self, line: int, column: int) -> int:
        """The character offset of a 1-based (line, column)."""
        index = max(0, min(line, len(self._line_starts)) - 1)
        return min(self._line_starts[index] + column - 1, len(self.text))

    def span(self, start: int, end: int) -> Span:
        line, column = self.position(start)
        end_line, end_column = self.position(end)
        return Span(self.path, line, column, end_line, end_column, start, end)

    def line_text(self, line: int) -> str:
        """The text of a 1-based line without its line terminator."""
        if line < 1 or line > len(self._line_starts):
            return ""
        start = self._line_starts[line - 1]
        end = self._line_starts[line] - 1 if line < len(self._line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r")
