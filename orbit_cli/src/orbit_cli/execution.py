"""Rendering an execution state (GET /v1/executions/{id}) for people.

`status` prints the header and the unit table; `run` prints the header as its
summary and one line per unit transition while it follows an execution.
Units are listed in the order they last changed, which only the history
knows (a unit's timestamps do not say when it failed an attempt or began a
retry wait): the server sends `units` in that order, units changed in the same
millisecond by key, and we keep it. Units never touched (no `status`) are left
out.

A queued unit that no connected worker serves (`waiting_for` of the state
document, with `serving: 0`) says so in the DETAIL column, and `run` reports
such a wait once it has lasted `WAIT_NOTICE_S`, naming the workers connected
for that task name, so a typo in `using` or a worker not started does not
look like a slow task.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from orbit_cli.output import compact_json, duration
from orbit_cli.redact import redact

TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"})
UNIT_DONE = frozenset({"SUCCEEDED", "SKIPPED", "FAILED", "CANCELLED"})

STATUS_COLOURS = {
    "COMPLETED": "green",
    "FAILED": "red",
    "CANCELLED": "yellow",
    "TIMED_OUT": "red",
    "SUCCEEDED": "green",
    "SKIPPED": "bright_black",
}

TABLE_HEADER = f"  {'STEP':<28} {'STATUS':<12} {'ATTEMPT':>7} {'TIME':>8}  DETAIL"

# Transitions `orbit run` reports: symbol, word, colour. The word is the
# unit's status in lower case. Others (dispatched, waiting, running) are not
# news to the person watching.
TRANSITIONS = {
    "SUCCEEDED": ("✓", "succeeded", "green"),
    "FAILED": ("✗", "failed", "red"),
    "RETRY_WAIT": ("↻", "retry_wait", "yellow"),
    "SKIPPED": ("↷", "skipped", "bright_black"),
    "CANCELLED": ("⊘", "cancelled", "yellow"),
    "SCHEDULED": ("·", "scheduled", "bright_black"),
}

Paint = Callable[[str, str | None], str]

# How long a task may wait for a worker before `orbit run` says nothing serves it.
WAIT_NOTICE_S = 3.0


def plain(text: str, _colour: str | None) -> str:
    return text


def header(state: dict[str, Any], paint: Paint = plain, now_ms: int | None = None) -> list[str]:
    """`COMPLETED <id>  <Wf>@<v>` and the indented facts below it; `now_ms`
    ends the elapsed time of an execution under way (default: the wall clock)."""
    status = str(state.get("status", "?"))
    lines = [
        f"{paint(status, STATUS_COLOURS.get(status))} {state.get('id')}  "
        f"{state.get('workflow')}@{state.get('version')}"
    ]
    if state.get("run") is not None:
        lines.append(f"  run: {state['run']} (continue-as-new)")
    if state.get("schedule_id") is not None:
        lines.append(f"  schedule: {state['schedule_id']}")
    if state.get("paused"):
        lines.append(f"  {paused_line(state, now_ms)}")
    lines.append(f"  elapsed: {duration(elapsed_ms(state, now_ms))}")
    waiting = state.get("waiting")
    if isinstance(waiting, dict) and waiting.get("message"):
        # Held back by a flow-control limit (docs/language/flow-control.md).
        lines.append(f"  {waiting['message']}")
    if state.get("compensation") is not None:
        lines.append(f"  compensation: {state['compensation']}")
    error = state.get("error")
    if isinstance(error, dict):
        lines.append(f"  error: {error.get('code')} {error.get('message')}")
    return lines


def paused_line(state: dict[str, Any], now_ms: int | None = None) -> str:
    """`paused: 12s ago (reason)` for a paused execution (beyond the book)."""
    now = wall_ms() if now_ms is None else now_ms
    since = duration(max(0, now - _int(state.get("paused_at_ms"))))
    reason = state.get("pause_reason")
    return f"paused: {since} ago" + (f" ({reason})" if reason else "")


def wall_ms() -> int:
    return int(time.time() * 1000)


# Statuses in which an execution is still under way: its elapsed time runs to now.
UNDER_WAY = frozenset({"RUNNING", "COMPENSATING"})


def elapsed_ms(state: dict[str, Any], now_ms: int | None = None) -> int:
    """From creation to the end, or to `now_ms` (the wall clock by default)
    while the execution is under way: its last change says nothing of how
    long it has been running."""
    created = _int(state.get("created_at_ms"))
    if not created:
        return 0
    if "finished_at_ms" in state:
        last = _int(state["finished_at_ms"])
    elif state.get("status") in UNDER_WAY:
        last = wall_ms() if now_ms is None else now_ms
    else:
        last = _int(state.get("updated_at_ms"))
    return max(0, last - created)


def output_line(state: dict[str, Any]) -> str | None:
    if "output" not in state:
        return None
    return f"  output: {compact_json(redact(state['output']))}"


def touched_units(state: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    units = state.get("units")
    if not isinstance(units, dict):
        return []
    return [(k, u) for k, u in units.items() if isinstance(u, dict) and "status" in u]


def unit_time(unit: dict[str, Any]) -> str:
    """From dispatch (or, without one, scheduling) to finish; blank when unknown."""
    start = unit.get("dispatched_at_ms", unit.get("scheduled_at_ms"))
    finished = unit.get("finished_at_ms")
    if unit.get("status") not in UNIT_DONE or start is None or finished is None:
        return ""
    return duration(_int(finished) - _int(start))


def unserved(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The `waiting_for` entries no connected worker serves, by unit key."""
    found: dict[str, dict[str, Any]] = {}
    entries = state.get("waiting_for")
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and entry.get("serving") == 0:
            for key in entry.get("units") or ():
                found[str(key)] = entry
    return found


