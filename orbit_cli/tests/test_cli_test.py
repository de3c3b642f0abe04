"""`orbit test` (chapter 51): the chapter's transcripts, every expectation
kind passing and failing, every mock behaviour, signals and timers over
days of simulated time, JSON reports and the errors of bad tests."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_cli.testrun import matches

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "testing"
SUPPORT = HERE.parents[1] / "tests" / "book" / "support"
CHAPTER = HERE.parents[1] / "tests" / "book" / "examples" / "51-testing-workflows"
_WALL = re.compile(r"\(\d+\.\d\ds\)$", re.MULTILINE)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The book's example workflows and this suite's test files under
    `examples/`, as the chapter's transcripts run them."""
    examples = tmp_path / "examples"
    shutil.copytree(SUPPORT, examples)
    for path in FIXTURES.glob("*.orbit"):
        shutil.copy(path, examples / path.name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def orbit_test(*args: str) -> Result:
    return CliRunner().invoke(cli, ["test", *args])


def unwalled(text: str) -> str:
    """The report without its wall-clock time."""
    return _WALL.sub("(<wall>)", text)


def write(project: Path, name: str, text: str) -> str:
    (project / name).write_text(text, encoding="utf-8")
    return name


# ---- the chapter's transcripts


def test_the_examples_suite(project: Path) -> None:
    result = orbit_test("examples/approval.test.orbit", "examples/order_processing.test.orbit")
    assert result.exit_code == 0, result.output
    assert unwalled(result.stdout) == (
        "running 10 tests\n"
        "ok      small orders are charged without review (0ms simulated)\n"
        "ok      large orders wait for approval (0ms simulated)\n"
        "ok      rejected orders are not charged (0ms simulated)\n"
        "ok      an order nobody reviews times out after two days (2d 0h simulated)\n"
        "ok      a failed notification refunds the charge (0ms simulated)\n"
        "ok      a low-risk order is charged (0ms simulated)\n"
        "ok      a risky order is held for review (0ms simulated)\n"
        "ok      risk scoring is retried after temporary failures (3.0s simulated)\n"
        "ok      a declined card releases the reserved inventory (0ms simulated)\n"
        "ok      a payment provider that never answers exhausts the retries "
        "(2m 37s simulated)\n"
        "\n"
        "test result: ok. 10 passed, 0 failed, 0 filtered out (<wall>)\n"
    )
    assert result.stderr == ""


def test_filter(project: Path) -> None:
    result = orbit_test(
        "examples/approval.test.orbit",
        "examples/order_processing.test.orbit",
        "--filter",
        "retried",
    )
    assert result.exit_code == 0
    assert unwalled(result.stdout) == (
        "running 1 test\n"
        "ok      risk scoring is retried after temporary failures (3.0s simulated)\n"
        "\n"
        "test result: ok. 1 passed, 9 filtered out (<wall>)\n".replace(
            "1 passed,", "1 passed, 0 failed,"
        )
    )


def test_no_selected_test_passes(project: Path) -> None:
    result = orbit_test("examples/approval.test.orbit", "--filter", "nothing matches")
    assert result.exit_code == 0
    assert unwalled(result.stdout) == (
        "running 0 tests\n\ntest result: ok. 0 passed, 0 failed, 5 filtered out (<wall>)\n"
    )


def test_continue_as_new_runs(project: Path) -> None:
    result = orbit_test("examples/subscription.test.orbit")
    assert result.exit_code == 0, result.output
    assert unwalled(result.stdout) == (
        "running 3 tests\n"
        "ok      three periods are three runs (90d 0h simulated)\n"
        "ok      a single period completes in the first run (30d 0h simulated)\n"
        "ok      a declined charge ends the subscription in that period (30d 0h simulated)\n"
        "\n"
        "test result: ok. 3 passed, 0 failed, 0 filtered out (<wall>)\n"
    )


@pytest.mark.parametrize("example", ["0009", "0078", "0124", "0158"])
def test_each_chapter_example_passes(project: Path, example: str) -> None:
    name = f"examples/c{example}.test.orbit"
    shutil.copy(CHAPTER / f"{example}.orbit", project / name)
    result = orbit_test(name)
    assert result.exit_code == 0, result.output
    assert "1 passed, 0 failed" in result.stdout


DECLINED = """\
import "examples/approval.orbit"

test "declined cards are reported" {
    workflow OrderApproval
    input { order_id: "T2", customer_id: "c-2", amount: 50.0 }
    mock "payments.charge" fails "CARD_DECLINED" "insufficient funds"
    mock "notifications.send" returns { delivered: true }
    expect status COMPLETED
    expect output { status: "charged" }
}
"""

DECLINED_REPORT = """\
running 1 test
FAILED  declined cards are reported (0ms simulated)

failures:

---- declined cards are reported (orders.test.orbit:3, OrderApproval@1.0.0)
  ✗ expected status COMPLETED, got FAILED (CARD_DECLINED: step `charge` failed: insufficient funds)
  ✗ expected output {"status":"charged"}, but the workflow produced none (it ended FAILED (CARD_DECLINED: step `charge` failed: insufficient funds))

  timeline of execution `sim`:
    +     0ms   #1  WorkflowCreated
    +     0ms   #2  WorkflowStarted
    +     0ms   #3  StepSucceeded             step=assess attempt=1
    +     0ms   #4  StepSkipped               step=decision reason=`when` condition was false
    +     0ms   #5  StepScheduled             step=charge attempt=1
    +     0ms   #6  StepDispatched            step=charge attempt=1 worker_id=simulator-python
    +     0ms   #7  StepAttemptFailed         step=charge attempt=1 error=CARD_DECLINED insufficient funds
    +     0ms   #8  StepFailed                step=charge error=CARD_DECLINED insufficient funds
    +     0ms   #9  StepCancelled             step=notify
    +     0ms  #10  WorkflowFailed            error=CARD_DECLINED step `charge` failed: insufficient funds

test result: FAILED. 0 passed, 1 failed, 0 filtered out (<wall>)
"""


def test_the_failure_report(project: Path) -> None:
    write(project, "orders.test.orbit", DECLINED)
    result = orbit_test("orders.test.orbit")
    assert result.exit_code == 1
    assert unwalled(result.stdout) == DECLINED_REPORT


def test_a_junit_xml_report_for_ci(project: Path) -> None:
    from xml.etree import ElementTree

    write(project, "orders.test.orbit", DECLINED)
    result = orbit_test(
        "examples/approval.test.orbit", "orders.test.orbit", "--junit-xml", "report.xml"
    )
    assert result.exit_code == 1
    root = ElementTree.parse(project / "report.xml").getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "6", "1")
    [suite] = root
    cases = {case.get("name"): case for case in suite}
    assert len(cases) == 6
    passed = cases["small orders are charged without review"]
    assert passed.get("classname") == "OrderApproval@1.0.0"
    assert passed.get("file", "").endswith("approval.test.orbit") and passed.find("failure") is None
    [failed] = [case for case in suite if case.find("failure") is not None]
    failure = failed.find("failure")
    assert failure is not None and failure.text is not None
    assert failure.get("message") == failure.text.splitlines()[1].removeprefix("  ✗ ")
    assert failure.text.startswith(f"---- {failed.get('name')} (")
    unwritable = orbit_test("examples/approval.test.orbit", "--junit-xml", "no/such/dir/r.xml")
    assert unwritable.exit_code == 1
    assert unwritable.stderr.startswith("error: cannot write no/such/dir/r.xml: ")


