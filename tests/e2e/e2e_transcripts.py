"""Comparing CLI output with the book's transcripts.

Ids, hashes, post ids, clock times and durations differ on every run, so both
sides are masked before they are compared. A duration inside a line sits in a
right-aligned column: its mask keeps the column's width, so misaligned output
still fails. Trailing blanks are dropped, as the book's pages lost theirs.
"""

from __future__ import annotations

import re
import textwrap

_UUID = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\.\.\.)")
_HASH = re.compile(r"sha256:[0-9a-f]{12,64}")
_POST = re.compile(r"post-[0-9a-f]{8}")
_CLOCK = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", re.MULTILINE)
_DURATION = r"\d+(?:\.\d+)?(?:ms|s)"
_COLUMN = re.compile(rf"(?<=\S)( +{_DURATION})(?= )")
_TRAILING = re.compile(rf"\b{_DURATION}$", re.MULTILINE)


def _column(match: re.Match[str]) -> str:
    return "<t>".rjust(len(match[1]))


def mask(text: str) -> str:
    text = _UUID.sub("<id>", text)
    text = _HASH.sub("sha256:<hash>", text)
    text = _POST.sub("post-<id>", text)
    text = _CLOCK.sub("", text)
    lines = [_COLUMN.sub(_column, line).rstrip() for line in text.splitlines()]
    return _TRAILING.sub("<t>", "\n".join(lines)).strip("\n")


def book(text: str) -> str:
    """A transcript pasted from the book, indented for the test source."""
    return mask(textwrap.dedent(text))


def same(actual: str, expected: str) -> None:
    """Asserts that `actual` reads like the book's `expected` once masked."""
    assert mask(actual).splitlines() == book(expected).splitlines()
