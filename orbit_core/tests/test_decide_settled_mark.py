"""The decider's mark of settled main steps (`ExecutionState.main_settled`):
decisions taken on a live state that carries the mark are the decisions a
state folded afresh from the same history (no mark) gets, step by step, for
dependencies declared in any order, skipped and failed steps; a mark left
by another plan is not read."""

from __future__ import annotations

import attrs

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.decide import Limits, decide
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.plan import Plan
from orbit_core.state import ExecutionState, apply, fold

TASK = "mark.task"


def task(name: str, *after: str, when: e.Expr | None = None) -> ir.Step:
    return ir.Step(name, "task", task=TASK, depends_on=after, when=when)


def definition(*steps: ir.Step) -> ir.Definition:
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="Mark",
        version="1.0.0",
        input=t.EMPTY_RECORD,
        output=t.EMPTY_RECORD,
        steps=steps,
        result=e.EMPTY_OBJECT,
        contracts={TASK: ir.TaskContract(TASK, "1.0.0", t.EMPTY_RECORD, t.EMPTY_RECORD)},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


def started(plan: Plan) -> tuple[ExecutionState, list[ev.Event]]:
    defn = plan.defn
    history: list[ev.Event] = [
        ev.WorkflowCreated(1, 1, defn.name, defn.version, defn.definition_hash, {}),
        ev.WorkflowStarted(2, 1),
    ]
    state = ExecutionState("e1")
    for event in history:
        apply(state, event)
    return state, history


def run(plan: Plan, answer: dict[str, bool]) -> list[ev.Event]:
    """Plays the execution to its end: every scheduled task succeeds, or
    fails for good when `answer` says False. At each decision, the live
    state (with its mark) and a fresh fold of the history decide alike."""
    state, history = started(plan)
    limits = Limits()
    now = 1
    while not state.terminal:
        now += 1
        fresh = fold(history, "e1")
        assert fresh.main_settled is None
        batch = decide(state, plan, now, limits)
        assert [ev.to_json(x) for x in batch] == [
            ev.to_json(x) for x in decide(fresh, plan, now, limits)
        ]
        if not batch:
            # Nothing decided: the worker answers every scheduled task.
            pending = [u for u in state.units.values() if u.status == "SCHEDULED"]
            assert pending, "stuck"
            batch = []
            for unit in pending:
                seq = state.last_seq + len(batch) + 1
                if answer.get(unit.key, True):
                    batch.append(ev.StepSucceeded(seq, now, unit.key, 1, {}))
                else:
                    error = ev.make_error("BOOM", "no", False)
                    batch.append(ev.StepAttemptFailed(seq, now, unit.key, 1, error))
        for event in batch:
            apply(state, event)
            history.append(event)
    return history


def test_the_mark_moves_over_settled_steps_only() -> None:
    # b waits for c, declared after it; d waits for a skipped step.
    plan = Plan(
        definition(
            task("a"),
            task("b", "c"),
            task("c", "a"),
            task("skip", when=e.Bool(False)),
            task("d", "skip", "b"),
        )
    )
    history = run(plan, {})
    assert isinstance(history[-1], ev.WorkflowCompleted)
    last = fold(history, "e1")
    done = [e.step for e in history if isinstance(e, ev.StepSucceeded)]
    assert done == ["a", "c", "b", "d"]
    assert last.to_json()["status"] == "COMPLETED"


def test_a_failed_step_keeps_the_decisions() -> None:
    plan = Plan(definition(task("a"), task("b"), task("c", "a", "b")))
    history = run(plan, {"b": False})
    assert isinstance(history[-1], ev.WorkflowFailed)


def test_a_mark_of_another_plan_is_not_read() -> None:
    old = Plan(definition(task("a"), task("b", "a")))
    new = Plan(definition(task("x"), task("a"), task("b", "a")))
    state, _ = started(old)
    state.main_settled = (old, 2)  # as if a and b had settled under `old`
    batch = decide(state, new, 5, Limits())
    assert [x.step for x in batch if isinstance(x, ev.StepScheduled)] == ["x", "a"]
    assert state.main_settled == (new, 0)
