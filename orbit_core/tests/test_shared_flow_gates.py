"""A workflow's `rate` and `debounce` across two shared-mode engines on
the in-memory cluster: each key has one flow gate (engine/flow_gates.py),
so a start made through either server is decided by the gate's holder.
Before gates, each server kept its own bucket and its own held debounce:
the second server started a second execution of a debounced key, and let
a dropped start through with a full bucket of its own."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from engine_kit import inp
from test_engine_simulation import LEAF, _checked
from test_shared_simulation import SESSION_TIMEOUT_MS, DirectClaims

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.engine import Engine
from orbit_core.engine.flow_gates import is_gate
from orbit_core.engine.handoff import Sharing
from orbit_core.engine.shared import SharedEngine
from orbit_core.errors import RateLimitedError
from orbit_core.memory_cluster import MemoryCluster, MemoryNode
from orbit_core.testing import SequentialIds, SimulatedClock


def _gated(flow: ir.definition.Flow) -> ir.Definition:
    defn = attrs.evolve(LEAF, name="Gated", flow=flow, ir_version=ir.IR_V2)
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


class Cluster:
    def __init__(self, definition: ir.Definition) -> None:
        self.clock = SimulatedClock()
        self.ids = SequentialIds()
        self.cluster = MemoryCluster(self.clock)
        self.cluster.deliver = self._deliver
        self.nodes: dict[str, MemoryNode] = {}
        self.engines: dict[str, SharedEngine] = {}
        for name in ("a", "b"):
            node = self.nodes[name] = MemoryNode(self.cluster, name)
            self.engines[name] = self.engine(name)
            node.heartbeat()
        self.engines["a"].deploy(_checked(LEAF)[1])
        self.engines["a"].deploy(_checked(definition)[1])
        self.engines["b"].reload_definitions()

    def engine(self, name: str) -> SharedEngine:
        """A new engine for node `name` (at start, or after a restart: it
        recovers what the node owns, as a server does)."""
        node, ids = self.nodes[name], self.ids
        engine = Engine(
            node,
            self.clock,
            ids,
            handler_threads=0,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            sharing=Sharing(offer_tasks=True, local_first=True, shared_catalog=True),
        )
        return SharedEngine(
            engine,
            node_id=name,
            tables=node,
            announcements=node,
            tasks=DirectClaims(node, lambda eid: f"{eid}/{ids.token()}"),
            reply_wait_s=0.0,
            adopt=node.adopt,
        )

    def _deliver(self, node_id: str) -> None:
        """The owner's inbox round, at once (as the simulation's)."""
        shared, node = self.engines[node_id], self.nodes[node_id]
        replies = [
            (entry, shared.apply(entry))
            for entry in node.pending()
            if shared.handoff.holds(entry.execution_id)
        ]
        if replies:
            node.done(replies)

    def start(self, through: str, eid: str, n: int) -> Any:
        return self.engines[through].start("Gated", None, {"n": n}, eid)

    def events(self, eid: str) -> list[str]:
        return [type(e).__name__ for e in self.cluster.data.history(eid) or []]


def test_a_debounce_folds_starts_made_through_both_servers() -> None:
    flow = ir.definition.Flow(debounce=ir.definition.Debounce(10_000, key=inp("n")))
    c = Cluster(_gated(flow))
    assert c.start("a", "first", 1) == {"execution_id": "first", "created": True}
    # Through the other server: folded into the held execution, not a second one.
    assert c.start("b", "second", 1) == {"execution_id": "first", "created": False}
    assert c.cluster.data.execution_row("second") is None
    assert c.events("first")[-1] == ev.WorkflowDebounced.__name__
    # Both executions of the key's tree are the gate holder's.
    (gate,) = [k for k in c.cluster.owners if is_gate(k)]
    assert c.cluster.owners["first"].root == gate
    # Another key is a gate of its own.
    assert c.start("b", "other", 2) == {"execution_id": "other", "created": True}
    assert len([k for k in c.cluster.owners if is_gate(k)]) == 2


def test_a_dropping_rate_refuses_a_start_through_the_other_server() -> None:
    flow = ir.definition.Flow(rate=ir.definition.Rate(1, 3_600_000, key=inp("n"), on_exceed="drop"))
    c = Cluster(_gated(flow))
    assert c.start("a", "first", 1)["created"] is True
    with pytest.raises(RateLimitedError) as refused:
        c.start("b", "second", 1)
    assert refused.value.code == "RATE_LIMITED"
    # (Its details come back from the holder: when the next start may go.)
    details = refused.value.details or {}
    after = details.get("retry_after_ms")
    assert isinstance(after, int) and after > 0
    assert c.cluster.data.execution_row("second") is None
    # Another key has a token of its own.
    assert c.start("b", "third", 2)["created"] is True
