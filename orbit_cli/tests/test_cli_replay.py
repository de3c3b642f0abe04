"""`orbit replay` offline: histories recorded by the simulator replay
without divergence (the same fold and decider as the engine), edited
definitions diverge, and bad input (corrupt history files, a missing or
wrong definition, conflicting options) gets one clear error and the
chapter 66 exit code. Histories recorded by a real server are replayed in
tests/test_cli_real_replay.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_cli.replay import decode_events, replay
from orbit_cli.simulator import Deployment
from orbit_cli.testrun import run_test
from orbit_core.testing import run_until_idle, simulated_engine
from orbit_lang.compiler import compile_source
from orbit_lang.testplan import plan_tests

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "testing"
SUPPORT = HERE.parents[1] / "tests" / "book" / "support"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Any, list[Any]]]:
    """(execution id, definition, history) of every execution the fixture
    test suites run on the simulator, children included."""
    root = tmp_path_factory.mktemp("suites")
    shutil.copytree(SUPPORT, root, dirs_exist_ok=True)
    for path in FIXTURES.glob("*.orbit"):
        shutil.copy(path, root / path.name)
    files = [
        root / n
        for n in ("approval.test.orbit", "order_processing.test.orbit", "subscription.test.orbit")
    ]
    plan = plan_tests(files)
    assert plan.compiled.ok
    deployment = Deployment(plan.definitions)
    by_name = {d.name: d for d in plan.definitions}
    found = []
    for case in plan.tests:
        outcome = run_test(case, deployment).outcome
        for execution in (outcome.main, *outcome.children):
            workflow = execution.history[0]["workflow"]
            found.append((execution.id, by_name[workflow], execution.history))
    return found


def test_simulated_histories_replay_without_divergence(
    recorded: list[tuple[str, Any, list[Any]]],
) -> None:
    assert len(recorded) >= 13
    for execution_id, definition, history in recorded:
        report = replay(execution_id, decode_events(history), definition)
        assert report.divergences == [], (execution_id, report.divergences)
        assert report.mismatch is None
        assert report.events == len(history)
        assert report.state.to_json()["status"] == history[-1]["type"].removeprefix(
            "Workflow"
        ).upper().replace("CONTINUEDASNEW", "CONTINUED_AS_NEW").replace("TIMEDOUT", "TIMED_OUT")


def test_every_prefix_replays_to_the_same_state_as_the_fold(
    recorded: list[tuple[str, Any, list[Any]]],
) -> None:
    from orbit_core.state import fold

    _, definition, history = max(recorded, key=lambda r: len(r[2]))
    events = decode_events(history)
    for at in range(1, len(events) + 1):
        report = replay("sim", events, definition, at=at)
        assert report.state.to_json() == fold(events[:at], "sim").to_json()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("ORBIT_SERVER", "http://127.0.0.1:9")
    shutil.copytree(SUPPORT, tmp_path, dirs_exist_ok=True)
    return tmp_path


def orbit_replay(*args: str) -> Result:
    return CliRunner().invoke(cli, ["replay", *args])


def history_of(project: Path) -> list[dict[str, Any]]:
    """A simulated history of a small OrderApproval."""
    shutil.copy(FIXTURES / "approval.test.orbit", project / "approval.test.orbit")
    plan = plan_tests([project / "approval.test.orbit"])
    case = next(c for c in plan.tests if c.name == "small orders are charged without review")
    return run_test(case, Deployment(plan.definitions)).outcome.main.history


def test_replay_a_history_file_offline(project: Path) -> None:
    (project / "h.json").write_text(
        json.dumps({"execution_id": "sim", "events": history_of(project)})
    )
    result = orbit_replay("--history", "h.json", "--definition", "approval.orbit")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "replayed 11 events of sim against OrderApproval@1.0.0 with the current decider"
    )
    assert result.stdout.endswith("consistent: every recorded decision is reproduced\n")


def test_replay_against_changed_source_diverges(project: Path) -> None:
    (project / "h.json").write_text(json.dumps(history_of(project)))
    source = (project / "approval.orbit").read_text()
    (project / "approval.orbit").write_text(
        source.replace("input.amount >= 1000.0", "input.amount >= 10.0")
    )
    result = orbit_replay("--history", "h.json", "--definition", "approval.orbit")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[2].startswith("  note: the history was recorded with definition sha256:")
    # `assess` computes another value; the recorded one is applied, so
    # nothing after it diverges.
    assert lines[1] == "  4 decided, 6 external, 1 divergent"
    assert lines[3:8] == [
        "",
        "divergence at #3: the runtime recorded",
        '    {"type":"StepSucceeded","step":"assess","attempt":1,"output":'
        '{"needs_approval":false,"rounded":20.0}}',
        "  but the current decider would record",
        '    {"type":"StepSucceeded","step":"assess","attempt":1,"output":'
        '{"needs_approval":true,"rounded":20.0}}',
    ]
    assert len(lines) == 8


def _write(project: Path, name: str, value: Any) -> str:
    (project / name).write_text(value if isinstance(value, str) else json.dumps(value))
    return name


CREATED = {
    "seq": 1,
    "timestamp_ms": 1,
    "type": "WorkflowCreated",
    "workflow": "OrderApproval",
    "version": "1.0.0",
    "definition_hash": "sha256:x",
    "input": {},
}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "h.json: not valid JSON: key must be a string at line 1 column 2"),
        ({"events": 3}, "h.json: expected the output of GET /v1/executions/{id}/history"),
        ([], "h.json: the history has no events"),
        ([1], "h.json: event 1 is not a JSON object"),
        ([{**CREATED, "type": "Nope"}], 'h.json: event 1 has an unknown type "Nope"'),
        ([{**CREATED, "seq": "1"}], 'h.json: event 1 (WorkflowCreated) has an invalid `seq`: "1"'),
        (
            [{**CREATED, "workflow": 7}],
            "h.json: event 1 (WorkflowCreated) has an invalid `workflow`: 7",
        ),
        (
            [CREATED, {"seq": 3, "timestamp_ms": 1, "type": "WorkflowStarted"}],
            "h.json: event 2 (WorkflowStarted) has seq 3, expected 2",
        ),
        (
            [{"seq": 1, "timestamp_ms": 1, "type": "WorkflowStarted"}],
            "h.json: the history does not start with WorkflowCreated",
        ),
        (
            [
                CREATED,
                {"seq": 2, "timestamp_ms": 1, "type": "StepFailed", "step": "x", "error": "boom"},
            ],
            'h.json: event 2 (StepFailed) has an invalid `error`: "boom"',
        ),
    ],
)
def test_a_corrupt_history_file(project: Path, content: Any, message: str) -> None:
    _write(project, "h.json", content)
    result = orbit_replay("--history", "h.json", "--definition", "approval.orbit")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith("error: " + message), result.stderr


def test_a_history_the_fold_cannot_take_is_located(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fold accepts anything well-typed; should it ever refuse an event,
    # the replay names it instead of failing with a traceback.
    import orbit_cli.replay
    from orbit_core.events import Event
    from orbit_core.state import ExecutionState, apply

    def refusing(state: ExecutionState, event: Event) -> None:
        if event.seq == 4:
            raise KeyError("ghost")
        apply(state, event)

    monkeypatch.setattr(orbit_cli.replay, "apply", refusing)
    _write(project, "h.json", history_of(project))
    result = orbit_replay("--history", "h.json", "--definition", "approval.orbit")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "error: h.json: event 4 (StepSkipped) cannot be replayed: 'ghost'\n"


def test_divergent_results_of_tasks(project: Path) -> None:
    # A task result for an attempt nobody dispatched is neither decided nor
    # a worker's answer.
    history = history_of(project)
    history.insert(
        3,
        {
            "seq": 4,
            "timestamp_ms": history[3]["timestamp_ms"],
            "type": "StepSucceeded",
            "step": "charge",
            "attempt": 1,
            "output": {"transaction_id": "x", "status": "y"},
        },
    )
    for seq, event in enumerate(history, 1):
        event["seq"] = seq
    _write(project, "h.json", history)
    result = orbit_replay("--history", "h.json", "--definition", "approval.orbit", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["divergences"][0]["seq"] == 4
    assert report["origins"][3] == {"seq": 4, "origin": "divergent"}


def test_a_missing_history_file(project: Path) -> None:
    result = orbit_replay("--history", "nope.json", "--definition", "approval.orbit")
    assert result.exit_code == 1
    assert result.stderr == "error: cannot read nope.json: No such file or directory (os error 2)\n"


def test_a_definition_without_the_workflow(project: Path) -> None:
    _write(project, "h.json", history_of(project))
    result = orbit_replay("--history", "h.json", "--definition", "subscription.orbit")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: subscription.orbit does not define workflow `OrderApproval` "
        "(it defines: Subscription)\n"
    )


def test_a_definition_that_does_not_compile(project: Path) -> None:
    _write(project, "h.json", history_of(project))
    _write(project, "bad.orbit", "workflow {")
    result = orbit_replay("--history", "h.json", "--definition", "bad.orbit")
    assert result.exit_code == 1
    assert "error[E0" in result.stderr


def test_at_beyond_the_history(project: Path) -> None:
    _write(project, "h.json", history_of(project))
    result = orbit_replay("--history", "h.json", "--definition", "approval.orbit", "--at", "99")
    assert (result.exit_code, result.stderr) == (1, "error: --at 99: the history has 11 events\n")


@pytest.mark.parametrize(
    "args",
    [
        ("rem-1", "--history", "h.json", "--definition", "approval.orbit"),
        ("--history", "h.json"),
        ("--history", "h.json", "--definition", "approval.orbit", "--run", "2"),
        (),
    ],
)
def test_invalid_usage_exits_2(project: Path, args: tuple[str, ...]) -> None:
    _write(project, "h.json", [CREATED])
    result = orbit_replay(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")


def test_an_unreachable_runtime(project: Path) -> None:
    result = orbit_replay("rem-1")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot reach the ORBIT runtime at http://127.0.0.1:9")


REMINDER = """\
workflow Reminder {
    version "1.0.0"
    input { name: String }
    signal ack { ok: Bool }
    step greet { compute { text: "hello " + input.name } }
    step wait { sleep 1s  after greet }
    step confirm { await ack  after wait  timeout 1h }
    return { text: greet.text }
}
"""


def test_time_travel_prints_the_chapters_state(project: Path) -> None:
    # Chapter 53's rem-1, with the timestamps its `orbit logs` shows: the
    # elapsed time is the one at event 6, not the time since then.
    from orbit_cli.definitions import load_definitions

    _write(project, "reminder.orbit", REMINDER)
    (definition,) = load_definitions([project / "reminder.orbit"])
    t = 1_794_753_907_612
    events: list[dict[str, Any]] = [
        {
            "type": "WorkflowCreated",
            "workflow": "Reminder",
            "version": "1.0.0",
            "definition_hash": definition.definition_hash,
            "input": {"name": "Ada"},
        },
        {"type": "WorkflowStarted"},
        {"type": "StepSucceeded", "step": "greet", "attempt": 1, "output": {"text": "hello Ada"}},
        {"type": "TimerStarted", "step": "wait", "fire_at_ms": t + 1001},
        {"type": "TimerFired", "step": "wait"},
        {"type": "SignalAwaitStarted", "step": "confirm", "signal": "ack", "deadline_ms": 0},
        {"type": "SignalReceived", "name": "ack", "payload": {"ok": True}},
        {"type": "SignalDelivered", "step": "confirm", "signal_seq": 7},
        {"type": "WorkflowCompleted", "output": {"text": "hello Ada"}},
    ]
    offsets = [0, 0, 1, 1, 1009, 1009, 2004, 2004, 2005]
    for seq, (event, offset) in enumerate(zip(events, offsets, strict=True), 1):
        event.update(seq=seq, timestamp_ms=t + offset)
    events[5]["deadline_ms"] = t + 1009 + 3_600_000
    _write(project, "h.json", {"execution_id": "rem-1", "events": events})
    result = orbit_replay("--history", "h.json", "--definition", "reminder.orbit", "--at", "6")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "replayed 6 events of rem-1 against Reminder@1.0.0 with the current decider\n"
        "  4 decided, 2 external\n"
        "\n"
        "state after #6 SignalAwaitStarted (+1009ms):\n"
        "\n"
        "RUNNING rem-1  Reminder@1.0.0\n"
        "  elapsed: 1.0s\n"
        "\n"
        "  STEP                         STATUS       ATTEMPT     TIME  DETAIL\n"
        "  greet                        SUCCEEDED          1\n"
        "  confirm                      WAITING            1\n"
        "  wait                         SUCCEEDED          1     1.0s\n"
        "\n"
        "  step outputs:\n"
        '    greet: {"text":"hello Ada"}\n'
        "    wait: {}\n"
    )


def test_flow_control_waits_replay_as_recorded_facts() -> None:
    """WorkflowWaiting, WorkflowAdmitted (a concurrency limit, a rate, a
    debounce) and WorkflowDebounced are the engine's admission, not the
    decider's: a history holding them replays without divergence."""

    result = compile_source(
        """
task "demo.work" { version "1.0.0" input { customer_id: String } output {} }

workflow Quiet {
    version "1.0.0"
    input { customer_id: String, n: Int }
    debounce { period: 10s, key: input.customer_id }
    concurrency { max: 1 }
    rate { max: 1, per: 1m }
    step work { worker "demo.work" with { customer_id: input.customer_id } }
}
"""
    )
    (definition,) = result.definitions
    engine = simulated_engine()
    try:
        engine.deploy(definition)
        engine.register_handler("demo.work", "1.0.0", lambda _input, _ctx: {})
        first = engine.start("Quiet", input={"customer_id": "a", "n": 1})["execution_id"]
        engine.start("Quiet", input={"customer_id": "a", "n": 2})
        second = engine.start("Quiet", input={"customer_id": "b", "n": 1})["execution_id"]
        run_until_idle(engine)
        for eid in (first, second):
            raw = engine.history(eid)["events"]
            kinds = {e["type"] for e in raw}
            assert {"WorkflowWaiting", "WorkflowAdmitted"} <= kinds
            report = replay(eid, decode_events(raw), definition)
            assert report.divergences == [], report.divergences
    finally:
        engine.close()
