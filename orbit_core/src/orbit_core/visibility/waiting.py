"""What an execution waits for, kept in the search index for `waiting_for`.

An execution of a workflow that declares a `search` block gets one more
index row, field `@waiting` (a name no declaration can spell), whose text is
the set of things its open units wait for, each `kind:name`, sorted and
framed by `|`: `|signal:approval|task:charge|`. The kinds:

    task    a task step offered or running (name: the step)
    child   a child workflow step running (name: the step)
    timer   a `sleep` step, or a step waiting to retry (name: the step)
    signal  an `await` step (name: the signal)

The engine recomputes the set for each change it commits and writes the row
only when the set changed, in the same transaction as the events that
changed it; an execution that waits for nothing (it ended, or runs only
compute steps) keeps the row with no text, which no filter matches.

A filter reads it with containment: `waiting_for == signal` is "the text
holds `|signal:`", `waiting_for == "approval"` is "it holds `:approval|`"
(any kind). Only workflows with a `search` block are indexed, which keeps
the cost off every other execution; the checker says so when a filter
names `waiting_for` for a workflow without one.
"""

from __future__ import annotations

from orbit_core.api import UNIT_RETRY_WAIT, UNIT_WAITING, UnitStatus
from orbit_core.plan import Plan
from orbit_core.state import UNIT_DONE, ExecutionState

FIELD = "@waiting"
KINDS = ("task", "timer", "signal", "child")
_IDLE = frozenset({*UNIT_DONE, UnitStatus.RUNNING, None})


def waiting_text(state: ExecutionState, plan: Plan) -> str | None:
    """The `@waiting` text of `state`, None when it waits for nothing."""
    if state.terminal:
        return None
    found: set[str] = set()
    for key, unit in state.units.items():
        status = unit.status
        if status in _IDLE:
            continue
        spec = plan.spec(key)
        if spec is None:
            continue
        step = spec.step
        if status == UNIT_WAITING:
            if spec.kind == "await" and step.signal is not None:
                found.add(f"signal:{step.signal}")
            elif spec.kind == "workflow":
                found.add(f"child:{step.name}")
            else:
                found.add(f"timer:{step.name}")
        elif status == UNIT_RETRY_WAIT:
            found.add(f"timer:{step.name}")
        elif spec.kind == "workflow":
            found.add(f"child:{step.name}")
        else:
            found.add(f"task:{step.name}")
    if not found:
        return None
    return "|" + "|".join(sorted(found)) + "|"


def kind_needle(kind: str) -> str:
    return f"|{kind}:"


def name_needle(name: str) -> str:
    return f":{name}|"