def test_the_json_report(project: Path) -> None:
    write(project, "orders.test.orbit", DECLINED)
    write(
        project,
        "ok.test.orbit",
        (CHAPTER / "0009.orbit").read_text().replace('"approval', '"examples/approval'),
    )
    result = orbit_test("--format", "json", "orders.test.orbit", "ok.test.orbit")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    failed, passed = report["tests"]
    history = failed.pop("history")
    assert failed == {
        "name": "declined cards are reported",
        "workflow": "OrderApproval",
        "version": "1.0.0",
        "file": "orders.test.orbit",
        "line": 3,
        "status": "failed",
        "failures": [
            "expected status COMPLETED, got FAILED (CARD_DECLINED: step `charge` failed: "
            "insufficient funds)",
            'expected output {"status":"charged"}, but the workflow produced none (it ended '
            "FAILED (CARD_DECLINED: step `charge` failed: insufficient funds))",
        ],
        "execution": {
            "status": "FAILED",
            "output": None,
            "error": {
                "code": "CARD_DECLINED",
                "message": "step `charge` failed: insufficient funds",
                "retryable": False,
            },
            "simulated_ms": 0,
        },
    }
    assert [e["type"] for e in history][:2] == ["WorkflowCreated", "WorkflowStarted"]
    assert history[-1]["type"] == "WorkflowFailed"
    assert passed["status"] == "passed"
    assert "history" not in passed
    assert passed["execution"]["output"] == {"status": "charged", "transaction_id": "tx-T1"}
    assert (report["passed"], report["failed"], report["filtered_out"]) == (1, 1, 0)
    assert list(report) == ["tests", "passed", "failed", "filtered_out"]