def contract_label(entry: dict[str, Any]) -> str:
    return f"{entry.get('task')}@{entry.get('contract_version')}"


def no_worker(entry: dict[str, Any]) -> str:
    """`no worker is polling for greeting.compose@1.0.0 on runtime typescript`."""
    runtime = entry.get("runtime")
    where = "" if runtime in (None, "any") else f" on runtime {runtime}"
    return f"no worker is polling for {contract_label(entry)}{where}"


def connected_workers(entry: dict[str, Any]) -> str:
    """Which workers announce the task name, at whatever version or runtime."""
    workers = [w for w in entry.get("workers") or () if isinstance(w, dict)]
    if not workers:
        return f"no worker connected for {entry.get('task')}"
    listed = ", ".join(
        f"{w.get('worker_id')} ({w.get('runtime')}, {w.get('contract_version')})" for w in workers
    )
    return f"connected for {entry.get('task')}: {listed}"


def unit_detail(unit: dict[str, Any], waiting: dict[str, Any] | None = None) -> str:
    if waiting is not None and unit.get("status") == "SCHEDULED":
        return no_worker(waiting)
    error = unit.get("error")
    if unit.get("status") == "RETRY_WAIT":
        error = error or unit.get("last_error")
    if isinstance(error, dict):
        return str(error.get("message", ""))
    if unit.get("worker_id"):
        return f"worker {unit['worker_id']}"
    return ""


def table_row(key: str, unit: dict[str, Any], waiting: dict[str, Any] | None = None) -> str:
    """One unit's row; `waiting` is its `unserved` entry, if any."""
    return (
        f"  {key:<28} {unit.get('status', ''):<12} {unit.get('attempt', 0):>7} "
        f"{unit_time(unit):>8}  {unit_detail(unit, waiting)}"
    )


def transition_line(key: str, unit: dict[str, Any], paint: Paint = plain) -> str | None:
    status = unit.get("status")
    if status not in TRANSITIONS:
        return None
    symbol, word, colour = TRANSITIONS[status]
    if status == "SUCCEEDED":
        detail = unit_time(unit)
    elif status in ("FAILED", "RETRY_WAIT"):
        detail = unit_detail(unit)
    else:
        detail = ""
    return f"  {paint(symbol, colour)} {key:<30} {word} {detail}"


class Follower:
    """Remembers what `orbit run` last saw of each unit and reports what changed."""

    def __init__(self, paint: Paint = plain, clock: Callable[[], float] = time.monotonic) -> None:
        self._seen: dict[str, tuple[Any, Any]] = {}
        self._paint = paint
        self._clock = clock
        # Unserved contracts: when first seen, and whether reported yet.
        self._unserved_since: dict[tuple[Any, ...], float] = {}
        self._reported: set[tuple[Any, ...]] = set()

    def observe(self, state: dict[str, Any]) -> list[str]:
        lines = []
        for key, unit in touched_units(state):
            now = (unit.get("status"), unit.get("attempt"))
            if self._seen.get(key) == now:
                continue
            self._seen[key] = now
            line = transition_line(key, unit, self._paint)
            if line is not None:
                lines.append(line)
        lines.extend(self._waits(state))
        return lines

    def _waits(self, state: dict[str, Any]) -> list[str]:
        """Reports each contract nobody serves once it has waited WAIT_NOTICE_S."""
        now = self._clock()
        current: dict[tuple[Any, ...], dict[str, Any]] = {}
        for entry in unserved(state).values():
            current[(entry.get("task"), entry.get("contract_version"), entry.get("runtime"))] = (
                entry
            )
        for gone in set(self._unserved_since) - set(current):
            del self._unserved_since[gone]
            self._reported.discard(gone)
        lines = []
        for key, entry in current.items():
            since = self._unserved_since.setdefault(key, now)
            if key in self._reported or now - since < WAIT_NOTICE_S:
                continue
            self._reported.add(key)
            units = ", ".join(str(u) for u in entry.get("units") or ())
            lines.append(f"  {self._paint('…', 'yellow')} {units:<30} {no_worker(entry)}")
            lines.append(f"    {connected_workers(entry)}")
        return lines


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
