"""Flow gates: how a workflow's start limits hold across the servers of
shared mode (docs/design/cluster.md, "Flow limits in shared mode").

A workflow's `concurrency`, `rate` and `debounce` are decided in the memory
of one engine (engine/admission.py, engine/start_gates.py), which sees only
the executions it owns. Shared mode therefore gives every key of such a
workflow one owner: its *gate*, an ownership row of its own (`gate_id`, a
name no execution id can take, since execution ids have no `/`), held like
an execution's (fenced, with an epoch, taken over with its tree when its
holder stops). Every top-level execution started under the gate joins its
tree (`ExecutionChange.root`), so the one server holding the gate holds
every execution of the key, and its in-memory counts are the whole
cluster's. A start that arrives at another server is sent to the gate's
holder through the mailbox (`SharedEngine.start`); a take-over moves the
gate and all its executions to one server together, which rebuilds the
line from their histories, as a restart does.

The gate covers the keys of all three declarations: when they are written
alike (the usual case, one key per customer) it is per key value; when
they differ, one gate holds the whole workflow.
"""

from __future__ import annotations

import hashlib

from orbit_core.flow import keys
from orbit_core.ir.definition import Concurrency, Debounce, Definition, Rate
from orbit_core.jsontypes import JsonValue

GATE_PREFIX = "@flow/"


def is_gate(owner_id: str) -> bool:
    """Whether an ownership row names a gate, not an execution."""
    return owner_id.startswith(GATE_PREFIX)


def _declared(defn: Definition) -> list[Concurrency | Rate | Debounce]:
    flow = defn.flow
    if flow is None:
        return []
    return [d for d in (flow.concurrency, flow.rate, flow.debounce) if d is not None]


def limited(defn: Definition) -> bool:
    """Whether the workflow declares a start limit (so it has gates)."""
    return bool(_declared(defn))


def gate_id(defn: Definition, value: JsonValue) -> str | None:
    """The gate of a top-level execution of `defn` with input `value`; None
    when the workflow declares no start limit."""
    declared = _declared(defn)
    if not declared:
        return None
    key = declared[0].key
    if all(d.key == key for d in declared):
        execution = {"id": "", "workflow": defn.name, "version": defn.version}
        text = keys.key_text(key, value, execution)
    else:
        text = ""
    digest = hashlib.sha256(f"{defn.name}\0{text}".encode()).hexdigest()[:40]
    return GATE_PREFIX + digest
