"""Live migration on the engine (issue 41): the census, the plan and the
move of the approval example from 1.0.0 to 2.0.0, on a simulated engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.errors import NotFoundError
from orbit_core.ir import Definition
from orbit_core.memory_store import MemoryStore
from orbit_core.state import fold
from orbit_core.testing import simulated_engine
from orbit_lang.compiler import compile_files

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "migration"


def approval(version: int) -> Definition:
    return compile_files([EXAMPLES / f"approval-v{version}.orbit"])[-1]


def run_task(engine: Engine, task: str) -> None:
    session = engine.workers.register("w", "python", [(task, "1.0.0")])
    assignment = engine.workers.poll(session["worker_session_id"], wait_ms=0)
    assert assignment is not None and assignment["task_name"] == task
    engine.workers.complete(assignment["token"], {})


@pytest.fixture
def waiting() -> Engine:
    """An execution of 1.0.0 that has run `notify` and waits for `approve`,
    with 2.0.0 deployed beside it."""
    engine = simulated_engine()
    engine.deploy(approval(1))
    engine.start("Approval", "1.0.0", {"id": "a-1"}, execution_id="a-1")
    run_task(engine, "approvals.notify")
    engine.deploy(approval(2))
    return engine


def test_census_shows_the_waiting_execution(waiting: Engine) -> None:
    doc = waiting.migrations.census("Approval")
    v1, v2 = doc["versions"]
    assert (v1["version"], v1["live"], v1["drain"]) == ("1.0.0", 1, "draining")
    assert v1["waiting"] == [{"step": "approval", "kind": "signal", "count": 1}]
    assert v1["tasks"] == []
    assert (v2["version"], v2["live"], v2["drain"]) == ("2.0.0", 0, "current")


def test_plan_run_and_completion(waiting: Engine) -> None:
    plan = waiting.migrations.plan("Approval", "1.0.0", "2.0.0")
    assert plan["executions"] == [
        {"execution_id": "a-1", "version": "1.0.0", "verdict": "migratable"}
    ]
    assert waiting.get("a-1")["version"] == "1.0.0"  # the plan changed nothing
    done = waiting.migrations.run("Approval", "1.0.0", "2.0.0")
    assert (done["migrated"], done["remaining"]) == (1, 0)
    doc = waiting.get("a-1")
    assert doc["version"] == "2.0.0"
    assert doc["definition_hash"] == approval(2).definition_hash
    events = waiting.events("a-1")
    moved = [e for e in events if isinstance(e, ev.WorkflowMigrated)]
    assert len(moved) == 1 and moved[0].from_hash == approval(1).definition_hash
    assert fold(events, "a-1").to_json() == waiting.state("a-1").to_json()
    census = waiting.migrations.census("Approval")["versions"]
    assert [(v["live"], v["drain"]) for v in census] == [(0, "drained"), (1, "current")]
    waiting.signal("a-1", "approve", {})
    run_task(waiting, "approvals.audit")
    assert waiting.get("a-1")["status"] == "COMPLETED"


def test_recovery_runs_the_new_definition(waiting: Engine) -> None:
    store = waiting.store
    waiting.migrations.run("Approval", "1.0.0", "2.0.0")
    waiting.close()
    assert isinstance(store, MemoryStore)
    again = simulated_engine(store)
    assert again.get("a-1")["version"] == "2.0.0"
    again.signal("a-1", "approve", {})
    run_task(again, "approvals.audit")
    assert again.get("a-1")["status"] == "COMPLETED"


def test_an_execution_in_flight_waits_for_its_safe_point() -> None:
    engine = simulated_engine()
    engine.deploy(approval(1))
    engine.start("Approval", "1.0.0", {"id": "a-2"}, execution_id="a-2")
    engine.deploy(approval(2))
    plan = engine.migrations.plan("Approval", "1.0.0", "2.0.0")["executions"]
    assert plan[0]["verdict"] == "at_safe_point"
    assert plan[0]["reason"] == "step `notify` has an attempt in flight"
    assert engine.migrations.run("Approval", "1.0.0", "2.0.0")["migrated"] == 0
    assert engine.get("a-2")["version"] == "1.0.0"


def test_no_declared_migration_is_refused(waiting: Engine) -> None:
    with pytest.raises(NotFoundError) as caught:
        waiting.migrations.plan("Approval", "2.0.0", "1.0.0")
    assert caught.value.code == "MIGRATION_NOT_DECLARED"


def test_a_declared_reverse_map_moves_an_execution_back(tmp_path: Path) -> None:
    """A `reverse { }` item in 2.0.0's block (the audit step removed, as
    it has not started): an execution moved to 2.0.0 goes back to 1.0.0 by
    the reverse map, and runs 1.0.0 to its end."""
    (tmp_path / "approval-v1.orbit").write_text((EXAMPLES / "approval-v1.orbit").read_text())
    source = (EXAMPLES / "approval-v2.orbit").read_text()
    source = source.replace(
        'migrate from "1.0.0" in "approval-v1.orbit" {}',
        'migrate from "1.0.0" in "approval-v1.orbit" {\n        reverse { remove audit }\n    }',
    )
    assert "reverse { remove audit }" in source
    (tmp_path / "approval-v2.orbit").write_text(source)
    v1 = compile_files([tmp_path / "approval-v1.orbit"])[-1]
    v2 = compile_files([tmp_path / "approval-v2.orbit"])[-1]
    engine = simulated_engine()
    engine.deploy(v1)
    engine.start("Approval", "1.0.0", {"id": "r-1"}, execution_id="r-1")
    run_task(engine, "approvals.notify")
    engine.deploy(v2)
    assert engine.migrations.run("Approval", "1.0.0", "2.0.0")["migrated"] == 1
    assert engine.get("r-1")["version"] == "2.0.0"
    back = engine.migrations.plan("Approval", "2.0.0", "1.0.0")
    assert [e["verdict"] for e in back["executions"]] == ["migratable"]
    assert engine.migrations.run("Approval", "2.0.0", "1.0.0")["migrated"] == 1
    doc = engine.get("r-1")
    assert (doc["version"], doc["definition_hash"]) == ("1.0.0", v1.definition_hash)
    moves = [e for e in engine.events("r-1") if isinstance(e, ev.WorkflowMigrated)]
    assert [(m.from_version, m.to_version) for m in moves] == [
        ("1.0.0", "2.0.0"),
        ("2.0.0", "1.0.0"),
    ]
    assert moves[0].migration_hash != moves[1].migration_hash
    engine.signal("r-1", "approve", {})
    assert engine.get("r-1")["status"] == "COMPLETED"  # 1.0.0 has no audit step


def test_a_paused_execution_migrated_stays_paused(waiting: Engine) -> None:
    """Issue 38 with issue 41: a migration moves a paused execution (a
    pause is no obstacle) and keeps the pause: nothing runs on the new
    version until the operator resumes it, and the fold agrees."""
    waiting.operations.pause("a-1", "audit first")
    done = waiting.migrations.run("Approval", "1.0.0", "2.0.0")
    assert done["migrated"] == 1
    doc = waiting.get("a-1")
    assert doc["version"] == "2.0.0"
    assert doc["paused"] is True and doc["pause_reason"] == "audit first"
    assert fold(waiting.events("a-1"), "a-1").to_json() == doc
    # Held: the approval signal is kept, and nothing is handed out.
    waiting.signal("a-1", "approve", {})
    session = waiting.workers.register("w", "python", [("approvals.audit", "1.0.0")])
    assert waiting.workers.poll(session["worker_session_id"], wait_ms=0) is None
    waiting.operations.resume("a-1")
    run_task(waiting, "approvals.audit")
    assert waiting.get("a-1")["status"] == "COMPLETED"


def test_a_move_by_another_mapping_hash_is_refused(waiting: Engine) -> None:
    """The owner of an execution another server asked it to move (shared
    mode's inbox entry `migrate`) moves it only by the mapping that server
    planned with: another hash leaves it untouched."""
    planned = waiting.migrations.plan("Approval", "1.0.0", "2.0.0")["migration_hash"]
    refused = waiting.migrations.move(
        "Approval", "1.0.0", "2.0.0", "a-1", migration_hash="sha256:" + "0" * 64
    )
    assert refused["migrated"] is False and planned in refused.get("reason", "")
    assert waiting.get("a-1")["version"] == "1.0.0"
    moved = waiting.migrations.move("Approval", "1.0.0", "2.0.0", "a-1", migration_hash=planned)
    assert moved["migrated"] is True
    assert waiting.get("a-1")["version"] == "2.0.0"
