"""A schedule's settings: parsed from the API's JSON, validated, and compiled
into its `Timing`.

`ScheduleSpec` holds the settings as the API shows them (times normalised to
UTC, durations as written) and is what the store keeps, as JSON. Every
problem is an `InvalidError` with code INVALID_SCHEDULE whose message names
the field and, for a cron expression, the term. The workflow and the input
are checked by the scheduler, which knows the deployed definitions.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Callable
from zoneinfo import ZoneInfo

import attrs

from orbit_core.errors import InvalidError
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.schedules.cron import CronError, parse_cron
from orbit_core.schedules.times import (
    TimeFormatError,
    format_time,
    parse_duration,
    parse_time,
)
from orbit_core.schedules.timing import Timing

OVERLAP_POLICIES = ("skip", "allow", "cancel_previous")
CATCHUP_POLICIES = ("skip_missed", "run_once")
MIN_INTERVAL_MS = 1000
MAX_JITTER_MS = 24 * 3_600_000
FIELDS = (
    "schedule_id",
    "workflow",
    "version",
    "input",
    "cron",
    "interval",
    "timezone",
    "overlap",
    "catchup",
    "start_at",
    "end_at",
    "jitter",
    "description",
    "paused",
)
_SCHEDULE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_ZONE_NAME = re.compile(r"^[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*$")


def invalid(message: str) -> InvalidError:
    return InvalidError(message, "INVALID_SCHEDULE")


@attrs.frozen(slots=True)
class ScheduleSpec:
    """What to start and when, as the API shows it."""

    schedule_id: str
    workflow: str
    version: str | None = None
    input: JsonValue = attrs.field(factory=dict)
    cron: str | None = None
    interval: str | None = None
    timezone: str | None = None
    overlap: str = "skip"
    catchup: str = "skip_missed"
    start_at: str | None = None
    end_at: str | None = None
    jitter: str | None = None
    description: str | None = None

    def to_json(self) -> JsonObject:
        """The specification fields, in the API's order; unset optional ones absent."""
        out: JsonObject = {"schedule_id": self.schedule_id, "workflow": self.workflow}
        if self.version is not None:
            out["version"] = self.version
        out["input"] = self.input
        for name in ("cron", "interval", "timezone"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out["overlap"] = self.overlap
        out["catchup"] = self.catchup
        for name in ("start_at", "end_at", "jitter", "description"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@attrs.frozen(slots=True)
class Compiled:
    """A validated spec with its timing and jitter bound."""

    spec: ScheduleSpec
    timing: Timing
    jitter_ms: int


def spec_from_json(document: JsonObject) -> ScheduleSpec:
    """A stored spec (already validated when it was stored)."""
    fields = {k: document[k] for k in attrs.fields_dict(ScheduleSpec) if k in document}
    make: Callable[..., ScheduleSpec] = ScheduleSpec  # the fields were checked when stored
    return make(**fields)


def parse_create(body: JsonObject) -> tuple[Compiled, bool]:
    """The schedule of a POST /v1/schedules body, and whether it starts paused."""
    _known_fields(body)
    sid = body.get("schedule_id")
    if sid is None:
        raise invalid("schedule_id is required")
    if not isinstance(sid, str) or not _SCHEDULE_ID.match(sid):
        raise invalid(f"schedule_id {_show(sid)} must be 1 to 100 letters, digits, `-`, `_` or `.`")
    values: JsonObject = {"schedule_id": sid}
    _apply(values, body)
    if "workflow" not in values:
        raise invalid("workflow is required")
    make: Callable[..., ScheduleSpec] = ScheduleSpec  # `_apply` checked every field
    return compile_spec(make(**values)), _paused(body, False)


def parse_patch(current: ScheduleSpec, body: JsonObject) -> tuple[Compiled, bool | None]:
    """`current` changed by a PATCH body, and the requested pause state (None: unchanged)."""
    _known_fields(body)
    sid = body.get("schedule_id")
    if sid is not None and sid != current.schedule_id:
        raise invalid("schedule_id cannot change")
    values = {name: getattr(current, name) for name in attrs.fields_dict(ScheduleSpec)}
    _apply(values, body)
    paused = None if body.get("paused") is None else _paused(body, False)
    return compile_spec(ScheduleSpec(**values)), paused


def _known_fields(body: JsonObject) -> None:
    for name in body:
        if name not in FIELDS:
            raise invalid(f"unknown field `{name}` (expected one of {', '.join(FIELDS)})")


def _apply(values: JsonObject, body: JsonObject) -> None:
    for name in FIELDS:
        if name in ("schedule_id", "paused") or name not in body:
            continue
        value = body[name]
        if value is None:
            if name == "workflow":
                raise invalid("workflow cannot be removed")
            if name == "input":
                values["input"] = {}
            elif name in ("overlap", "catchup"):
                values.pop(name, None)
            else:
                values[name] = None
            continue
        if name == "input":
            values["input"] = value
            continue
        if not isinstance(value, str):
            raise invalid(f"{name} must be a string, not {_kind(value)}")
        values[name] = value


def _paused(body: JsonObject, default: bool) -> bool:
    value = body.get("paused")
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(f"paused must be true or false, not {_kind(value)}")
    return value


def compile_spec(spec: ScheduleSpec) -> Compiled:
    """Validates every setting; the spec comes back with times in UTC."""
    if not spec.workflow:
        raise invalid("workflow must not be empty")
    if spec.version is not None and not spec.version:
        raise invalid("version must not be empty")
    if spec.cron is None and spec.interval is None:
        raise invalid("neither cron nor interval is set: give exactly one")
    if spec.cron is not None and spec.interval is not None:
        raise invalid("both cron and interval are set: give exactly one")
    if spec.overlap not in OVERLAP_POLICIES:
        raise invalid(f"overlap `{spec.overlap}`: expected {_one_of(OVERLAP_POLICIES)}")
    if spec.catchup not in CATCHUP_POLICIES:
        raise invalid(f"catchup `{spec.catchup}`: expected {_one_of(CATCHUP_POLICIES)}")
    cron = None
    interval_ms = None
    zone = None
    if spec.cron is not None:
        try:
            cron = parse_cron(spec.cron)
        except CronError as exc:
            raise invalid(f"cron `{spec.cron}`: {exc}") from None
        if spec.timezone is not None:
            zone = load_zone(spec.timezone)
    else:
        assert spec.interval is not None
        if spec.timezone is not None:
            raise invalid(
                "timezone is not allowed with interval (intervals do not depend on a zone)"
            )
        interval_ms = _duration("interval", spec.interval)
        if interval_ms < MIN_INTERVAL_MS:
            raise invalid(f"interval `{spec.interval}` is shorter than the minimum of 1s")
    start_ms = _time("start_at", spec.start_at)
    end_ms = _time("end_at", spec.end_at)
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise invalid(f"end_at `{spec.end_at}` is not after start_at `{spec.start_at}`")
    jitter_ms = 0
    if spec.jitter is not None:
        jitter_ms = _duration("jitter", spec.jitter)
        if jitter_ms > MAX_JITTER_MS:
            raise invalid(f"jitter `{spec.jitter}` is longer than the maximum of 24h")
    normal = attrs.evolve(
        spec,
        start_at=None if start_ms is None else format_time(start_ms),
        end_at=None if end_ms is None else format_time(end_ms),
    )
    return Compiled(normal, Timing(cron, interval_ms, zone, start_ms, end_ms), jitter_ms)


def _duration(name: str, text: str) -> int:
    try:
        return parse_duration(text)
    except TimeFormatError as exc:
        raise invalid(f"{name} `{text}`: {exc}") from None


def _time(name: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_time(text)
    except TimeFormatError as exc:
        raise invalid(f"{name} `{text}`: {exc}") from None


def load_zone(name: str) -> ZoneInfo:
    """An IANA zone from the tzdata package (the same data on every host),
    or from the system's database when the package is missing."""
    if not _ZONE_NAME.match(name):
        raise invalid(
            f"timezone `{name}`: unknown time zone (expected an IANA name such as Europe/Berlin)"
        )
    zone = _zone(name)
    if zone is None:
        raise invalid(
            f"timezone `{name}`: unknown time zone (expected an IANA name such as Europe/Berlin)"
        )
    return zone


@functools.lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo | None:
    try:
        resource = importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/"))
        with resource.open("rb") as data:
            return ZoneInfo.from_file(data, key=name)
    except ModuleNotFoundError:
        pass
    except (OSError, ValueError):
        return None
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):
        return None


def _one_of(options: tuple[str, ...]) -> str:
    return ", ".join(options[:-1]) + f" or {options[-1]}"


def _show(value: object) -> str:
    return f"`{value}`" if isinstance(value, str) else _kind(value)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else "a string"
