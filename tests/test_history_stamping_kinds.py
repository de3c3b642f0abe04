"""Issue 37, with the language's examples: the histories flow control and
live migration write keep the numbering `orbit_core.history` gives (dense
seqs, times that never go back), for the kinds orbit_core's own test
(orbit_core/tests/test_history_stamping.py) cannot reach without them."""

from __future__ import annotations

from pathlib import Path

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.history import problems
from orbit_core.testing import simulated_engine
from orbit_lang.compiler import compile_files, compile_source

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


DEBOUNCED = """
task "demo.work" {
    version "1.0.0"
    input { customer_id: String }
    output {}
}

workflow Quiet {
    version "1.0.0"
    input { customer_id: String, n: Int }
    debounce { period: 10s, key: input.customer_id }
    step work { worker "demo.work" with { customer_id: input.customer_id } }
}
"""


def _take_and_complete(engine: Engine, session: str) -> int:
    done = 0
    while (task := engine.workers.poll(session, 0)) is not None:
        engine.workers.complete(task["token"], {})
        done += 1
    return done


def _seen(engine: Engine, ids: list[str]) -> set[str]:
    seen: set[str] = set()
    for eid in ids:
        events = engine.events(eid)
        assert problems([events]) == [], eid
        seen.update(e.TYPE for e in events)
    return seen


def test_admission_and_migration_histories_are_dense_and_in_time_order() -> None:
    engine = simulated_engine()
    # Flow control: c-1 runs two at a time, the rest wait and are admitted.
    (per_customer,) = compile_files([EXAMPLES / "flow_control.orbit"])
    engine.deploy(per_customer)
    ids = [f"e{n}" for n in range(1, 6)]
    for eid, customer in zip(ids, ["c-1", "c-1", "c-1", "c-1", "c-2"], strict=True):
        engine.start("PerCustomer", input={"customer_id": customer}, execution_id=eid)
    session = engine.workers.register("w1", "python", [("demo.work", "1.0.0")])
    for _ in range(10):
        engine.clock.advance(5)  # type: ignore[attr-defined]
        if not _take_and_complete(engine, session["worker_session_id"]):
            break
    assert all(engine.get(eid)["status"] == "COMPLETED" for eid in ids)
    seen = _seen(engine, ids)
    # Live migration of a waiting execution from 1.0.0 to 2.0.0.
    v1 = compile_files([EXAMPLES / "migration" / "approval-v1.orbit"])[-1]
    v2 = compile_files([EXAMPLES / "migration" / "approval-v2.orbit"])[-1]
    engine.deploy(v1)
    engine.start("Approval", "1.0.0", {"id": "a-1"}, execution_id="a-1")
    notify = engine.workers.register("w2", "python", [("approvals.notify", "1.0.0")])
    engine.clock.advance(5)  # type: ignore[attr-defined]
    assert _take_and_complete(engine, notify["worker_session_id"]) == 1
    engine.deploy(v2)
    engine.clock.advance(5)  # type: ignore[attr-defined]
    assert engine.migrations.run("Approval", "1.0.0", "2.0.0")["migrated"] == 1
    seen |= _seen(engine, ["a-1"])
    # Debounce: a second start folds its input into the pending execution.
    (quiet,) = compile_source(DEBOUNCED, "quiet.orbit").definitions
    engine.deploy(quiet)
    first = engine.start("Quiet", input={"customer_id": "c-9", "n": 1})
    engine.clock.advance(1_000)  # type: ignore[attr-defined]
    engine.start("Quiet", input={"customer_id": "c-9", "n": 2})
    engine.clock.advance(20_000)  # type: ignore[attr-defined]
    _take_and_complete(engine, session["worker_session_id"])
    seen |= _seen(engine, [first["execution_id"]])
    assert {
        ev.WorkflowWaiting.TYPE,
        ev.WorkflowAdmitted.TYPE,
        ev.WorkflowMigrated.TYPE,
        ev.WorkflowDebounced.TYPE,
    } <= seen
    engine.close()
