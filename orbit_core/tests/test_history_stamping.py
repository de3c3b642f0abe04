"""Events are numbered and dated by `orbit_core.history` alone (issue 37):
the stamper's rules, and the histories the engine writes keeping them for
every kind of event — the seeded simulation (faults, crashes, restarts,
pauses) for most kinds, scripted runs for the kinds it does not reach. The
kinds that need the language's examples (flow control, migration) are in
tests/test_history_stamping_kinds.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from engine_kit import Worker
from test_engine_restart import completed
from test_engine_simulation import Simulation, patch_chaos, run_seed
from test_engine_timelines_flow import inbox, labels, saga

from orbit_core import events as ev
from orbit_core.decide import Limits
from orbit_core.engine import Engine
from orbit_core.history import Batch, into_slots, problems, stamp
from orbit_core.state import ExecutionState, apply
from orbit_core.testing import run_until_idle, simulated_engine

# The kinds the simulation's seeds below produce; the rest are scripted here
# or in tests/test_history_stamping_kinds.py.
SCRIPTED_HERE = frozenset(
    {"WorkflowContinuedAsNew", "LimitExceeded", "CompensationFailed", "WorkflowForked"}
)
SCRIPTED_WITH_EXAMPLES = frozenset(
    {"WorkflowWaiting", "WorkflowAdmitted", "WorkflowMigrated", "WorkflowDebounced"}
)
SIMULATED = frozenset(ev.EVENT_TYPES) - SCRIPTED_HERE - SCRIPTED_WITH_EXAMPLES
SEEDS = 120


def test_stamp_numbers_after_the_newest_and_dates_with_the_time_given() -> None:
    state = ExecutionState("x-1")
    created = stamp(state, 5, ev.WorkflowCreated, "W", "1.0.0", "h", None)
    assert (created.seq, created.timestamp_ms) == (1, 5)
    apply(state, created)
    started = stamp(state, 9, ev.WorkflowStarted)
    assert (started.seq, started.timestamp_ms) == (2, 9)


def test_a_batch_numbers_its_events_in_the_order_added() -> None:
    state = ExecutionState("x-1")
    apply(state, stamp(state, 1, ev.WorkflowCreated, "W", "1.0.0", "h", None))
    batch = Batch(state, 7)
    assert batch.last_seq == 1
    batch.add(ev.WorkflowStarted)
    batch.add(ev.TimerStarted, "a", 100)
    assert [(e.seq, e.timestamp_ms) for e in batch.events] == [(2, 7), (3, 7)]
    assert batch.last_seq == 3
    for event in batch.events:
        apply(state, event)  # the fold takes them: dense
    assert state.last_seq == 3


def test_into_slots_reorders_and_keeps_the_numbering() -> None:
    state = ExecutionState("x-1")
    batch = Batch(state, 3)
    batch.add(ev.TimerFired, "b")
    batch.add(ev.StepSkipped, "c", "no")
    batch.add(ev.TimerFired, "a")
    out = into_slots(batch.events, [0, 2], [batch.events[2], batch.events[0]])
    assert [(e.seq, e.TYPE, getattr(e, "step", "")) for e in out] == [
        (1, "TimerFired", "a"),
        (2, "StepSkipped", "c"),
        (3, "TimerFired", "b"),
    ]


def test_problems_names_gaps_and_time_going_back() -> None:
    ok: list[list[ev.Event]] = [
        [ev.WorkflowCreated(1, 5, "W", "1", "h", None), ev.WorkflowStarted(2, 5)]
    ]
    assert problems(ok) == []
    assert problems([[ev.WorkflowStarted(1, 5), ev.WorkflowResumed(3, 6)]]) == [
        "run 1: WorkflowResumed has seq 3, not 2"
    ]
    assert problems([[ev.WorkflowStarted(1, 5)], [ev.WorkflowStarted(1, 4)]]) == [
        "run 2: #1 WorkflowStarted is dated 4, before 5"
    ]


# ---------------------------------------------------------------- the engine's histories


def _runs(engine: Engine, execution_id: str) -> list[list[ev.Event]]:
    last = int(engine.get(execution_id).get("run") or 1)
    return [engine.events(execution_id, run) for run in range(1, last + 1)]


def _check(engine: Engine, seen: set[str]) -> None:
    for row in engine.list_executions(limit=10_000)["executions"]:
        eid = str(row["execution_id"])
        runs = _runs(engine, eid)
        assert problems(runs) == [], eid
        seen.update(e.TYPE for run in runs for e in run)


@pytest.fixture
def chaos(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    patch_chaos(monkeypatch.setattr)
    yield


@pytest.mark.timeout(600)
def test_simulated_histories_are_dense_and_in_time_order(
    chaos: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run of every execution (children too) the simulation leaves,
    through faults, crashes, restarts and pauses: seqs 1, 2, 3, … and times
    that never go back, for each of the kinds it produces."""
    seen: set[str] = set()
    real_check = Simulation.check

    def check(sim: Simulation, execution_id: str) -> None:
        real_check(sim, execution_id)
        if execution_id == sim.executions[-1]:  # once a seed, all it stored
            _check(sim.engine, seen)

    monkeypatch.setattr(Simulation, "check", check)
    for seed in range(SEEDS):
        run_seed(seed)
    assert seen >= SIMULATED, sorted(SIMULATED - seen)


def test_the_kinds_the_simulation_misses_are_dense_and_in_time_order() -> None:
    seen: set[str] = set()
    # Continue-as-new (every run numbered from 1) and the history limit.
    eng = simulated_engine(limits=Limits(max_history_events=12))
    eng.deploy(inbox())
    eng.start("Inbox", execution_id="inbox-1")
    for text in ("first", "second", "stop"):
        eng.signal("inbox-1", "message", {"text": text})
    run_until_idle(eng)
    eng.deploy(labels())
    eng.start("PrintLabels", input={"skus": ["a", "b", "c", "d", "e"]}, execution_id="l-1")
    w = Worker(eng, "printer", ["labels.print"])
    for _ in range(5):
        if eng.get("l-1")["status"] != "RUNNING":
            break
        w.run({"label": "x"})
    # A failed compensation.
    eng.deploy(saga())
    s = Worker(eng, "w", ["a.run", "a.undo"])
    eng.start("Saga", execution_id="saga-1")
    s.run({"v": 1})
    s.run({"v": 2})
    s.err(s.take(), "BROKEN", "no", False)
    s.err(s.take(), "UNDO_FAILED", "cannot undo second", False)
    s.ok(s.take(), {"ok": True})
    _check(eng, seen)
    eng.close()
    # A fork.
    eng, _ = completed()
    eng.operations.fork("h-1", "decorate", new_id="h-1-fork", force=True)
    run_until_idle(eng)
    _check(eng, seen)
    eng.close()
    assert seen >= SCRIPTED_HERE, sorted(SCRIPTED_HERE - seen)


def test_a_signal_answer_names_the_seq_its_event_took() -> None:
    eng = simulated_engine()
    eng.deploy(inbox())
    eng.start("Inbox", execution_id="inbox-1")
    for _ in range(3):
        eng.clock.advance(7)  # type: ignore[attr-defined]
        reply = eng.signal("inbox-1", "message", {"text": "go"})
        event = next(e for e in eng.events("inbox-1") if e.seq == reply["seq"])
        assert isinstance(event, ev.SignalReceived)
    eng.close()
