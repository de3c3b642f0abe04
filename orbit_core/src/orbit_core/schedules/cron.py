"""Cron expressions: our own validation, cronsim's arithmetic, zoneinfo's zones.

`parse_cron` checks the five fields term by term so that an error names the
offending term and field (cronsim would only say "Bad hour"), and refuses
what the chapter leaves out (seconds, the Quartz `L`, `W`, `#` and `?`)
although cronsim would accept it. The `@hourly`-style shorthands are
expanded here.

`Cron.next_after` walks the expression through cronsim in naive wall-clock
time of the zone and maps each candidate to UTC with `fold=0`:

* a wall time inside a spring-forward gap maps, with the offset in force
  before the change, to the same distance after the change (02:30 to 03:30);
* a wall time that occurs twice maps to its first occurrence, and the naive
  walk meets it only once.

The mapping is monotonic except right after a gap, where the mapped gap
times coincide with or follow the real times after the change; taking the
smaller of the first mapped candidate and the first real one settles it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import attrs
from cronsim import CronSim, CronSimError

_SHORTHANDS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@attrs.frozen(slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_name: int = 0


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, tuple(_MONTHS), 1),
    _Field("day-of-week", 0, 7, tuple(_DAYS), 0),
)
_TERM = re.compile(r"^(?:(\*)|([0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?)(?:/(.*))?$")
_QUARTZ = re.compile(r"^(?:\?|L|LW|\d*[LW]|.*#.*)$", re.IGNORECASE)
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# A walk longer than this many candidates means a broken zone, not a schedule.
_MAX_WALK = 10_000


class CronError(ValueError):
    """An invalid expression; the message locates the problem."""


@attrs.frozen(slots=True)
class Cron:
    """A validated five-field expression (`text` as written, `fields` expanded)."""

    text: str
    fields: str

    def next_after(self, after_ms: int, zone: ZoneInfo | None) -> int | None:
        """The first occurrence strictly after `after_ms`, in epoch ms, or None."""
        if zone is None:
            start = datetime.fromtimestamp(after_ms // 1000, UTC).replace(tzinfo=None)
            try:
                found = next(CronSim(self.fields, start))
            except (StopIteration, CronSimError):
                return None
            return _utc_ms(found)
        return _next_in_zone(self.fields, after_ms, zone)

    def upcoming(self, after_ms: int, zone: ZoneInfo | None, count: int) -> list[int]:
        out: list[int] = []
        at: int | None = after_ms
        while at is not None and len(out) < count:
            at = self.next_after(at, zone)
            if at is not None:
                out.append(at)
        return out


def parse_cron(text: str) -> Cron:
    """A validated expression, or CronError naming the problem."""
    stripped = text.strip()
    if stripped.startswith("@"):
        expanded = _SHORTHANDS.get(stripped.lower())
        if expanded is None:
            names = ", ".join(_SHORTHANDS)
            raise CronError(f"unknown shorthand `{stripped}` (expected one of {names})")
        return Cron(text, expanded)
    parts = stripped.split()
    if len(parts) != 5:
        raise CronError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), found {len(parts)}"
        )
    values = [_check_field(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    days, months = values[2], values[3]
    day_and = parts[2].startswith("*") or parts[4].startswith("*")
    if day_and and all(min(days) > _DAYS_IN_MONTH[m - 1] for m in months):
        raise CronError("the expression never matches: no month it names has that day")
    fields = " ".join(parts).upper()
    try:
        CronSim(fields, datetime(2000, 1, 1))
    except CronSimError as exc:  # our checks should have caught it first
        raise CronError(str(exc)) from None
    return Cron(text, fields)


def _check_field(part: str, spec: _Field) -> set[int]:
    values: set[int] = set()
    for term in part.split(","):
        values |= _check_term(term, spec)
    return values


def _check_term(term: str, spec: _Field) -> set[int]:
    where = f"the {spec.name} field"
    if _QUARTZ.match(term):
        raise CronError(
            f"`{term}` in {where}: the Quartz extensions (L, W, #, ?) are not supported"
        )
    match = _TERM.match(term)
    if match is None or not term:
        raise CronError(f"`{term}` is not a valid term for {where} ({_syntax(spec)})")
    star, first, last, step_text = match.groups()
    if star:
        low, high = spec.low, spec.high
    else:
        low = _value(first, spec)
        high = _value(last, spec) if last is not None else (spec.high if step_text else low)
        if last is not None and high < low:
            raise CronError(f"`{term}`: the range of {where} ends before it starts")
    step = 1
    if step_text is not None:
        if not step_text.isdigit() or int(step_text) == 0:
            raise CronError(f"`{term}`: the step of {where} must be a whole number of at least 1")
        step = int(step_text)
    return {v % 7 if spec.name == "day-of-week" else v for v in range(low, high + 1, step)}


def _value(text: str, spec: _Field) -> int:
    if text.isdigit():
        value = int(text)
        if not spec.low <= value <= spec.high:
            raise CronError(
                f"`{text}` is out of range for the {spec.name} field ({spec.low}-{spec.high})"
            )
        return value
    upper = text.upper()
    if upper in spec.names:
        return spec.names.index(upper) + spec.first_name
    if spec.names:
        raise CronError(
            f"`{text}` is not a value of the {spec.name} field "
            f"({spec.low}-{spec.high} or {spec.names[0]}-{spec.names[-1]})"
        )
    raise CronError(f"`{text}` is not a number for the {spec.name} field ({spec.low}-{spec.high})")


def _syntax(spec: _Field) -> str:
    return f"*, a value {spec.low}-{spec.high}, a range a-b, a step */n, a-b/n or a/n, or a list"


def _utc_ms(naive_utc: datetime) -> int:
    delta = naive_utc - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1000


def _to_utc_ms(wall: datetime, zone: ZoneInfo) -> int:
    aware = wall.replace(tzinfo=zone, fold=0)
    offset = aware.utcoffset()
    assert offset is not None
    return _utc_ms(wall - offset)


def _exists(wall: datetime, zone: ZoneInfo) -> bool:
    aware = wall.replace(tzinfo=zone, fold=0)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall


def _next_in_zone(fields: str, after_ms: int, zone: ZoneInfo) -> int | None:
    after = datetime.fromtimestamp(after_ms // 1000, UTC)
    # The earliest wall time whose mapping can land after `after`: with the
    # smaller of the offsets in force now and a few hours ago (a gap's wall
    # times map with the earlier offset).
    offsets = [
        moment.astimezone(zone).utcoffset() or timedelta(0)
        for moment in (after, after - timedelta(hours=3))
    ]
    start = after.replace(tzinfo=None) + min(offsets) - timedelta(seconds=1)
    best: int | None = None
    try:
        walk = CronSim(fields, start)
        for _ in range(_MAX_WALK):
            wall = next(walk)
            at = _to_utc_ms(wall, zone)
            if at <= after_ms:
                continue
            if _exists(wall, zone):
                return at if best is None else min(best, at)
            if best is None:
                best = at
    except (StopIteration, CronSimError):
        pass
    return best
