"""Restart and fork (issue 38) on the engine: what a new run keeps, what it
runs again, the effect preview and its refusals, and that each run's history
folds to the state the engine holds (so replay of either run is a function
of that run's events alone)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from engine_kit import Str, inp, obj, rec, ref, step, task, timeline, workflow

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.engine.handlers import TaskError
from orbit_core.errors import ConflictError, InvalidError
from orbit_core.ir import Compensation, Definition
from orbit_core.ir import expr as e
from orbit_core.state import fold
from orbit_core.testing import run_until_idle, simulated_engine


def hello(version: str = "1.0.0", effect: str | None = None) -> Definition:
    """The book's hello workflow: compose, then decorate the greeting."""
    return workflow(
        "Hello",
        [
            step("compose", task="greeting.compose", with_=obj(name=inp("name"))),
            step(
                "decorate",
                task="greeting.decorate",
                with_=e.Object((e.Entry("text", ref("compose", "text")),)),
            ),
        ],
        [
            task("greeting.compose", rec(name=Str), rec(text=Str)),
            attrs.evolve(task("greeting.decorate", rec(text=Str), rec(text=Str)), effect=effect),
        ],
        input=rec(name=Str),
        output=rec(text=Str),
        result=e.Object((e.Entry("text", ref("decorate", "text")),)),
        version=version,
    )


class Calls:
    def __init__(self, eng: Engine) -> None:
        self.seen: list[str] = []
        eng.register_handler("greeting.compose", "1.0.0", self.compose)
        eng.register_handler("greeting.decorate", "1.0.0", self.decorate)

    def compose(self, value: Any) -> Any:
        self.seen.append("compose")
        return {"text": f"Hello, {value['name']}"}

    def decorate(self, value: Any) -> Any:
        self.seen.append("decorate")
        return {"text": f"*{value['text']}*"}


def completed(effect: str | None = None) -> tuple[Engine, Calls]:
    eng = simulated_engine()
    eng.deploy(hello(effect=effect))
    calls = Calls(eng)
    eng.start("Hello", input={"name": "Ada"}, execution_id="h-1")
    run_until_idle(eng)
    assert eng.get("h-1")["status"] == "COMPLETED"
    return eng, calls


def test_a_dry_run_previews_and_changes_nothing() -> None:
    eng, _ = completed()
    before = eng.events("h-1")
    answer = eng.operations.restart("h-1", "decorate", dry_run=True)
    assert answer["dry_run"] is True and answer["started"] is False
    assert answer["kept"] == ["compose"] and answer["rerun"] == ["decorate"]
    assert answer["effects"] == [
        {
            "step": "decorate",
            "task": "greeting.decorate@1.0.0",
            "effect": "unknown",
            "idempotency_key": "new",
            "ran_before": True,
            "needs_force": True,
        }
    ]
    assert eng.events("h-1") == before
    assert eng.get("h-1").get("run") is None
    eng.close()


def test_an_unknown_task_with_a_new_key_needs_force() -> None:
    eng, _ = completed()
    with pytest.raises(ConflictError) as refused:
        eng.operations.restart("h-1", "decorate")
    assert refused.value.code == "EFFECTS_REPEATED"
    assert "`decorate` (greeting.decorate@1.0.0, unknown, new idempotency key)" in str(
        refused.value
    )
    eng.close()


def test_a_once_task_needs_force_and_an_idempotent_one_does_not() -> None:
    eng, _ = completed("once")
    with pytest.raises(ConflictError, match=r"`decorate` \(greeting.decorate@1.0.0, once, new"):
        eng.operations.restart("h-1", "decorate")
    eng.close()
    eng, calls = completed("idempotent")
    answer = eng.operations.restart("h-1", "decorate")
    assert answer["started"] is True
    run_until_idle(eng)
    assert calls.seen == ["compose", "decorate", "decorate"]
    eng.close()


