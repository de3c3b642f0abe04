"""The chapter's two policy tables as pure functions.

`catch_up` decides what happens to a schedule whose pending occurrence fell
due: which occurrence (if any) to start now, how many count as missed, and
which occurrence is pending next. `overlap` decides what an occurrence does
while the schedule's previous execution still runs.
"""

from __future__ import annotations

import attrs

from orbit_core.schedules.jitter import jitter_ms
from orbit_core.schedules.timing import Timing

# skip_missed still starts an occurrence at most this late.
LATE_LIMIT_MS = 60_000

START = "start"
SKIP = "skip"
CANCEL_AND_START = "cancel_and_start"


@attrs.frozen(slots=True)
class Due:
    """The outcome of looking at a due schedule."""

    fire: int | None  # the occurrence to start now
    missed: int  # occurrences counted as skipped (reason "missed")
    handled: int | None  # the latest occurrence dealt with (last_fire_at), if any
    pending: int | None  # the occurrence to wait for afterwards (None: ended)


def fire_time(schedule_id: str, occurrence: int, bound_ms: int) -> int:
    """When an occurrence fires: its time plus its jitter."""
    return occurrence + jitter_ms(schedule_id, occurrence, bound_ms)


def catch_up(
    timing: Timing,
    schedule_id: str,
    jitter_bound_ms: int,
    pending: int,
    *,
    now: int,
    catchup: str,
) -> Due:
    """What to do at `now` with the pending occurrence `pending` (due: its
    fire time is not after `now`). Only the latest occurrence up to `now` may
    start; the ones before it are missed. skip_missed starts it only when it
    is at most a minute late, run_once however late."""
    count, latest, before = timing.due_between(pending, now)
    at = fire_time(schedule_id, latest, jitter_bound_ms)
    if at > now:
        # The latest occurrence waits for its own jitter; the earlier ones passed.
        return Due(None, count - 1, before, latest)
    following = timing.next_after(latest)
    if catchup == "run_once" or now - at <= LATE_LIMIT_MS:
        return Due(latest, count - 1, latest, following)
    return Due(None, count, latest, following)


def overlap(policy: str, previous_running: bool) -> str:
    """START, SKIP or CANCEL_AND_START."""
    if not previous_running or policy == "allow":
        return START
    if policy == "cancel_previous":
        return CANCEL_AND_START
    return SKIP
