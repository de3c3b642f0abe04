"""Every runtime command against the fake runtime, compared with the book's transcripts."""

from __future__ import annotations

from pathlib import Path

import cli_ir
import pytest
from cli_fake_runtime import FakeRuntime
from conftest import Golden, Orbit

from orbit_cli import output

HELLO = "99e811dd-7448-41cc-ac28-bc58d50200d2"
FLAKY = "d599b57e-eee0-412e-b679-df8276005035"


def test_run_follows_the_quick_start_execution(
    fake: FakeRuntime, orbit: Orbit, golden: Golden, tmp_path: Path
) -> None:
    fake.bind_start("Hello", HELLO)
    ir = cli_ir.write(tmp_path / "hello.json", cli_ir.hello())
    result = orbit("run", str(ir), "--input", '{"name": "Ada"}')
    assert result.exit_code == 0, result.output
    golden("run_hello", result.output)
    assert result.stdout == '{\n  "greeting": "Hello, Ada!!!"\n}\n'
    start = next(r for r in fake.requests if r["path"] == "/v1/executions")
    assert start["body"] == {"workflow": "Hello", "version": "1.0.0", "input": {"name": "Ada"}}


def test_run_reports_a_failed_execution_and_exits_1(
    fake: FakeRuntime, orbit: Orbit, golden: Golden, tmp_path: Path
) -> None:
    defn = cli_ir.hello("1.1.0")
    fake.register("Hello", "1.1.0", defn.definition_hash)
    fake.bind_start("Hello", FLAKY)
    ir = cli_ir.write(tmp_path / "hello.json", defn)
    result = orbit("run", str(ir), "--input", '{"name": "Flaky Grace", "excitement": 30}')
    assert result.exit_code == 1
    golden("run_hello_failure", result.output)
    assert result.stdout == ""


def test_run_by_name_shows_scheduled_and_cancelled_units(
    fake: FakeRuntime, orbit: Orbit, golden: Golden
) -> None:
    fake.register("Demo", "1.0.0", "sha256:d5f75dbf860e")
    fake.bind_start("Demo", "timeout-1")
    result = orbit("run", "Demo", "--id", "timeout-1")
    assert result.exit_code == 1
    golden("run_timeout_1", result.output)


def test_run_by_name_with_a_short_input_flag(
    fake: FakeRuntime, orbit: Orbit, golden: Golden
) -> None:
    fake.register("HttpPing", "1.0.0", "sha256:0c0d025d4d99")
    fake.bind_start("HttpPing", "ping-1")
    result = orbit("run", "HttpPing", "--id", "ping-1", "-i", '{"url":"http://example.invalid"}')
    assert result.exit_code == 1
    golden("run_ping_1", result.output)
    start = next(r for r in fake.requests if r["path"] == "/v1/executions")
    assert start["body"] == {
        "workflow": "HttpPing",
        "input": {"url": "http://example.invalid"},
        "execution_id": "ping-1",
    }


@pytest.mark.parametrize(
    ("execution", "name"),
    [
        (HELLO, "status_hello"),
        (FLAKY, "status_hello_failure"),
        ("order-1001", "status_order_1001"),
        ("order-1002", "status_order_1002"),
        ("batch-1", "status_batch_1"),
        ("order-A-100", "status_order_A_100"),
        ("inbox-1", "status_inbox_1"),
    ],
)
def test_status(fake: FakeRuntime, orbit: Orbit, golden: Golden, execution: str, name: str) -> None:
    fake.add_execution(execution).polls = 99  # the final state
    result = orbit("status", execution)
    assert result.exit_code == 0, result.output
    golden(name, result.stdout)


def test_status_of_an_execution_waiting_for_a_signal(
    fake: FakeRuntime, orbit: Orbit, golden: Golden, monkeypatch: pytest.MonkeyPatch
) -> None:
    execution = fake.add_execution("order-A-100")
    # A running execution's elapsed time runs to now: the book's `status`
    # came 1 ms after the start.
    now_ms = int(execution.states[-1]["created_at_ms"]) + 1
    monkeypatch.setattr("orbit_cli.execution.wall_ms", lambda: now_ms)
    result = orbit("status", "order-A-100")
    golden("status_order_A_100_waiting", result.stdout)


@pytest.mark.parametrize(
    ("execution", "name"),
    [
        (HELLO, "logs_hello"),
        (FLAKY, "logs_hello_failure"),
        ("order-1002", "logs_order_1002"),
        ("timeout-1", "logs_timeout_1"),
        ("batch-1", "logs_batch_1"),
        ("order-A-100", "logs_order_A_100"),
    ],
)
def test_logs(fake: FakeRuntime, orbit: Orbit, golden: Golden, execution: str, name: str) -> None:
    fake.add_execution(execution)
    result = orbit("logs", execution)
    assert result.exit_code == 0, result.output
    golden(name, result.stdout)


def test_logs_of_earlier_runs(fake: FakeRuntime, orbit: Orbit, golden: Golden) -> None:
    fake.add_execution("inbox-1")
    golden("logs_inbox_1_run_1", orbit("logs", "inbox-1", "--run", "1").stdout)
    golden("logs_inbox_1_run_2", orbit("logs", "inbox-1", "--run", "2").stdout)
    head = orbit("logs", "inbox-1", "--run", "2", "--json").stdout.splitlines()[:4]
    golden("logs_inbox_1_run_2_json_head", "\n".join(head) + "\n")
    assert [r["query"] for r in fake.requests] == [{"run": "1"}, {"run": "2"}, {"run": "2"}]


def test_logs_of_a_run_that_does_not_exist(fake: FakeRuntime, orbit: Orbit) -> None:
    fake.add_execution("inbox-1")
    result = orbit("logs", "inbox-1", "--run", "7")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: RUN_NOT_FOUND (404): execution `inbox-1` has runs 1 to 3; there is no run 7\n"
    )


