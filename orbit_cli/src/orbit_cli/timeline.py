"""One line per history event, as `orbit logs` prints them:

    +   106ms   #9  StepScheduled             step=broken attempt=1

The time is relative to the first event shown. Only the fields a reader
needs to follow the story are printed (RULINGS §14); payloads stay in
`--json`.
"""

from __future__ import annotations

from typing import Any

from orbit_cli.output import duration

# Printed in this order when an event has them.
FIELDS = (
    "step",
    "attempt",
    "worker_id",
    "reason",
    "delay_ms",
    "redelivery",
    "outcome",
    "run",
    "next_run",
    "schedule_id",
    "kind",
    "limit",
    "name",
    "signal",
    "signal_seq",
    "error",
    # A live migration (`WorkflowMigrated`, docs/language/migration.md).
    "from_version",
    "to_version",
    "renamed",
)


def timeline(events: list[dict[str, Any]]) -> list[str]:
    if not events:
        return []
    start = _ms(events[0].get("timestamp_ms"))
    return [event_line(event, start) for event in events]


def event_line(event: dict[str, Any], start_ms: int) -> str:
    elapsed = duration(_ms(event.get("timestamp_ms")) - start_ms)
    seq = f"#{event.get('seq', '?')}"
    fields = " ".join(
        f"{key}={_text(key, event[key])}"
        for key in FIELDS
        if _shown(event.get(key)) and not _moot(key, event)
    )
    return f"+{elapsed:>8}{seq:>5}  {event.get('type', '?'):<26}{fields}"


def _shown(value: Any) -> bool:
    # `redelivery=false`, absent optionals and empty maps carry no information.
    return value is not None and value is not False and value != {}


def _moot(key: str, event: dict[str, Any]) -> bool:
    # A debounce holds a start by time, not by a count: its `limit` is a 0
    # placeholder (events.WorkflowWaiting), so printing it would mislead.
    return key == "limit" and event.get("reason") == "debounce"


def _text(key: str, value: Any) -> str:
    if key == "error" and isinstance(value, dict):
        return f"{value.get('code', '')} {value.get('message', '')}"
    if key == "renamed" and isinstance(value, dict):
        return ",".join(f"{old}->{new}" for old, new in sorted(value.items()))
    if value is True:
        return "true"
    return str(value)


def _ms(value: Any) -> int:
    return value if isinstance(value, int) else 0