def test_runs_are_deterministic(project: Path) -> None:
    first = json.loads(
        orbit_test("--format", "json", "examples/order_processing.test.orbit").stdout
    )
    second = json.loads(
        orbit_test("--format", "json", "examples/order_processing.test.orbit").stdout
    )
    assert first == second


# ---- expectations, each passing and failing

HAPPY = """\
    mock "work.run" returns { n: input.n * 10, tag: "t" + string(input.n) }
    mock "work.item" returns { n: input.n }
    mock "work.undo" returns { undone: true }
    mock "mail.send" returns { sent: true }
    signal go { ok: true }
"""
# Without the signal, `wait` times out after 3 days and everything is undone.
SAD = HAPPY.replace("    signal go { ok: true }\n", "")


def kinds_test(project: Path, body: str, expectations: list[str], name: str = "t") -> Result:
    lines = "\n".join(f"    {e}" for e in expectations)
    text = (
        'import "examples/kinds.orbit"\n\n'
        f'test "{name}" {{\n    workflow Kinds\n    input {{ n: 3 }}\n{body}{lines}\n}}\n'
    )
    write(project, "kinds.test.orbit", text)
    return orbit_test("--format", "json", "kinds.test.orbit")


def failures(result: Result) -> list[str]:
    report = json.loads(result.stdout)
    (test,) = report["tests"]
    return list(test["failures"])


PASSING = [
    (HAPPY, "expect status COMPLETED"),
    (SAD, "expect status FAILED"),
    (HAPPY, "expect output { total: 60 }"),
    (HAPPY, 'expect output { total: 60, tag: "t6" }'),
    (SAD, 'expect error "SIGNAL_TIMEOUT"'),
    (HAPPY, "expect step first SUCCEEDED"),
    (SAD, "expect step rest CANCELLED"),
    (SAD, "expect step on_failure:alert SUCCEEDED"),
    (HAPPY, 'expect step first output { tag: "t6" }'),
    (HAPPY, "expect step double output { value: 6 }"),
    (HAPPY, "expect step first attempts 1"),
    (SAD, "expect step child attempts 0"),
    (SAD, "expect compensated first"),
    (SAD, "expect compensated each"),
    (HAPPY, "expect runs 1"),
]


@pytest.mark.parametrize(("body", "expectation"), PASSING, ids=[p[1] for p in PASSING])
def test_expectation_passes(project: Path, body: str, expectation: str) -> None:
    result = kinds_test(project, body, [expectation])
    assert failures(result) == []
    assert result.exit_code == 0