def test_a_forced_restart_runs_the_step_again_in_a_new_run() -> None:
    eng, calls = completed()
    answer = eng.operations.restart("h-1", "decorate", force=True, reason="typo")
    assert answer["run"] == 2 and answer["started"] is True
    run_until_idle(eng)
    doc = eng.get("h-1")
    assert doc["status"] == "COMPLETED" and doc.get("run") == 2
    assert doc.get("output") == {"text": "*Hello, Ada*"}
    assert calls.seen == ["compose", "decorate", "decorate"]
    first = timeline(eng, "h-1", 1)
    assert first[-1] == "WorkflowRestarted step=decorate reason=typo next_run=2"
    second = timeline(eng, "h-1", 2)
    assert second[:3] == [
        "WorkflowCreated run=2",
        "WorkflowStarted",
        "StepRestored step=compose",
    ]
    assert "StepScheduled step=decorate attempt=1" in second
    assert not any("step=compose" in x for x in second[3:])
    # The new attempt has a new default idempotency key (it names the run).
    keys = [x.idempotency_key for x in eng.events("h-1", 2) if isinstance(x, ev.StepScheduled)]
    assert keys == ["h-1/run2/decorate"]
    # Each run folds, from its own events, to what the engine reports.
    assert fold(eng.events("h-1"), "h-1").to_json() == doc
    assert fold(eng.events("h-1", 1), "h-1").status == "CONTINUED_AS_NEW"
    eng.close()


def test_restarting_a_running_execution_abandons_its_attempts() -> None:
    eng = simulated_engine()
    eng.deploy(hello())
    eng.start("Hello", input={"name": "Ada"}, execution_id="h-2")
    # No worker yet: `compose` waits in the queue.
    answer = eng.operations.restart("h-2", "compose", force=True)
    assert answer["kept"] == [] and answer["effects"][0]["ran_before"] is False
    calls = Calls(eng)
    run_until_idle(eng)
    assert eng.get("h-2")["status"] == "COMPLETED"
    assert calls.seen == ["compose", "decorate"]
    eng.close()


def test_unknown_step_and_child_are_refused() -> None:
    eng, _ = completed()
    with pytest.raises(InvalidError) as bad:
        eng.operations.restart("h-1", "nope", dry_run=True)
    assert bad.value.code == "UNKNOWN_STEP"
    assert "its steps: compose, decorate" in bad.value.message
    eng.close()


def saga() -> Definition:
    """Chapter 22's shape: reserve (undone by release), then charge."""
    return workflow(
        "Saga",
        [
            step(
                "reserve",
                task="stock.reserve",
                compensate=Compensation("stock.release"),
            ),
            step("charge", task="pay.charge", after=["reserve"]),
        ],
        [
            attrs.evolve(task("stock.reserve"), effect="compensable"),
            task("stock.release"),
            attrs.evolve(task("pay.charge"), effect="idempotent"),
        ],
    )


def test_a_restart_after_compensation_runs_the_undone_steps_again() -> None:
    eng = simulated_engine()
    eng.deploy(saga())
    seen: list[str] = []
    failing = [True]

    def reserve(value: Any) -> Any:
        seen.append("reserve")
        return {}

    def release(value: Any) -> Any:
        seen.append("release")
        return {}

    def charge(value: Any) -> Any:
        seen.append("charge")
        if failing[0]:
            raise TaskError("DECLINED", "card declined", retryable=False)
        return {}

    eng.register_handler("stock.reserve", "1.0.0", reserve)
    eng.register_handler("stock.release", "1.0.0", release)
    eng.register_handler("pay.charge", "1.0.0", charge)
    eng.start("Saga", execution_id="s-1")
    run_until_idle(eng)
    assert eng.get("s-1")["status"] == "FAILED"
    assert seen == ["reserve", "charge", "release"]
    preview = eng.operations.restart("s-1", "charge", dry_run=True)
    # `reserve` was undone by its compensation: its outcome is not kept.
    assert preview["kept"] == [] and preview["rerun"] == ["reserve", "charge"]
    assert [(x["step"], x["effect"], x["needs_force"]) for x in preview["effects"]] == [
        ("reserve", "compensable", False),
        ("charge", "idempotent", False),
    ]
    failing[0] = False
    eng.operations.restart("s-1", "charge")
    run_until_idle(eng)
    assert eng.get("s-1")["status"] == "COMPLETED"
    assert seen[3:] == ["reserve", "charge"]
    eng.close()


