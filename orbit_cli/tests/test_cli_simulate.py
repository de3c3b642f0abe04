"""`orbit simulate` (chapter 52): the chapter's transcripts, chapter 66's
JSON example, the sample rules, child executions, a run that cannot finish,
the history replayed by `orbit replay`, and the errors of bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_cli.simulate import sample
from orbit_core.ir import types as t

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "simulate"
SUPPORT = HERE.parents[1] / "tests" / "book" / "support"

APPROVAL_INPUT = '{"order_id":"T1","customer_id":"c-1","amount":2500}'
ORDER_INPUT = (
    '{"order_id":"A4","customer_id":"c-4","amount":75,"items":[{"sku":"MUG","quantity":2}]}'
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The book's example workflows under `examples/` and this suite's
    fixtures beside them, as the chapter's commands name them."""
    shutil.copytree(SUPPORT, tmp_path / "examples")
    for path in FIXTURES.glob("*.orbit"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def simulate(*args: str) -> Result:
    return CliRunner().invoke(cli, ["simulate", *args])


# ---- the chapter's transcripts


def test_a_large_order_with_a_reviewers_approval(project: Path, golden: Any) -> None:
    result = simulate(
        "examples/approval.orbit",
        "--input",
        APPROVAL_INPUT,
        "--signal",
        'review={"approved":true,"reviewer":"dana"}',
    )
    assert result.exit_code == 0, result.output
    golden("simulate_approval", result.stdout)
    assert (
        result.stderr == "note: generated sample results for: notifications.send, payments.charge\n"
    )
    # On a terminal the note comes right after the first line, as the book shows it.
    lines = result.output.splitlines()
    assert lines[:3] == [
        "simulated OrderApproval@1.0.0 (0ms simulated, no server or workers)",
        "note: generated sample results for: notifications.send, payments.charge",
        "",
    ]


def test_a_declined_card_with_a_mocks_file(project: Path, golden: Any) -> None:
    (project / "mocks.json").write_text('{ "risk.analyze": { "score": 0.3, "reasons": [] } }')
    result = simulate(
        "examples/order_processing.orbit",
        "--input",
        ORDER_INPUT,
        "--mocks",
        "mocks.json",
        "--fail",
        "payments.charge=CARD_DECLINED",
    )
    assert result.exit_code == 1, result.output
    golden("simulate_declined", result.stdout)
    assert result.stderr == (
        "note: generated sample results for: inventory.release, inventory.reserve, "
        "orders.validate\n"
    )


def test_the_cli_chapters_json_example(project: Path) -> None:
    result = simulate(
        "examples/approval.orbit",
        "--input",
        '{"order_id":"T1","customer_id":"c-1","amount":10}',
        "--fail",
        "notifications.send=MAILBOX_FULL",
        "--json",
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert {
        "status": report["status"],
        "error": report["error"]["code"],
        "sampled_tasks": report["sampled_tasks"],
    } == {
        "status": "FAILED",
        "error": "MAILBOX_FULL",
        "sampled_tasks": ["payments.charge", "payments.refund"],
    }
    assert result.stderr == ""


def test_json_has_every_field_of_the_chapter(project: Path) -> None:
    result = simulate("family.orbit", "-i", '{"sku":"MUG"}', "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == [
        "workflow",
        "version",
        "status",
        "output",
        "error",
        "simulated_ms",
        "sampled_tasks",
        "problems",
        "unsent_signals",
        "execution",
        "history",
        "children",
    ]
    assert (report["workflow"], report["version"], report["status"]) == (
        "Order",
        "1.0.0",
        "COMPLETED",
    )
    assert report["error"] is None and report["problems"] == [] and report["unsent_signals"] == []
    assert report["execution"]["id"] == "sim" and report["execution"]["status"] == "COMPLETED"
    assert [e["type"] for e in report["history"]][-1] == "WorkflowCompleted"
    [child] = report["children"]
    assert child["execution"]["workflow"] == "Shipping"
    assert child["history"][0]["type"] == "WorkflowCreated"


# ---- generated results


def test_samples_follow_the_chapters_table(project: Path) -> None:
    result = simulate("family.orbit", "-i", '{"sku":"MUG"}', "--json")
    describe = next(e for e in json.loads(result.stdout)["history"] if e["type"] == "StepSucceeded")
    assert describe["output"] == {
        "name": "name-sample",
        "count": 1,
        "price": 1.0,
        "active": True,
        "photo": "c2FtcGxl",
        "lead_time": 1000,
        "updated_at": "2026-01-01T00:00:00Z",
        "ref": "00000000-0000-4000-8000-000000000001",
        "extra": {},
        "tags": ["tags-sample"],
        "stock": {"key": 1},
        "note": None,
        "parcel": {"label": "label-sample", "weight": 2.5},
        "origin": "EU",
    }
    assert isinstance(describe["output"]["price"], float)


def test_sample_of_nested_types() -> None:
    assert sample(t.ListType(t.MapType(t.STRING)), "labels") == [{"key": "labels-sample"}]
    assert sample(t.OptionalType(t.INT)) is None
    assert sample(t.EMPTY_RECORD) == {}


def test_the_same_command_plays_the_same_execution(project: Path) -> None:
    first = simulate("family.orbit", "-i", '{"sku":"MUG"}', "--json")
    second = simulate("family.orbit", "-i", '{"sku":"MUG"}', "--json")
    assert first.stdout == second.stdout


def test_child_executions_follow_the_parents_timeline(project: Path, golden: Any) -> None:
    result = simulate("family.orbit", "-i", '{"sku":"MUG"}')
    assert result.exit_code == 0, result.output
    golden("simulate_family", result.stdout)
    assert "child execution sim.ship (Shipping@1.0.0):" in result.stdout
    assert result.stderr == "note: generated sample results for: catalog.describe, shipping.book\n"


def test_compiled_ir_runs_like_its_source(project: Path) -> None:
    compiled = CliRunner().invoke(cli, ["compile", "examples/approval.orbit", "-o", "out"])
    assert compiled.exit_code == 0, compiled.output
    args = ["--input", APPROVAL_INPUT, "--signal", 'review={"approved":true,"reviewer":"dana"}']
    from_ir = simulate("out/approval.orbit.json", *args)
    from_source = simulate("examples/approval.orbit", *args)
    assert from_ir.exit_code == 0, from_ir.output
    assert from_ir.stdout == from_source.stdout


# ---- signals


def test_signal_payload_from_a_file_and_a_bare_name(project: Path) -> None:
    (project / "review.json").write_text('{"approved": false, "reviewer": "lee"}')
    result = simulate(
        "examples/approval.orbit", "-i", APPROVAL_INPUT, "--signal", "review=@review.json", "--json"
    )
    report = json.loads(result.stdout)
    assert report["execution"]["units"]["decision"]["output"]["reviewer"] == "lee"
    assert report["output"] == {"status": "rejected", "transaction_id": None}
    bare = simulate("stuck.orbit", "-i", '{"id":"1"}', "--signal", "approve", "--json")
    # `{}` lacks the required `ok`: the runtime refuses it as it would from a client.
    assert bare.exit_code == 1
    assert "error: SIGNAL_PAYLOAD_INVALID" in bare.stderr


def test_a_signal_the_execution_never_waited_for(project: Path) -> None:
    result = simulate(
        "examples/approval.orbit",
        "-i",
        '{"order_id":"T1","customer_id":"c-1","amount":25}',
        "--signal",
        "review={}",
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        "warning: signal `review` was not sent: the execution never waited for it"
    )


# ---- when a simulation cannot finish


def test_an_await_with_nothing_left_to_send(project: Path, golden: Any) -> None:
    result = simulate("stuck.orbit", "-i", '{"id":"1"}', "--signal", 'note={"text":"hi"}')
    assert result.exit_code == 1
    golden("simulate_stuck", result.stdout)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: the simulation stopped: the execution cannot make progress: step `wait` "
        "waits for signal `approve`, and the next signal to send is `note`",
        "warning: signal `note` was not sent: the execution never waited for it",
    ]
    report = json.loads(
        simulate(
            "stuck.orbit", "-i", '{"id":"1"}', "--signal", 'note={"text":"hi"}', "--json"
        ).stdout
    )
    assert report["status"] == "RUNNING"
    assert report["problems"] == [
        "the execution cannot make progress: step `wait` waits for signal `approve`, "
        "and the next signal to send is `note`"
    ]
    assert report["unsent_signals"] == ["note"]


def test_timers_pass_in_simulated_time(project: Path) -> None:
    result = simulate("examples/approval.orbit", "-i", APPROVAL_INPUT, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert report["error"]["code"] == "SIGNAL_TIMEOUT"
    assert report["simulated_ms"] == 2 * 24 * 3600 * 1000


# ---- the history is replayable


def test_the_history_replays_without_divergence(project: Path) -> None:
    result = simulate("examples/order_processing.orbit", "-i", ORDER_INPUT, "--json")
    (project / "history.json").write_text(json.dumps(json.loads(result.stdout)["history"]))
    replayed = CliRunner().invoke(
        cli,
        ["replay", "--history", "history.json", "--definition", "examples/order_processing.orbit"],
    )
    assert replayed.exit_code == 0, replayed.output


# ---- bad input


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["examples/approval.orbit", "--workflow", "Nope"],
            "error: no workflow `Nope`; available: OrderApproval\n",
        ),
        (
            ["examples/approval.orbit", "--fail", "payment.charge=X"],
            "error: `payment.charge` is not a task the workflow can call; its tasks: "
            "notifications.send, payments.charge, payments.refund\n",
        ),
        (
            ["examples/approval.orbit", "--signal", "reveiw={}"],
            "error: --signal reveiw: OrderApproval declares no signal `reveiw`; its signals: review\n",
        ),
        (
            ["examples/approval.orbit", "-i", "{"],
            "error: --input is not valid JSON: key must be a string at line 1 column 2\n",
        ),
        (
            ["examples/approval.orbit", "-i", '{"order_id":1}'],
            "error: INVALID_INPUT: workflow input is invalid at $.order_id: "
            "expected String, found an integer\n",
        ),
        (
            ["examples/approval.orbit", "--mocks", "missing.json"],
            "error: cannot read missing.json: No such file or directory (os error 2)\n",
        ),
    ],
)
def test_bad_input_is_a_clear_error(project: Path, args: list[str], message: str) -> None:
    result = simulate(*args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == message


def test_mocks_must_be_an_object_of_known_tasks(project: Path) -> None:
    (project / "list.json").write_text("[]")
    (project / "typo.json").write_text('{"payments.charg": {}}')
    (project / "broken.json").write_text("{")
    assert simulate("examples/approval.orbit", "--mocks", "list.json").stderr == (
        "error: --mocks list.json: expected a JSON object mapping task names to results\n"
    )
    assert (
        "`payments.charg` is not a task"
        in simulate("examples/approval.orbit", "--mocks", "typo.json").stderr
    )
    assert simulate("examples/approval.orbit", "--mocks", "broken.json").stderr == (
        "error: --mocks broken.json: not valid JSON: key must be a string at line 1 column 2\n"
    )


def test_a_file_that_does_not_compile(project: Path) -> None:
    (project / "bad.orbit").write_text("workflow {")
    result = simulate("bad.orbit")
    assert result.exit_code == 1
    assert "bad.orbit:1:" in result.stderr
    assert result.stderr.endswith("error: compilation failed: 1 error(s), 0 warning(s)\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["examples/approval.orbit", "--fail", "payments.charge"], "expected TASK=CODE"),
        (["examples/approval.orbit", "--fail", "=X"], "expected TASK=CODE"),
        (["examples/approval.orbit", "--signal", "=1"], "expected NAME=JSON or NAME"),
        (["examples/approval.orbit", "-i", "{}", "--input-file", "x.json"], "not both"),
        (["examples/approval.orbit", "--bogus"], "error: no such option"),
        ([], "error: missing argument"),
    ],
)
def test_usage_errors_exit_2(project: Path, args: list[str], message: str) -> None:
    result = simulate(*args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_mistyped_command_gets_a_suggestion(project: Path) -> None:
    result = CliRunner().invoke(cli, ["simulat"])
    assert result.exit_code == 2
    assert "error: no such command 'simulat'. Did you mean 'simulate'?" in result.stderr


def test_the_http_built_in_is_simulated_like_a_task(project: Path) -> None:
    ping = (
        HERE.parents[1] / "tests" / "book" / "examples" / "62-calling-http-services" / "0073.orbit"
    )
    result = simulate(str(ping), "-i", '{"url":"http://example.invalid"}', "--json")
    report = json.loads(result.stdout)
    assert report["status"] == "COMPLETED", result.output
    assert report["sampled_tasks"] == ["orbit.http.request"]


def test_several_unrelated_workflows_need_workflow(project: Path) -> None:
    (project / "two.orbit").write_text(
        (project / "stuck.orbit").read_text()
        + '\nworkflow Other {\n    version "1.0.0"\n    input {}\n    output {}\n'
        "    return {}\n}\n"
    )
    result = simulate("two.orbit")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: two.orbit defines several unrelated workflows (Stuck, Other); "
        "choose one with --workflow"
    )
    chosen = simulate("two.orbit", "--workflow", "Other")
    assert chosen.exit_code == 0, chosen.output
    assert chosen.stdout.startswith("simulated Other@1.0.0 (0ms simulated")


def test_input_from_a_file(project: Path) -> None:
    (project / "input.json").write_text('{"sku": "CUP"}')
    result = simulate("family.orbit", "--input-file", "input.json", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["execution"]["input"] == {"sku": "CUP"}


def test_fail_wins_over_mocks(project: Path) -> None:
    (project / "mocks.json").write_text('{"shipping.book": {"tracking": "T-1"}}')
    result = simulate(
        "family.orbit",
        "-i",
        '{"sku":"MUG"}',
        "--mocks",
        "mocks.json",
        "--fail",
        "shipping.book=NO_CARRIER",
        "--json",
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["error"]["code"] == "NO_CARRIER"
    assert report["sampled_tasks"] == ["catalog.describe"]