FAILING = [
    (HAPPY, "expect status FAILED", "expected status FAILED, got COMPLETED"),
    (
        SAD,
        "expect status COMPLETED",
        "expected status COMPLETED, got FAILED (SIGNAL_TIMEOUT: step `wait` failed: "
        "no `go` signal arrived before the step's timeout)",
    ),
    (
        HAPPY,
        "expect output { total: 61 }",
        'expected output {"total":61}, got {"total":60,"tag":"t6"}',
    ),
    (
        SAD,
        "expect output { total: 60 }",
        'expected output {"total":60}, but the workflow produced none (it ended FAILED '
        "(SIGNAL_TIMEOUT: step `wait` failed: no `go` signal arrived before the step's timeout))",
    ),
    (HAPPY, 'expect error "SIGNAL_TIMEOUT"', "expected error SIGNAL_TIMEOUT, got COMPLETED"),
    (
        SAD,
        'expect error "CARD_DECLINED"',
        "expected error CARD_DECLINED, got FAILED (SIGNAL_TIMEOUT: step `wait` failed: "
        "no `go` signal arrived before the step's timeout)",
    ),
    (HAPPY, "expect step first FAILED", "expected step `first` FAILED, got SUCCEEDED"),
    (
        SAD,
        "expect step wait SUCCEEDED",
        "expected step `wait` SUCCEEDED, got FAILED (SIGNAL_TIMEOUT: no `go` signal arrived "
        "before the step's timeout)",
    ),
    (SAD, "expect step rest PENDING", "expected step `rest` PENDING, got CANCELLED"),
    (
        SAD,
        "expect step on_failure:alert SKIPPED",
        "expected step `on_failure:alert` SKIPPED, got SUCCEEDED",
    ),
    (
        HAPPY,
        'expect step first output { tag: "t7" }',
        'expected step `first` output {"tag":"t7"}, got {"n":60,"tag":"t6"}',
    ),
    (
        SAD,
        "expect step child output { sent: true }",
        'expected step `child` output {"sent":true}, but the step produced none '
        "(it ended CANCELLED)",
    ),
    (HAPPY, "expect step first attempts 2", "expected step `first` attempts 2, got 1"),
    (
        HAPPY,
        "expect compensated first",
        "expected step `first` to be compensated, but its compensation never ran",
    ),
    (
        HAPPY,
        "expect compensated each",
        "expected step `each` to be compensated, but its compensation never ran",
    ),
]


@pytest.mark.parametrize(("body", "expectation", "message"), FAILING, ids=[f[1] for f in FAILING])
def test_expectation_fails_with_its_report(
    project: Path, body: str, expectation: str, message: str
) -> None:
    result = kinds_test(project, body, [expectation])
    assert failures(result) == [message]
    assert result.exit_code == 1


def test_every_failed_expectation_is_reported_in_order(project: Path) -> None:
    result = kinds_test(
        project,
        HAPPY,
        ["expect status FAILED", "expect step first attempts 1", "expect step first attempts 9"],
    )
    assert failures(result) == [
        "expected status FAILED, got COMPLETED",
        "expected step `first` attempts 9, got 1",
    ]


@pytest.mark.parametrize(
    ("expected", "actual", "result"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, True),
        ({"a": None}, {}, True),
        ({"a": None}, {"a": None}, True),
        ({"a": None}, {"a": 0}, False),
        ({"a": 1}, {}, False),
        (1, 1.0, True),
        (True, 1, False),
        (1, True, False),
        ([1, 2], [1, 2], True),
        ([1], [1, 2], False),
        ([{"a": 1}], [{"a": 1, "b": 2}], True),
        ("x", "x", True),
        ({"a": 1}, [1], False),
    ],
)
def test_expected_values_match_partially(expected: Any, actual: Any, result: bool) -> None:
    assert matches(expected, actual) is result


def test_compensation_that_failed(project: Path) -> None:
    body = SAD.replace("returns { undone: true }", 'fails "UNDO_BROKEN"')
    result = kinds_test(project, body, ["expect compensated first"])
    assert failures(result) == [
        "expected step `first` to be compensated, but its compensation ended FAILED"
    ]


def test_runs_of_a_workflow_with_continue_as_new(project: Path) -> None:
    text = (CHAPTER / "0124.orbit").read_text().replace('"subscription', '"examples/subscription')
    write(project, "runs.test.orbit", text.replace("expect runs 3", "expect runs 2"))
    result = orbit_test("--format", "json", "runs.test.orbit")
    assert failures(result) == ["expected runs 2, got 3"]


# ---- mocks


