"""Schedule timing (chapter 41): every cron example of the chapter with its
next fire times, daylight-saving gaps and repeats in Europe/Berlin and
America/New_York, intervals, start_at/end_at, jitter, durations, and the
INVALID_SCHEDULE errors of bad settings."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbit_core.errors import InvalidError
from orbit_core.schedules import policy
from orbit_core.schedules.cron import CronError, parse_cron
from orbit_core.schedules.jitter import jitter_ms
from orbit_core.schedules.spec import (
    ScheduleSpec,
    compile_spec,
    load_zone,
    parse_create,
    parse_patch,
)
from orbit_core.schedules.times import format_duration, format_time, parse_duration, parse_time

NOW = "2026-11-15T18:51:00.347Z"  # a Sunday


def upcoming(cron: str, after: str = NOW, zone: str | None = None, count: int = 5) -> list[str]:
    z = load_zone(zone) if zone else None
    return [format_time(t) for t in parse_cron(cron).upcoming(parse_time(after), z, count)]


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        (
            "0 2 * * *",
            ["2026-11-16T02:00:00Z", "2026-11-17T02:00:00Z", "2026-11-18T02:00:00Z"],
        ),
        (
            "*/15 * * * *",
            ["2026-11-15T19:00:00Z", "2026-11-15T19:15:00Z", "2026-11-15T19:30:00Z"],
        ),
        (
            "30 9 * * MON-FRI",
            [
                "2026-11-16T09:30:00Z",
                "2026-11-17T09:30:00Z",
                "2026-11-18T09:30:00Z",
                "2026-11-19T09:30:00Z",
                "2026-11-20T09:30:00Z",
                "2026-11-23T09:30:00Z",
            ],
        ),
        (
            "0 0 1 JAN,JUL *",
            ["2027-01-01T00:00:00Z", "2027-07-01T00:00:00Z", "2028-01-01T00:00:00Z"],
        ),
        (
            "5/20 * * * *",
            [
                "2026-11-15T19:05:00Z",
                "2026-11-15T19:25:00Z",
                "2026-11-15T19:45:00Z",
                "2026-11-15T20:05:00Z",
            ],
        ),
        ("0 0 29 2 *", ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
        # Day of month OR day of week: the 13th and every Friday.
        (
            "0 0 13 * 5",
            [
                "2026-11-20T00:00:00Z",
                "2026-11-27T00:00:00Z",
                "2026-12-04T00:00:00Z",
                "2026-12-11T00:00:00Z",
                "2026-12-13T00:00:00Z",
                "2026-12-18T00:00:00Z",
            ],
        ),
        ("@hourly", ["2026-11-15T19:00:00Z", "2026-11-15T20:00:00Z"]),
        ("@daily", ["2026-11-16T00:00:00Z", "2026-11-17T00:00:00Z"]),
        ("@midnight", ["2026-11-16T00:00:00Z"]),
        ("@weekly", ["2026-11-22T00:00:00Z", "2026-11-29T00:00:00Z"]),
        ("@monthly", ["2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"]),
        ("@yearly", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
        ("@annually", ["2027-01-01T00:00:00Z"]),
        # 0 and 7 are Sunday; names are case-insensitive; lists of ranges and steps.
        ("0 12 * * 7", ["2026-11-22T12:00:00Z", "2026-11-29T12:00:00Z"]),
        ("0 12 * * sun", ["2026-11-22T12:00:00Z"]),
        (
            "0 8-10/2,23 16 nov *",
            [
                "2026-11-16T08:00:00Z",
                "2026-11-16T10:00:00Z",
                "2026-11-16T23:00:00Z",
                "2027-11-16T08:00:00Z",
            ],
        ),
    ],
)
def test_cron_examples(cron: str, expected: list[str]) -> None:
    assert upcoming(cron, count=len(expected)) == expected


def test_the_nightly_schedule_of_the_chapter_in_berlin() -> None:
    assert upcoming("0 2 * * *", zone="Europe/Berlin") == [
        "2026-11-16T01:00:00Z",
        "2026-11-17T01:00:00Z",
        "2026-11-18T01:00:00Z",
        "2026-11-19T01:00:00Z",
        "2026-11-20T01:00:00Z",
    ]
    # In summer, 02:00 in Berlin is 00:00Z.
    assert upcoming("0 2 * * *", "2026-07-01T12:00:00Z", "Europe/Berlin", 1) == [
        "2026-07-02T00:00:00Z"
    ]


@pytest.mark.parametrize(
    ("zone", "cron", "after", "expected"),
    [
        # Spring forward: 02:30 does not exist that night and fires at 03:30.
        (
            "Europe/Berlin",
            "30 2 * * *",
            "2026-03-27T12:00:00Z",
            ["2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"],
        ),
        (
            "America/New_York",
            "30 2 * * *",
            "2026-03-06T12:00:00Z",
            ["2026-03-07T07:30:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"],
        ),
        # Fall back: 02:30 (Berlin), 01:30 (New York) occur twice; the first counts.
        (
            "Europe/Berlin",
            "30 2 * * *",
            "2026-10-23T12:00:00Z",
            ["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            "2026-10-30T12:00:00Z",
            ["2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        ),
        # Every half hour through the gap: each instant once, none twice.
        (
            "Europe/Berlin",
            "*/30 * * * *",
            "2026-03-28T23:45:00Z",
            [
                "2026-03-29T00:00:00Z",
                "2026-03-29T00:30:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T01:30:00Z",
                "2026-03-29T02:00:00Z",
            ],
        ),
        # ... and through the repeated hour: its second pass starts nothing.
        (
            "Europe/Berlin",
            "*/30 * * * *",
            "2026-10-24T23:45:00Z",
            [
                "2026-10-25T00:00:00Z",
                "2026-10-25T00:30:00Z",
                "2026-10-25T02:00:00Z",
                "2026-10-25T02:30:00Z",
            ],
        ),
        (
            "America/New_York",
            "0 * * * *",
            "2026-11-01T04:30:00Z",
            ["2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"],
        ),
        (
            "America/New_York",
            "0 * * * *",
            "2026-03-08T05:30:00Z",
            ["2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"],
        ),
    ],
)
def test_daylight_saving_gaps_and_repeats(
    zone: str, cron: str, after: str, expected: list[str]
) -> None:
    assert upcoming(cron, after, zone, len(expected)) == expected


def test_occurrences_are_strictly_increasing_through_a_year_of_changes() -> None:
    for zone in ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe"):
        times = parse_cron("*/20 0-4 * * *").upcoming(
            parse_time("2026-01-01T00:00:00Z"), load_zone(zone), 365 * 15
        )
        assert all(a < b for a, b in itertools.pairwise(times)), zone


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 25 * * *", "`25` is out of range for the hour field (0-23)"),
        ("60 * * * *", "`60` is out of range for the minute field (0-59)"),
        ("0 0 0 * *", "`0` is out of range for the day-of-month field (1-31)"),
        ("0 0 * 13 *", "`13` is out of range for the month field (1-12)"),
        ("0 0 * * 8", "`8` is out of range for the day-of-week field (0-7)"),
        ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week), found 4"),
        ("0 * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week), found 6"),
        ("0 0 L * *", "`L` in the day-of-month field: the Quartz extensions"),
        ("0 0 15W * *", "`15W` in the day-of-month field: the Quartz extensions"),
        ("0 0 ? * *", "`?` in the day-of-month field: the Quartz extensions"),
        ("0 0 * * 5#2", "`5#2` in the day-of-week field: the Quartz extensions"),
        ("0 0 * * 5L", "`5L` in the day-of-week field: the Quartz extensions"),
        ("5-2 * * * *", "`5-2`: the range of the minute field ends before it starts"),
        ("*/0 * * * *", "`*/0`: the step of the minute field must be a whole number"),
        ("0 0 * FOO *", "`FOO` is not a value of the month field (1-12 or JAN-DEC)"),
        ("x * * * *", "`x` is not a number for the minute field (0-59)"),
        ("0 0 30 2 *", "the expression never matches"),
        ("@every", "unknown shorthand `@every`"),
        ("", "expected 5 fields"),
    ],
)
def test_invalid_cron_expressions_are_located(cron: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(cron)
    assert str(caught.value).startswith(message)


def spec(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec(**{"schedule_id": "s", "workflow": "Wf", **fields})


def fires(s: ScheduleSpec, after: str, count: int = 5) -> list[str]:
    compiled = compile_spec(s)
    first = compiled.timing.next_after(parse_time(after))
    return [format_time(t) for t in compiled.timing.upcoming(first, count)]


def test_intervals_align_to_the_epoch() -> None:
    assert fires(spec(interval="15m"), "2026-11-15T18:51:00.347Z", 3) == [
        "2026-11-15T19:00:00Z",
        "2026-11-15T19:15:00Z",
        "2026-11-15T19:30:00Z",
    ]
    assert fires(spec(interval="10s"), NOW, 2) == ["2026-11-15T18:51:10Z", "2026-11-15T18:51:20Z"]
    assert fires(spec(interval="1h30m"), NOW, 2) == [
        "2026-11-15T19:30:00Z",
        "2026-11-15T21:00:00Z",
    ]


def test_intervals_align_to_start_at_whose_time_is_the_first_occurrence() -> None:
    s = spec(interval="1h", start_at="2026-11-16T08:20:00+01:00")
    assert fires(s, NOW, 2) == ["2026-11-16T07:20:00Z", "2026-11-16T08:20:00Z"]
    assert compile_spec(s).spec.start_at == "2026-11-16T07:20:00Z"
    assert fires(s, "2026-11-16T07:20:00Z", 1) == ["2026-11-16T08:20:00Z"]


def test_start_at_and_end_at_bound_the_occurrences() -> None:
    s = spec(cron="0 * * * *", start_at="2026-11-15T21:30:00Z", end_at="2026-11-16T00:00:00Z")
    assert fires(s, NOW, 10) == [
        "2026-11-15T22:00:00Z",
        "2026-11-15T23:00:00Z",
        "2026-11-16T00:00:00Z",
    ]
    assert compile_spec(s).timing.next_after(parse_time("2026-11-16T00:00:00Z")) is None
    ended = spec(interval="1m", end_at="2026-11-15T18:00:00Z")
    assert compile_spec(ended).timing.next_after(parse_time(NOW)) is None


@given(
    st.text(alphabet="abc-_.019", min_size=1, max_size=20),
    st.integers(0, 2**42),
    st.integers(1, 86_400_000),
)
def test_jitter_is_deterministic_and_below_its_bound(sid: str, at: int, bound: int) -> None:
    delay = jitter_ms(sid, at, bound)
    assert 0 <= delay < bound
    assert delay == jitter_ms(sid, at, bound)


def test_jitter_spreads_and_differs_by_schedule_and_occurrence() -> None:
    delays = {jitter_ms("hourly-check", t * 3_600_000, 30_000) for t in range(200)}
    assert len(delays) > 150
    assert jitter_ms("a", 0, 30_000) != jitter_ms("b", 0, 30_000)
    assert jitter_ms("a", 0, None) == 0


def test_the_next_fire_includes_the_jitter_and_the_occurrence_does_not() -> None:
    compiled = compile_spec(spec(interval="1h", jitter="30s"))
    occurrence = compiled.timing.next_after(parse_time(NOW))
    assert occurrence == parse_time("2026-11-15T19:00:00Z")
    fire = policy.fire_time("s", occurrence, compiled.jitter_ms)
    assert occurrence <= fire < occurrence + 30_000


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("30s", 30_000),
        ("15m", 900_000),
        ("1h30m", 5_400_000),
        ("1d", 86_400_000),
        ("1s500ms", 1500),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration(text) == ms
    assert format_duration(ms) == text


def body(**fields: Any) -> dict[str, Any]:
    return {"schedule_id": "s-1", "workflow": "Wf", **fields}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"cron": "0 25 * * *"},
            "cron `0 25 * * *`: `25` is out of range for the hour field (0-23)",
        ),
        ({}, "neither cron nor interval is set: give exactly one"),
        (
            {"cron": "0 * * * *", "interval": "1h"},
            "both cron and interval are set: give exactly one",
        ),
        ({"interval": "-5m"}, "interval `-5m`: must not be negative"),
        ({"interval": "5x"}, "interval `5x`: expected whole numbers with the units"),
        ({"interval": "500ms"}, "interval `500ms` is shorter than the minimum of 1s"),
        ({"interval": "1m", "timezone": "Europe/Berlin"}, "timezone is not allowed with interval"),
        (
            {"cron": "0 2 * * *", "timezone": "Mars/Olympus"},
            "timezone `Mars/Olympus`: unknown time zone",
        ),
        (
            {"cron": "0 2 * * *", "timezone": "../etc/passwd"},
            "timezone `../etc/passwd`: unknown time zone",
        ),
        (
            {
                "interval": "1m",
                "start_at": "2026-11-16T00:00:00Z",
                "end_at": "2026-11-15T00:00:00Z",
            },
            "end_at `2026-11-15T00:00:00Z` is not after start_at `2026-11-16T00:00:00Z`",
        ),
        (
            {"interval": "1m", "start_at": "tomorrow"},
            "start_at `tomorrow`: expected an RFC 3339 time",
        ),
        (
            {"interval": "1m", "end_at": "2026-11-15T00:00:00"},
            "end_at `2026-11-15T00:00:00`: expected an RFC 3339 time with a UTC offset",
        ),
        ({"interval": "1m", "jitter": "25h"}, "jitter `25h` is longer than the maximum of 24h"),
        (
            {"interval": "1m", "overlap": "queue"},
            "overlap `queue`: expected skip, allow or cancel_previous",
        ),
        ({"interval": "1m", "catchup": "all"}, "catchup `all`: expected skip_missed or run_once"),
        ({"interval": "1m", "colour": "red"}, "unknown field `colour`"),
        ({"interval": 60}, "interval must be a string, not a number"),
        ({"interval": "1m", "paused": "yes"}, "paused must be true or false, not a string"),
        ({"interval": "1m", "schedule_id": "a b"}, "schedule_id `a b` must be 1 to 100 letters"),
        ({"interval": "1m", "schedule_id": "x" * 101}, "schedule_id `xxxx"),
        ({"interval": "1m", "schedule_id": None}, "schedule_id is required"),
        ({"interval": "1m", "workflow": None}, "workflow cannot be removed"),
    ],
)
def test_bad_settings_are_invalid_schedule_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidError) as caught:
        parse_create(body(**fields))
    assert caught.value.code == "INVALID_SCHEDULE"
    assert caught.value.message.startswith(message), caught.value.message


def test_a_patch_changes_only_what_it_names() -> None:
    compiled, paused = parse_create(body(interval="10s", description="d"))
    assert paused is False
    changed, paused_now = parse_patch(
        compiled.spec, {"interval": None, "cron": "*/15 * * * *", "overlap": "cancel_previous"}
    )
    assert paused_now is None
    assert changed.spec.to_json() == {
        "schedule_id": "s-1",
        "workflow": "Wf",
        "input": {},
        "cron": "*/15 * * * *",
        "overlap": "cancel_previous",
        "catchup": "skip_missed",
        "description": "d",
    }
    with pytest.raises(InvalidError, match="both cron and interval"):
        parse_patch(compiled.spec, {"cron": "*/15 * * * *"})
    with pytest.raises(InvalidError, match="schedule_id cannot change"):
        parse_patch(compiled.spec, {"schedule_id": "other"})
    _, paused_now = parse_patch(compiled.spec, {"paused": True})
    assert paused_now is True


def test_the_catch_up_policies() -> None:
    timing = compile_spec(spec(interval="10m")).timing
    t = parse_time
    pending = t("2026-11-15T00:00:00Z")
    # Down from before 00:00 to 00:35: four occurrences passed.
    down = t("2026-11-15T00:35:00Z")
    assert policy.catch_up(timing, "s", 0, pending, now=down, catchup="skip_missed") == policy.Due(
        None, 4, t("2026-11-15T00:30:00Z"), t("2026-11-15T00:40:00Z")
    )
    assert policy.catch_up(timing, "s", 0, pending, now=down, catchup="run_once") == policy.Due(
        t("2026-11-15T00:30:00Z"), 3, t("2026-11-15T00:30:00Z"), t("2026-11-15T00:40:00Z")
    )
    # At most a minute late: skip_missed still starts the latest one.
    soon = t("2026-11-15T00:31:00Z")
    assert policy.catch_up(timing, "s", 0, pending, now=soon, catchup="skip_missed").fire == t(
        "2026-11-15T00:30:00Z"
    )
    late = t("2026-11-15T00:31:00.001Z")
    assert policy.catch_up(timing, "s", 0, pending, now=late, catchup="skip_missed").fire is None
    # On time: nothing missed.
    assert policy.catch_up(
        timing, "s", 0, pending, now=pending, catchup="skip_missed"
    ) == policy.Due(pending, 0, pending, t("2026-11-15T00:10:00Z"))


def test_the_overlap_policies() -> None:
    assert policy.overlap("skip", False) == policy.START
    assert policy.overlap("skip", True) == policy.SKIP
    assert policy.overlap("allow", True) == policy.START
    assert policy.overlap("cancel_previous", True) == policy.CANCEL_AND_START
    assert policy.overlap("cancel_previous", False) == policy.START
