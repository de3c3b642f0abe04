"""Gated children in shared mode: a child whose workflow declares
`concurrency`, `rate` or `debounce` is admitted by its key's flow gate
(engine/flow_gates.py), like a top-level start, so its limit holds for
the whole group of servers (docs/design/cluster.md, "Flow limits in
shared mode").

A child normally joins its parent's tree and runs in its parent's engine.
A gated one joins its gate's tree instead, owned by the gate's holder,
which may be another server. What passes between the parent's owner and
the child's owner is an inbox entry written in the transaction of the
commit that decided it (`Tx.messages`, `CommitBatch.messages`): events
before effects, and nothing to resend after a crash.

- `child_start`, to the gate: written by the parent's commit that records
  the unit's dispatch to the child (`child:<id>`). The holder creates the
  child (admitted, or waiting in the key's line) under the parent; if the
  child exists already it starts nothing, and if that child had ended it
  answers with `child_ended`.
- `child_ended`, to the parent: written by the commit that ends a gated
  child whose parent is not in the same engine. The parent's owner reads
  the child's stored state and delivers it to the waiting unit.
- `child_cancel`, to the child: written by the parent's commit that stops
  waiting for a child held elsewhere (the same reasons as a local child's).

Each is applied under its receipt (applied once), and each is idempotent
by ids (the child's id is derived from the parent's, unitkeys), so an entry
applied after the state moved on changes nothing. A parent's owner that
does not hold the gate and finds nobody holding it reserves it first and
then starts the child in its own engine, as `SharedEngine.start` does for
a top-level start. Single servers and standbys never build these.
"""

from __future__ import annotations

from collections.abc import Callable

from orbit_core.ir.definition import Definition
from orbit_core.jsontypes import JsonValue
from orbit_core.ports import OwnerMessage
from orbit_core.state import ExecutionState

START = "child_start"
ENDED = "child_ended"
CANCEL = "child_cancel"
KINDS = frozenset({START, ENDED, CANCEL})

# Called on a group's thread for a child about to start: the flow gate
# held by another server that must start it, or None to start it here
# (ungated, or a gate this engine holds, reserving it when nobody did).
GateRouter = Callable[[Definition, JsonValue], str | None]


def start(
    gate: str,
    child_id: str,
    *,
    parent_id: str,
    unit_key: str,
    definition_hash: str,
    value: JsonValue,
) -> OwnerMessage:
    return OwnerMessage(
        gate,
        START,
        {
            "execution_id": child_id,
            "parent_id": parent_id,
            "step": unit_key,
            "definition_hash": definition_hash,
            "input": value,
        },
    )


def ended(child: ExecutionState, parent_id: str) -> OwnerMessage:
    return OwnerMessage(parent_id, ENDED, {"child_id": child.id})


def cancel(child_id: str, reason: str) -> OwnerMessage:
    return OwnerMessage(child_id, CANCEL, {"reason": reason})