def test_returns_reads_the_task_input_and_the_execution(project: Path) -> None:
    body = HAPPY.replace(
        'tag: "t" + string(input.n)',
        'tag: execution.id + "/" + execution.workflow + "@" + execution.version',
    )
    result = kinds_test(
        project, body, ['expect step first output { n: 60, tag: "sim/Kinds@1.0.0" }']
    )
    assert failures(result) == []


def test_fails_is_permanent_with_the_default_message(project: Path) -> None:
    body = SAD.replace(
        'mock "work.run" returns { n: input.n * 10, tag: "t" + string(input.n) }',
        'mock "work.run" fails "BROKEN"',
    )
    result = kinds_test(project, body, ["expect step first attempts 1", 'expect error "BROKEN"'])
    assert failures(result) == []
    report = json.loads(result.stdout)["tests"][0]
    assert (
        report["execution"]["error"]["message"]
        == "step `first` failed: mocked failure of `work.run`"
    )


def test_fails_with_a_message(project: Path) -> None:
    body = SAD.replace(
        'mock "work.run" returns { n: input.n * 10, tag: "t" + string(input.n) }',
        'mock "work.run" fails "BROKEN" "it broke"',
    )
    result = kinds_test(project, body, ["expect status COMPLETED"])
    (message,) = failures(result)
    assert (
        message == "expected status COMPLETED, got FAILED (BROKEN: step `first` failed: it broke)"
    )


def test_retryable_failures_follow_the_retry_policy(project: Path) -> None:
    # `first` has 3 attempts 10 s apart; every call fails.
    body = SAD.replace(
        'mock "work.run" returns { n: input.n * 10, tag: "t" + string(input.n) }',
        'mock "work.run" fails "FLAKY" retryable',
    )
    result = kinds_test(project, body, ["expect step first attempts 3", 'expect error "FLAKY"'])
    assert failures(result) == []
    assert json.loads(result.stdout)["tests"][0]["execution"]["simulated_ms"] == 20_000


def test_times_then_counts_calls_per_unit(project: Path) -> None:
    # Each unit counts its own calls: `first` and the compensations of both
    # elements of `each` each get one failure first. `first` is retried
    # after 10 s; compensations have no retry policy, so they fail for good.
    body = SAD.replace(
        'mock "work.run" returns { n: input.n * 10, tag: "t" + string(input.n) }',
        'mock "work.run" fails "FLAKY" retryable times 1 then returns { n: input.n, tag: "x" }',
    ).replace(
        'mock "work.undo" returns { undone: true }',
        'mock "work.undo" fails "NOPE" times 1 then returns { undone: true }',
    )
    result = kinds_test(
        project,
        body,
        [
            "expect step first attempts 2",
            "expect step first output { n: 6 }",
            "expect compensated each",
        ],
    )
    assert failures(result) == [
        "expected step `each` to be compensated, but its compensation ended FAILED"
    ]
    test = json.loads(result.stdout)["tests"][0]
    assert test["execution"]["simulated_ms"] == 10_000 + 3 * 86_400_000


def test_hangs_until_the_attempt_timeout(project: Path) -> None:
    # `first` times out after 1 minute, three times, 10 s apart.
    body = SAD.replace(
        'mock "work.run" returns { n: input.n * 10, tag: "t" + string(input.n) }',
        'mock "work.run" hangs',
    )
    result = kinds_test(project, body, ['expect error "TIMEOUT"', "expect step first attempts 3"])
    assert failures(result) == []
    assert json.loads(result.stdout)["tests"][0]["execution"]["simulated_ms"] == 3 * 60_000 + 20_000


def test_hangs_without_a_timeout_cannot_finish(project: Path) -> None:
    # `each` has no timeout: a hanging element can never end.
    body = HAPPY.replace(
        'mock "work.item" returns { n: input.n }',
        'mock "work.item" hangs',
    )
    result = kinds_test(project, body, ["expect status COMPLETED"])
    assert failures(result) == [
        "the execution cannot make progress: step `each[0]` waits for task `work.item`, whose "
        "mock hangs, and the step has no timeout"
    ]
    assert result.exit_code == 1


