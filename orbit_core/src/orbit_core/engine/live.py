"""What the engine keeps in memory for each running execution."""

from __future__ import annotations

import attrs

from orbit_core import unitkeys
from orbit_core.decide import Limits
from orbit_core.plan import Plan
from orbit_core.ports import ExecutionRow
from orbit_core.state import ExecutionState

# The worker id of attempts the runtime runs itself (children, built-in tasks).
RUNTIME_WORKER = "orbit-runtime"
# The placeholder row of a change until the commit fills in the projection.
NO_ROW = ExecutionRow("", "", "", "", "", 0, 0, 0)
UNWRITTEN = "?"


@attrs.define(slots=True, eq=False)
class Live:
    state: ExecutionState
    plan: Plan
    limits: Limits
    top_level: bool
    finalized: bool = False
    due_at: int | None = None
    # The `@waiting` text last committed for it (orbit_core.visibility.waiting);
    # UNWRITTEN until its first change with a `search` block.
    waiting: str | None = UNWRITTEN


@attrs.define(slots=True)
class ChildLink:
    """A running child and the parent unit (and attempt token) waiting for it."""

    parent_id: str
    unit_key: str
    token: str


def aborts_with_execution(key: str) -> bool:
    """Units whose in-flight attempts are told to stop when the execution aborts."""
    return unitkeys.is_main_block(key) or unitkeys.is_event(key)
