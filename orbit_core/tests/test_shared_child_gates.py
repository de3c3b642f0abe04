"""A gated child workflow across two shared-mode engines on the in-memory
cluster (engine/remote_children.py): two parents, each owned by another
server, start children of one key of a workflow with `concurrency` 1; the
key's flow gate holder admits both, so one child runs while the other
waits, and each parent completes with its own child's output. Before, a
child joined its parent's tree and each parent's server admitted its own:
two children of the key ran at once."""

from __future__ import annotations

from typing import Any

import attrs
from engine_kit import Int, child_contract, inp, obj, rec, ref, step, workflow
from test_engine_simulation import LEAF, _checked
from test_shared_flow_gates import Cluster

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.engine.flow_gates import is_gate

CHILD = attrs.evolve(
    LEAF,
    name="Gated",
    flow=ir.definition.Flow(concurrency=ir.definition.Concurrency(1, key=inp("n"))),
    ir_version=ir.IR_V2,
)
CHILD = attrs.evolve(CHILD, definition_hash=ir.definition_hash(CHILD))
PARENT = workflow(
    "Parent",
    [step("sub", "workflow", workflow="Gated", with_=obj(n=inp("n")))],
    [child_contract(CHILD)],
    input=rec(n=Int),
    output=rec(v=Int),
    result=obj(v=ref("sub", "v")),
)
TERMINAL = {"WorkflowCompleted", "WorkflowFailed", "WorkflowCancelled", "WorkflowTimedOut"}


class Parents(Cluster):
    def __init__(self) -> None:
        super().__init__(CHILD)
        self.engines["a"].deploy(_checked(PARENT)[1])
        self.engines["b"].reload_definitions()
        self.sessions = {
            name: engine.workers.register("w", "python", [("t.work", "1.0.0")])["worker_session_id"]
            for name, engine in self.engines.items()
        }

    def restart(self, name: str) -> None:
        """A new engine for the node, on the same store: it recovers what
        the node owns, as a restarted server does."""
        self.engines[name].close()
        shared = self.engine(name)
        shared.handoff.hold_gates(list(self.nodes[name].owned))
        self.engines[name] = shared
        reply = shared.workers.register("w", "python", [("t.work", "1.0.0")])
        self.sessions[name] = reply["worker_session_id"]

    def settle(self) -> None:
        """Ticks both engines and applies both inboxes until nothing moves."""
        for _ in range(50):
            before = len(self.cluster.inbox), self._events()
            for name, engine in self.engines.items():
                engine.tick()
                self._deliver(name)
            if (len(self.cluster.inbox), self._events()) == before:
                return
        raise AssertionError("the cluster did not settle")

    def _events(self) -> int:
        return sum(len(self.cluster.data.history(e) or []) for e in [*self.children(), "p1", "p2"])

    def children(self) -> list[str]:
        rows = self.cluster.data.list_executions(None, "Gated", 100)
        return sorted(r.execution_id for r in rows)

    def running(self) -> list[str]:
        """Children that started and have not ended."""
        return [
            eid
            for eid in self.children()
            if "WorkflowStarted" in self.events(eid) and not TERMINAL & set(self.events(eid))
        ]

    def poll(self) -> list[dict[str, Any]]:
        tasks = []
        for name, engine in self.engines.items():
            got = engine.workers.poll(self.sessions[name], 0)
            if got is not None:
                tasks.append(dict(got))
        return tasks


def _two_parents() -> Parents:
    c = Parents()
    assert c.engines["a"].start("Parent", None, {"n": 1}, "p1")["created"]
    assert c.engines["b"].start("Parent", None, {"n": 1}, "p2")["created"]
    assert (c.cluster.owners["p1"].node, c.cluster.owners["p2"].node) == ("a", "b")
    c.settle()
    return c


def test_two_parents_on_two_servers_run_one_child_of_a_key_at_a_time() -> None:
    c = _two_parents()
    children = c.children()
    assert len(children) == 2
    # Both children are in the gate's tree, with one holder.
    (gate,) = [k for k in c.cluster.owners if is_gate(k)]
    holder = c.cluster.owners[gate].node
    assert {c.cluster.owners[k].root for k in children} == {gate}
    assert {c.cluster.owners[k].node for k in children} == {holder}
    assert len(c.running()) == 1
    (waiting,) = [k for k in children if k not in c.running()]
    assert "WorkflowWaiting" in c.events(waiting)
    # One task out, for the running child only.
    (first,) = c.poll()
    assert first["execution_id"] == c.running()[0]
    assert c.poll() == []
    c.engines[holder].workers.complete(first["token"], {"v": 7})
    c.settle()
    # The second starts once the first ended; both parents get their output.
    assert c.running() == [waiting]
    (second,) = c.poll()
    assert second["execution_id"] == waiting
    c.engines[holder].workers.complete(second["token"], {"v": 8})
    c.settle()
    outputs = []
    for parent in ("p1", "p2"):
        assert c.events(parent)[-1] == "WorkflowCompleted", c.events(parent)
        outputs.append(c.engines["a"].get(parent)["output"])
    assert sorted(outputs, key=str) == [{"v": 7}, {"v": 8}]
    assert not c.cluster.inbox


def test_a_parents_cancel_cancels_its_waiting_child_on_the_gate_holder() -> None:
    c = _two_parents()
    (waiting,) = [k for k in c.children() if k not in c.running()]
    created = (c.cluster.data.history(waiting) or [])[0]
    assert isinstance(created, ev.WorkflowCreated) and created.parent is not None
    parent = created.parent["execution_id"]
    c.engines["a"].cancel(parent, "no longer needed")
    c.settle()
    assert c.events(waiting)[-1] == "WorkflowCancelled", c.events(waiting)
    assert c.events(parent)[-1] == "WorkflowCancelled", c.events(parent)
    # The other child still runs and its parent completes.
    (task,) = c.poll()
    holder = c.cluster.owners[task["execution_id"]].node
    c.engines[holder].workers.complete(task["token"], {"v": 1})
    c.settle()
    other = "p2" if parent == "p1" else "p1"
    assert c.events(other)[-1] == "WorkflowCompleted"


def test_a_restarted_parents_server_waits_for_its_child_held_elsewhere() -> None:
    """The parent's server restarts while its child runs on the gate's
    holder: recovery re-links the child and waits for its end (it used to
    deliver the running child's stored state as an end, failing the step)."""
    c = _two_parents()
    (gate,) = [k for k in c.cluster.owners if is_gate(k)]
    holder = c.cluster.owners[gate].node
    other = "b" if holder == "a" else "a"
    parent = next(p for p in ("p1", "p2") if c.cluster.owners[p].node == other)
    c.restart(other)
    c.settle()
    assert c.events(parent)[-1] != "StepAttemptFailed", c.events(parent)
    for _ in range(2):
        (task,) = c.poll()
        c.engines[holder].workers.complete(task["token"], {"v": 3})
        c.settle()
    assert c.events(parent)[-1] == "WorkflowCompleted", c.events(parent)