def test_an_unmocked_task_names_the_task_and_step(project: Path) -> None:
    body = HAPPY.replace('    mock "mail.send" returns { sent: true }\n', "")
    result = kinds_test(project, body, ["expect status COMPLETED"])
    assert failures(result) == [
        'task `mail.send` (step `tell`) is not mocked; add `mock "mail.send" returns { ... }` '
        "to the test"
    ]


def test_an_unmocked_task_in_the_human_report(project: Path) -> None:
    write(
        project,
        "t.test.orbit",
        DECLINED.replace('    mock "notifications.send" returns { delivered: true }\n', "").replace(
            'fails "CARD_DECLINED" "insufficient funds"',
            'returns { transaction_id: "x", status: "ok" }',
        ),
    )
    result = orbit_test("t.test.orbit")
    assert result.exit_code == 1
    assert (
        "  ✗ task `notifications.send` (step `notify`) is not mocked; add "
        '`mock "notifications.send" returns { ... }` to the test\n'
    ) in result.stdout


# ---- signals and time


def test_signals_and_timers_over_days(project: Path) -> None:
    # `wait` takes the signal at once; `rest` sleeps 2 days; the child runs.
    result = kinds_test(project, HAPPY, ["expect status COMPLETED", "expect step rest SUCCEEDED"])
    test = json.loads(result.stdout)["tests"][0]
    assert test["failures"] == []
    assert test["execution"]["simulated_ms"] == 2 * 86_400_000


def test_an_await_timeout_is_reached_by_jumping_the_clock(project: Path) -> None:
    result = kinds_test(project, SAD, ["expect step wait FAILED"])
    test = json.loads(result.stdout)["tests"][0]
    assert test["failures"] == []
    assert test["execution"]["simulated_ms"] == 3 * 86_400_000


def test_a_signal_never_waited_for(project: Path) -> None:
    text = (CHAPTER / "0009.orbit").read_text().replace('"approval', '"examples/approval')
    # A small order skips the review, so the signal is never sent.
    text = text.replace("amount: 2500.0", "amount: 25.0").replace(
        "    expect step decision SUCCEEDED\n", ""
    )
    write(project, "s.test.orbit", text)
    result = orbit_test("--format", "json", "s.test.orbit")
    assert failures(result) == [
        "signal `review` was never sent: the execution finished without waiting for it"
    ]


def test_an_await_without_timeout_and_no_signal_cannot_finish(project: Path) -> None:
    write(
        project,
        "w.orbit",
        'workflow W {\n    version "1.0.0"\n    signal go {}\n    step wait { await go }\n}\n',
    )
    write(
        project,
        "w.test.orbit",
        'import "w.orbit"\n\ntest "t" {\n    workflow W\n    expect status COMPLETED\n}\n',
    )
    result = orbit_test("w.test.orbit")
    assert result.exit_code == 1
    assert (
        "  ✗ the execution cannot make progress: step `wait` waits for signal `go`, "
        "and no signal is left to send\n"
    ) in result.stdout


def test_child_timelines_follow_the_parent(project: Path) -> None:
    result = kinds_test(project, HAPPY, ["expect status FAILED"])
    write(project, "k.test.orbit", (project / "kinds.test.orbit").read_text())
    human = orbit_test("k.test.orbit")
    assert human.exit_code == 1
    main = human.stdout.index("  timeline of execution `sim`:")
    child = human.stdout.index("  timeline of execution `sim.child`:")
    assert main < child
    assert json.loads(result.stdout)["tests"][0]["failures"] == [
        "expected status FAILED, got COMPLETED"
    ]


# ---- bad input


