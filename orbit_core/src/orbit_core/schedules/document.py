"""The schedule document of GET /v1/schedules/{id}: the settings, then the state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orbit_core.jsontypes import JsonObject
from orbit_core.schedules.spec import Compiled
from orbit_core.schedules.times import format_time

if TYPE_CHECKING:
    from orbit_core.ports import ScheduleRow

UPCOMING = 5


def document(row: ScheduleRow, compiled: Compiled | None) -> JsonObject:
    """`compiled` is None for a stored schedule whose settings no longer
    compile (for example a zone that left the database): shown as stored."""
    out = dict(compiled.spec.to_json()) if compiled is not None else dict(row.spec)
    out["paused"] = row.paused
    out["next_fire_at"] = None if row.due_ms is None else format_time(row.due_ms)
    upcoming = [] if compiled is None else compiled.timing.upcoming(row.next_fire_ms, UPCOMING)
    out["next_fire_times"] = [format_time(t) for t in upcoming]
    out["last_fire_at"] = None if row.last_fire_ms is None else format_time(row.last_fire_ms)
    out["last_execution_id"] = row.last_execution_id
    out["fired"] = row.fired
    out["skipped"] = row.skipped
    out["last_error"] = row.last_error
    out["created_at"] = format_time(row.created_at_ms, millis=True)
    out["updated_at"] = format_time(row.updated_at_ms, millis=True)
    return out


def occurrence_execution_id(schedule_id: str, occurrence_ms: int) -> str:
    """The execution an occurrence starts: `<schedule>:<occurrence in UTC>`."""
    return f"{schedule_id}:{format_time(occurrence_ms)}"


def manual_execution_id(schedule_id: str, now_ms: int) -> str:
    """The execution a trigger starts: `<schedule>:manual:<now with ms>`."""
    return f"{schedule_id}:manual:{format_time(now_ms, millis=True)}"
