"""Durations and RFC 3339 times as schedules write them.

A duration is whole numbers with units, largest first, each unit at most
once (`15m`, `1h30m`, `500ms`). Times are parsed with an explicit offset and
always printed in UTC: occurrences without milliseconds when they have none
(`2026-11-15T18:51:10Z`), record times always with them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNITS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
_ORDER = ("d", "h", "m", "s", "ms")
_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
_EPOCH = datetime(1970, 1, 1)
DURATION_HINT = "whole numbers with the units ms, s, m, h and d, such as 30s, 15m or 1h30m"


class TimeFormatError(ValueError):
    """A duration or time that does not parse; the message says why."""


def parse_duration(text: str) -> int:
    """Milliseconds of a duration such as `1h30m`."""
    if text.startswith("-"):
        raise TimeFormatError("must not be negative")
    pos = 0
    total = 0
    last = -1
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        unit = match[2]
        rank = _ORDER.index(unit)
        if rank <= last:
            raise TimeFormatError(f"the units must come largest first, each once ({DURATION_HINT})")
        last = rank
        total += int(match[1]) * _UNITS[unit]
        pos = match.end()
    if pos != len(text) or not text:
        raise TimeFormatError(f"expected {DURATION_HINT}")
    return total


def format_duration(ms: int) -> str:
    """The shortest spelling of a duration (`90m` prints as `1h30m`)."""
    if ms == 0:
        return "0s"
    parts = []
    for unit in _ORDER:
        size = _UNITS[unit]
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    return "".join(parts)


def parse_time(text: str) -> int:
    """Epoch milliseconds of an RFC 3339 time, which must carry an offset."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise TimeFormatError("expected an RFC 3339 time such as 2026-11-15T18:00:00Z") from None
    if parsed.tzinfo is None or "T" not in text.upper():
        raise TimeFormatError(
            "expected an RFC 3339 time with a UTC offset, such as 2026-11-15T18:00:00Z"
        )
    return _exact_ms(parsed)


def _exact_ms(parsed: datetime) -> int:
    delta = parsed - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_time(ms: int, *, millis: bool = False) -> str:
    """UTC RFC 3339; milliseconds when asked for or when not zero."""
    seconds, rest = divmod(ms, 1000)
    # isoformat of a naive time is several times faster than strftime.
    text = (_EPOCH + timedelta(seconds=seconds)).isoformat()
    if millis or rest:
        text += f".{rest:03d}"
    return text + "Z"