def test_an_unknown_step_is_a_located_compile_error(project: Path) -> None:
    result = kinds_test(project, HAPPY, ["expect step frist SUCCEEDED"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["tests"] == []
    (diagnostic,) = report["diagnostics"]
    assert diagnostic["code"] == "E0706"
    assert diagnostic["location"] == {"file": "kinds.test.orbit", "line": 11, "column": 17}


def test_an_unknown_task_is_a_located_compile_error(project: Path) -> None:
    write(
        project,
        "u.test.orbit",
        DECLINED.replace('mock "notifications.send"', 'mock "notifications.sned"'),
    )
    result = orbit_test("u.test.orbit")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error[E0703]: `OrderApproval` does not call task `notifications.sned`" in result.stderr
    assert "--> u.test.orbit:7:10" in result.stderr
    assert result.stderr.endswith("error: compilation failed: 1 error(s), 0 warning(s)\n")


def test_an_expectation_that_does_not_type_check(project: Path) -> None:
    result = kinds_test(project, HAPPY, ['expect output { total: "sixty" }'])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["tests"] == []
    assert [d["code"] for d in report["diagnostics"]] == ["E0400"]
    assert report["diagnostics"][0]["location"]["line"] == 11


def test_no_files(project: Path) -> None:
    result = orbit_test()
    assert (result.exit_code, result.stderr) == (1, "error: no input files\n")


# ---- speed


def test_a_hundred_tests_with_hours_of_simulated_time_run_quickly(project: Path) -> None:
    tests = []
    for i in range(100):
        tests.append(
            f'test "t{i}" {{\n    workflow Kinds\n    input {{ n: {i} }}\n{HAPPY}'
            "    expect status COMPLETED\n}\n"
        )
    write(project, "many.test.orbit", 'import "examples/kinds.orbit"\n\n' + "\n".join(tests))
    began = time.process_time()
    result = orbit_test("many.test.orbit")
    spent = time.process_time() - began
    assert result.exit_code == 0, result.stdout[-2000:]
    assert "100 passed" in result.stdout
    # About 0.5 s on a quiet machine; the bound leaves room for a busy one.
    assert spent < 5.0


def test_the_built_in_http_task_is_mocked_like_any_other(project: Path) -> None:
    write(
        project,
        "charge.orbit",
        (
            HERE.parents[1] / "tests" / "book" / "examples" / "28-http-adapter" / "0101.orbit"
        ).read_text(),
    )
    write(
        project,
        "h.test.orbit",
        'import "charge.orbit"\n\ntest "http is mocked" {\n    workflow Charge\n'
        '    input { order_id: "A", amount: 2.0 }\n'
        '    mock "orbit.http.request" fails "HTTP_503" retryable times 2\n'
        '        then returns { status: 201, headers: {}, body: { id: "ch_1" } }\n'
        "    expect status COMPLETED\n    expect step charge attempts 3\n"
        "    expect step charge output { status: 201 }\n}\n",
    )
    result = orbit_test("h.test.orbit")
    assert result.exit_code == 0, result.output
    # Retries after 500 ms and 1 s: no request ever left the process.
    assert "ok      http is mocked (1.5s simulated)\n" in result.stdout


def test_a_test_and_a_simulation_honour_flow_control(project: Path) -> None:
    """The simulator runs the engine itself, so a workflow's debounce,
    concurrency and rate hold there as on a server: the debounced execution
    starts after its quiet period of simulated time (issue 39)."""
    source = write(
        project,
        "flow.orbit",
        """
task "demo.work" {
    version "1.0.0"
    input { customer_id: String }
    output {}
}

workflow Quiet {
    version "1.0.0"
    input { customer_id: String }
    debounce { period: 10s, key: input.customer_id }
    concurrency { max: 1, key: input.customer_id }
    rate { max: 1, per: 1m, key: input.customer_id }

    step work {
        worker "demo.work"
        with { customer_id: input.customer_id }
    }
}

test "a debounced start runs after its quiet period" {
    workflow Quiet
    input { customer_id: "c-1" }
    mock "demo.work" returns {}
    expect status COMPLETED
}
""",
    )
    result = orbit_test(source)
    assert result.exit_code == 0, result.output
    assert "ok      a debounced start runs after its quiet period (10.0s simulated)" in (
        result.stdout
    )
    simulated = CliRunner().invoke(cli, ["simulate", source, "-i", '{"customer_id": "c-1"}'])
    assert simulated.exit_code == 0, simulated.output
    assert "WorkflowWaiting           reason=debounce" in simulated.stdout
    assert "elapsed: 10.0s" in simulated.stdout