def test_fork_starts_a_new_execution_and_leaves_the_source() -> None:
    eng, calls = completed()
    before = eng.events("h-1")
    answer = eng.operations.fork("h-1", "decorate", new_id="h-1-fork", force=True)
    assert answer["execution_id"] == "h-1-fork" and answer["source"] == "h-1"
    run_until_idle(eng)
    assert eng.events("h-1") == before
    assert eng.get("h-1-fork")["status"] == "COMPLETED"
    assert calls.seen == ["compose", "decorate", "decorate"]
    lines = timeline(eng, "h-1-fork")
    assert lines[2:4] == ["WorkflowForked step=decorate", "StepRestored step=compose"]
    with pytest.raises(ConflictError) as exists:
        eng.operations.fork("h-1", "decorate", new_id="h-1-fork", force=True)
    assert exists.value.code == "EXECUTION_EXISTS"
    eng.close()


def test_fork_onto_a_compatible_version() -> None:
    eng, _ = completed()
    eng.deploy(hello("1.1.0"))
    answer = eng.operations.fork("h-1", "decorate", new_id="h-v2", version="1.1.0", force=True)
    assert answer["version"] == "1.1.0"
    run_until_idle(eng)
    assert eng.get("h-v2")["version"] == "1.1.0"
    assert eng.get("h-v2")["status"] == "COMPLETED"
    eng.close()


def test_fork_onto_an_incompatible_version_is_refused_with_the_reason() -> None:
    eng, _ = completed()
    changed = hello("2.0.0")
    compose = attrs.evolve(changed.contracts["greeting.compose"], version="2.0.0")
    changed = attrs.evolve(changed, contracts={**changed.contracts, "greeting.compose": compose})
    from orbit_core.ir import definition_hash

    eng.deploy(attrs.evolve(changed, definition_hash=definition_hash(changed)))
    with pytest.raises(InvalidError) as refused:
        eng.operations.fork("h-1", "decorate", version="2.0.0", dry_run=True)
    assert refused.value.code == "INCOMPATIBLE_VERSION"
    assert refused.value.message == (
        "cannot fork onto this version: step `compose`: task `greeting.compose` is "
        "1.0.0 in Hello@1.0.0 and 2.0.0 in Hello@2.0.0"
    )
    eng.close()


def test_restarting_a_paused_execution_keeps_it_paused() -> None:
    """docs/restart-and-fork.md: the pause holds the execution, not one
    run, so the new run starts paused (with the same reason) and runs the
    restarted step only once resumed; a fork of it is a new execution
    nobody paused."""
    eng = simulated_engine()
    eng.deploy(hello())
    eng.start("Hello", input={"name": "Ada"}, execution_id="h-p")
    eng.operations.pause("h-p", "checking templates")
    answer = eng.operations.restart("h-p", "compose", force=True)
    assert answer["started"] is True and answer["run"] == 2
    doc = eng.get("h-p")
    assert doc["paused"] is True and doc["pause_reason"] == "checking templates"
    assert timeline(eng, "h-p", 2)[-1] == "WorkflowPaused reason=checking templates"
    assert fold(eng.events("h-p"), "h-p").to_json() == doc
    forked = eng.operations.fork("h-p", "compose", new_id="h-p-fork", force=True)
    assert forked["started"] is True and "paused" not in eng.get("h-p-fork")
    calls = Calls(eng)
    run_until_idle(eng)
    assert eng.get("h-p")["status"] == "RUNNING" and calls.seen == ["compose", "decorate"]
    eng.operations.resume("h-p")
    run_until_idle(eng)
    assert eng.get("h-p")["status"] == "COMPLETED"
    assert calls.seen == ["compose", "decorate", "compose", "decorate"]
    eng.close()
