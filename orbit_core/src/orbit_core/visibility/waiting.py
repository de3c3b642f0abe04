"""What an execution waits for, kept in the search index for `waiting_for`.

An execution of a workflow that declares a `search` block gets one more
index row, field `@waiting` (a name no declaration can spell), whose text is
the set of things its open units wait for, sorted and framed by `|`:
`|signal:approval|task|`. The entries:

    task          a task step offered or running (no name: see below)
    child:<step>  a child workflow step running
    timer:<step>  a `sleep` step, or a step waiting to retry
    signal:<name> an `await` step, by the signal it awaits

The engine recomputes the set for each change it commits and writes the row
only when the set changed, in the same transaction as the events that
changed it. A new execution starts with no row, which filters read as
`|task|` for the definitions that declare a `search` block (an execution
of another definition has no row and waits for nothing as far as filters
go): most executions start on a task step, and the start then writes only
the declared fields (bench_visibility: the row was a third of the start's
index writes). Task steps carry no name on purpose: an execution moving through
a chain of task steps then keeps `|task|` from its first step to its last
and its steps cost no write (with names, every step would rewrite the row,
and bench_visibility measured that as 20-30 % added to each step). The long
waits people look for — a signal, a timer, a child — are named. An ended
execution's row is left as it was: a filter tests the execution's status
too (`check.py`), which saves the write at the end.

A filter reads it with containment: `waiting_for == signal` is "the text
holds `|signal`", `waiting_for == "approval"` is "it holds `:approval|`".
Only workflows with a `search` block are indexed, which keeps the cost off
every other execution; the checker says so when a filter names
`waiting_for` for a workflow without one.
"""

from __future__ import annotations

from orbit_core.api import UNIT_RETRY_WAIT, UNIT_WAITING, UnitStatus
from orbit_core.plan import Plan
from orbit_core.state import UNIT_DONE, ExecutionState

FIELD = "@waiting"
KINDS = ("task", "timer", "signal", "child")
_IDLE = frozenset({*UNIT_DONE, UnitStatus.RUNNING, None})
_TASK = "|task|"
# What an execution without a `@waiting` row holds, for filters
# (check.Condition.absent): a new execution's row is written only when it
# waits for something else.
IMPLIED = _TASK


def waiting_text(state: ExecutionState, plan: Plan) -> str | None:
    """The `@waiting` text of `state`, None when it waits for nothing."""
    # Runs for every change of an indexed execution: the usual answer (task
    # steps only) is found without building a set or a string.
    named: list[str] | None = None
    task = False
    spec_of = plan.spec
    for key, unit in state.units.items():
        status = unit.status
        if status in _IDLE:
            continue
        spec = spec_of(key)
        if spec is None:
            continue
        kind = spec.kind
        if status == UNIT_WAITING:
            if kind == "await" and spec.step.signal is not None:
                entry = f"signal:{spec.step.signal}"
            elif kind == "workflow":
                entry = f"child:{spec.step.name}"
            else:
                entry = f"timer:{spec.step.name}"
        elif status == UNIT_RETRY_WAIT:
            entry = f"timer:{spec.step.name}"
        elif kind == "workflow":
            entry = f"child:{spec.step.name}"
        else:
            task = True
            continue
        if named is None:
            named = [entry]
        else:
            named.append(entry)
    if named is None:
        return _TASK if task else None
    if task:
        named.append("task")
    return "|" + "|".join(sorted(set(named))) + "|"


def kind_needle(kind: str) -> str:
    # No kind is a prefix of another, so `|task` never matches `|timer...`.
    return f"|{kind}"


def name_needle(name: str) -> str:
    return f":{name}|"