def test_logs_json_prints_the_raw_events(fake: FakeRuntime, orbit: Orbit, golden: Golden) -> None:
    fake.add_execution("order-1002")
    lines = orbit("logs", "order-1002", "--json").stdout.splitlines()
    assert len(lines) == 27
    chosen = [
        line for line in lines if any(f'"seq":{n},' in line for n in (11, 17, 18, 19, 22, 27))
    ]
    golden("logs_order_1002_json", "\n".join(chosen) + "\n")

    fake.add_execution("order-A-100")
    lines = orbit("logs", "order-A-100", "--json").stdout.splitlines()
    golden("logs_order_A_100_json_signals", "\n".join(x for x in lines if "Signal" in x) + "\n")


def test_ps_lists_newest_first_with_ages(
    fake: FakeRuntime, orbit: Orbit, golden: Golden, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.add_execution("order-1001")
    fake.add_execution("order-1002")
    monkeypatch.setattr(output, "now_ms", lambda: 1794735367702 + 5400)
    result = orbit("ps")
    golden("ps_orders", result.stdout)
    assert fake.requests[-1]["query"] == {"limit": "20"}


def test_ps_filters(
    fake: FakeRuntime, orbit: Orbit, golden: Golden, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.add_execution(HELLO).polls = 99
    fake.add_execution("order-1002")
    monkeypatch.setattr(output, "now_ms", lambda: 1794734400000 + 314)
    result = orbit("ps", "--status", "completed", "--workflow", "Hello", "--limit", "3")
    golden("ps_hello", result.stdout)
    assert fake.requests[-1]["query"] == {"status": "COMPLETED", "workflow": "Hello", "limit": "3"}


def test_workers_list(fake: FakeRuntime, orbit: Orbit, golden: Golden) -> None:
    from cli_fake_runtime import load_fixture

    fake.workers = load_fixture("workers.json")
    result = orbit("workers", "list")
    assert result.exit_code == 0
    golden("workers_list", result.stdout)


def test_cancel_then_cancel_again(fake: FakeRuntime, orbit: Orbit, golden: Golden) -> None:
    fake.add_execution("c-1")
    first = orbit("cancel", "c-1", "--reason", "duplicate order")
    assert first.exit_code == 0
    golden("cancel", first.stdout)
    second = orbit("cancel", "c-1")
    assert second.exit_code == 1
    golden("cancel_finished", second.stderr)
    bodies = [r["body"] for r in fake.requests]
    assert bodies == [{"reason": "duplicate order"}, {}]


def test_signal_prints_the_sequence_number_alone_on_stdout(
    fake: FakeRuntime, orbit: Orbit, golden: Golden
) -> None:
    fake.add_execution("order-A-100")
    data = '{"approved": true, "reviewer": "dana", "comment": "verified by phone"}'
    result = orbit("signal", "order-A-100", "review", "--data", data)
    assert result.exit_code == 0
    assert result.stdout == "5\n"
    golden("signal_review", result.stderr)


def test_signal_errors(fake: FakeRuntime, orbit: Orbit, golden: Golden, tmp_path: Path) -> None:
    fake.add_execution("order-A-100")
    cases = {
        "signal_unknown": ("reveiw", "{}"),
        "signal_invalid_payload": ("review", '{"approved": "yes", "reviewer": "dana"}'),
        "signal_bad_json": ("review", "x"),
    }
    for name, (signal, data) in cases.items():
        result = orbit("signal", "order-A-100", signal, "--data", data)
        assert result.exit_code == 1
        assert result.stdout == ""
        golden(name, result.stderr)
    payload = tmp_path / "review.json"
    payload.write_text('{"approved": true, "reviewer": "dana"}')
    result = orbit("signal", "order-A-100", "review", "--data", f"@{payload}")
    assert result.exit_code == 1
    golden("signal_finished", result.stderr)
    missing = orbit("signal", "order-A-100", "review", "--data", "@nope.json")
    assert missing.exit_code == 1
    assert (
        missing.stderr == "error: cannot read nope.json: No such file or directory (os error 2)\n"
    )


def test_signals_before_the_await(fake: FakeRuntime, orbit: Orbit) -> None:
    fake.add_execution("batch-1")
    first = orbit("signal", "batch-1", "item", "--data", '{"sku": "A-1"}')
    second = orbit("signal", "batch-1", "item", "--data", '{"sku": "B-2", "quantity": 3}')
    assert (first.stdout, second.stdout) == ("4\n", "5\n")
    assert second.stderr == (
        "signal `item` recorded for batch-1 (history #5); the next `await item` step takes it\n"
    )


def test_query(fake: FakeRuntime, orbit: Orbit, golden: Golden) -> None:
    fake.add_execution("order-A-100")
    result = orbit("query", "order-A-100", "status")
    assert result.exit_code == 0
    golden("query_order_A_100", result.stdout)
    unknown = orbit("query", "order-A-100", "stat")
    assert unknown.exit_code == 1
    golden("query_unknown", unknown.stderr)


def test_inspect_prints_the_redacted_state(fake: FakeRuntime, orbit: Orbit) -> None:
    import json

    execution = fake.add_execution(HELLO)
    execution.polls = 1
    result = orbit("inspect", HELLO)
    assert result.exit_code == 0
    state = json.loads(result.stdout)
    compose = state["units"]["compose"]
    assert compose["tokens"] == "***"
    assert compose["idempotency_key"] == f"{HELLO}/compose"
    assert state["definition_hash"].startswith("sha256:505930b4d466")
    assert result.stdout.startswith(
        '{\n  "id": "99e811dd-7448-41cc-ac28-bc58d50200d2",\n  "workflow"'
    )
