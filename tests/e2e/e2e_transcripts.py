"""Comparing CLI output with the book's transcripts.

Ids, hashes, tokens, post ids, clock times, epoch milliseconds, RFC 3339
times and durations differ on every run, so both sides are masked before they are compared. A duration inside a line sits in a
right-aligned column: its mask keeps the column's width, so misaligned output
still fails. Trailing blanks are dropped, as the book's pages lost theirs; so
is the padding before a duration that ends a line, which may end such a
column.

Steps that run in parallel finish in any order: `any_order` names them, and
each run of consecutive lines about them is compared as a multiset, with the
sequence numbers inside it masked (the lines around it keep theirs).
"""

from __future__ import annotations

import difflib
import re
import textwrap

_UUID = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\.\.\.)")
_HASH = re.compile(r"sha256:[0-9a-f]{12,64}")
_TOKEN = re.compile(r"\b[0-9a-f]{64}\b")
_POST = re.compile(r"\bpost-[0-9a-f]{8}\b")
_EPOCH_MS = re.compile(r"\b1[78]\d{11}\b")
# An RFC 3339 UTC time (schedules): with or without milliseconds, and the
# padding after it, whose width depends on which.
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{3})?Z(?: +(?=\S))?")
_CLOCK = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", re.MULTILINE)
_DURATION = r"(?:\d+(?:\.\d+)?(?:ms|s)|\d+m\d\ds|\d+h\d\dm)"
_COLUMN = re.compile(rf"(?<=\S)( +{_DURATION})(?= )")
_TRAILING = re.compile(rf" +{_DURATION}$", re.MULTILINE)


def _column(match: re.Match[str]) -> str:
    return "<t>".rjust(len(match[1]))


def mask(text: str) -> str:
    text = _UUID.sub("<id>", text)
    text = _HASH.sub("sha256:<hash>", text)
    text = _TOKEN.sub("<token>", text)
    text = _POST.sub("post-<id>", text)
    text = _EPOCH_MS.sub("<ms>", text)
    text = _ISO_TIME.sub(lambda m: "<time> " if m[0].endswith(" ") else "<time>", text)
    text = _CLOCK.sub("", text)
    lines = [_COLUMN.sub(_column, line.rstrip()) for line in text.splitlines()]
    return _TRAILING.sub(" <t>", "\n".join(lines)).strip("\n")


def book(text: str) -> str:
    """A transcript pasted from the book, indented for the test source."""
    return mask(textwrap.dedent(text))


def _settle(lines: list[str], names: tuple[str, ...]) -> list[str]:
    if not names:
        return lines
    about = re.compile(r"(?<![:\w])(?:" + "|".join(map(re.escape, names)) + r")\b")
    settled: list[str] = []
    run: list[str] = []
    for line in [*lines, ""]:
        if line and about.search(line):
            run.append(re.sub(r" *#\d+", " #n", line))
            continue
        settled.extend(sorted(run))
        run = []
        settled.append(line)
    return settled[:-1]


def same(actual: str, expected: str, any_order: tuple[str, ...] = ()) -> None:
    """Asserts that `actual` reads like the book's `expected` once masked."""
    got = _settle(mask(actual).splitlines(), any_order)
    want = _settle(book(expected).splitlines(), any_order)
    diff = difflib.unified_diff(want, got, "book", "actual", lineterm="")
    assert got == want, "\n" + "\n".join(diff)
