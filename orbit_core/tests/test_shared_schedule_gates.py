"""A schedule's start of a workflow with start limits, on two shared-mode
engines of the in-memory cluster: it is decided by the holder of the
workflow's flow gate (engine/flow_gates.py), not by the server that fires
the schedule. Before, the firing server started it inside its own engine
command, beside the executions the gate's holder was counting, so a
`concurrency { max: 1 }` ran two executions at once."""

from __future__ import annotations

from typing import Any

import pytest
from test_shared_flow_gates import Cluster, _gated

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.engine.flow_gates import is_gate
from orbit_core.engine.scheduler import CLAIM_MS
from orbit_core.errors import StorageError
from orbit_core.jsontypes import JsonObject


def _one_at_a_time() -> Cluster:
    c = Cluster(_gated(ir.definition.Flow(concurrency=ir.definition.Concurrency(1))))
    # Running on a, which so holds the gate.
    assert c.start("a", "first", 1) == {"execution_id": "first", "created": True}
    # Created through b: only b knows it (a reads schedules again only when told).
    body: JsonObject = {
        "schedule_id": "tick",
        "workflow": "Gated",
        "input": {"n": 2},
        "interval": "1h",
        "overlap": "allow",
    }
    c.engines["b"].schedules.create(body)
    return c


def _fired(c: Cluster) -> str:
    doc = c.engines["b"].schedules.get("tick")
    eid = doc["last_execution_id"]
    assert isinstance(eid, str), doc
    return eid


def test_a_scheduled_start_waits_for_the_gate_held_by_the_other_server() -> None:
    c = _one_at_a_time()
    c.clock.advance(3_600_000)
    eid = _fired(c)
    assert eid.startswith("tick:")
    # It waits for a's slot rather than run beside `first`.
    assert c.engines["a"].get(eid)["waiting"]["reason"] == "concurrency"
    assert ev.WorkflowWaiting.__name__ in c.events(eid)
    assert ev.WorkflowStarted.__name__ not in c.events(eid)
    # Decided and owned by a, the gate's holder, in the gate's tree.
    (gate,) = [k for k in c.cluster.owners if is_gate(k)]
    assert c.cluster.owners[eid].node == "a" and c.cluster.owners[eid].root == gate
    assert c.engines["b"].schedules.counters.schedules_fired == 1


def test_a_repeated_occurrence_is_not_started_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _one_at_a_time()
    node = c.nodes["b"]
    advance = node.advance_schedules
    failures = [StorageError("the database went away")]

    def advance_once(*args: Any) -> list[str]:
        if failures:
            raise failures.pop()
        return advance(*args)

    # Started, but the schedule's row not advanced (as a crash between the two):
    # the occurrence stays pending and fires again once its claim expires.
    monkeypatch.setattr(node, "advance_schedules", advance_once)
    c.clock.advance(3_600_000)
    assert not failures
    assert c.engines["b"].schedules.get("tick")["last_execution_id"] is None
    c.clock.advance(CLAIM_MS + 1_000)
    eid = _fired(c)
    assert c.events(eid).count(ev.WorkflowCreated.__name__) == 1
    assert c.engines["b"].schedules.get("tick")["fired"] == 1
    # The metric counts new executions that were recorded: the first fire's
    # record failed and the repeat made none (as for a start made here).
    assert c.engines["b"].schedules.counters.schedules_fired == 0
    # The repeat went to a, the holder, which answered that it existed.
    assert c.cluster.owners[eid].node == "a"
    assert "waiting" in c.engines["a"].get(eid)


def test_a_triggered_start_is_decided_by_the_gate_holder_too() -> None:
    c = _one_at_a_time()
    answer = c.engines["b"].schedules.trigger("tick")
    eid = answer["execution_id"]
    assert answer["started"] is True and isinstance(eid, str)
    assert c.cluster.owners[eid].node == "a"
    assert c.engines["a"].get(eid)["waiting"]["reason"] == "concurrency"
