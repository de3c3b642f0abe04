"""What the engine counts for `Engine.health` and the server's metrics.

One typed object, made by the `Engine` and handed to the components that
count (control: starts; executions: continue-as-new; the pipeline: commits;
the scheduler: fires and skips). Each field is written by exactly one of
them, always by the thread that leads a group or the scheduler's own, so a
plain integer suffices."""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class Counters:
    started: int = 0
    continued_as_new: int = 0
    commits: int = 0
    schedules_fired: int = 0
    schedules_skipped_overlap: int = 0
    schedules_skipped_missed: int = 0
    # Flow control (engine/start_gates.py): starts a `rate` held back or
    # refused, and starts a `debounce` folded into a pending execution.
    rate_delayed: int = 0
    rate_dropped: int = 0
    debounced: int = 0

    def as_dict(self) -> dict[str, int]:
        """By name, as `Engine.health` reports them."""
        return attrs.asdict(self)
