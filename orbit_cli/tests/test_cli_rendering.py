"""The pieces the commands print with: durations, timeline lines, unit rows, redaction."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orbit_cli import execution
from orbit_cli.ir_summary import source_duration
from orbit_cli.output import duration, json_error
from orbit_cli.redact import redact, redact_event, redact_state
from orbit_cli.timeline import event_line


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0ms"),
        (539, "539ms"),
        (999, "999ms"),
        (1000, "1.0s"),
        (1597, "1.6s"),
        (5100, "5.1s"),
        (59_940, "59.9s"),
        (134_000, "2m14s"),
        (135_500, "2m15s"),
        (3_900_000, "1h05m"),
        (-5, "0ms"),
    ],
)
def test_duration(ms: int, text: str) -> None:
    assert duration(ms) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (250, "250ms"),
        (1500, "1.5s"),
        (10_000, "10s"),
        (300_000, "5m"),
        (8_100_000, "2h15m"),
        (108_000_000, "1d6h"),
        (172_800_000, "2d"),
    ],
)
def test_source_duration(ms: int, text: str) -> None:
    assert source_duration(ms) == text


def test_json_errors_read_like_the_runtime() -> None:
    for text, message in [
        ("x", "expected value at line 1 column 1"),
        ("{} {}", "trailing characters at line 1 column 4"),
    ]:
        with pytest.raises(json.JSONDecodeError) as raised:
            json.loads(text)
        assert json_error(raised.value) == message


def test_timeline_fields_and_alignment() -> None:
    start = 1_000
    line = event_line(
        {
            "seq": 6,
            "timestamp_ms": 6_100,
            "type": "StepScheduled",
            "step": "work",
            "attempt": 1,
            "input": {},
            "idempotency_key": "k",
            "redelivery": True,
        },
        start,
    )
    assert line == "+    5.1s   #6  StepScheduled             step=work attempt=1 redelivery=true"
    assert event_line(
        {
            "seq": 13,
            "timestamp_ms": 1_000,
            "type": "LimitExceeded",
            "limit": "max_history_events",
            "message": "m",
        },
        start,
    ) == ("+     0ms  #13  LimitExceeded             limit=max_history_events")
    assert event_line(
        {
            "seq": 8,
            "timestamp_ms": 1_017,
            "type": "StaleResultIgnored",
            "step": "v",
            "token": "t",
            "outcome": "duplicate",
        },
        start,
    ).endswith("StaleResultIgnored        step=v outcome=duplicate")
    created = event_line(
        {
            "seq": 1,
            "timestamp_ms": 1_000,
            "type": "WorkflowCreated",
            "workflow": "W",
            "input": {},
            "schedule_id": "nightly",
        },
        start,
    )
    assert created.endswith("WorkflowCreated           schedule_id=nightly")
    handlers = event_line(
        {
            "seq": 15,
            "timestamp_ms": 1_151,
            "type": "HandlersStarted",
            "kind": "failure",
            "compensation": "none",
        },
        start,
    )
    assert handlers == "+   151ms  #15  HandlersStarted           kind=failure"


def test_redaction_follows_the_security_chapter() -> None:
    value = {
        "Password": "p",
        "api_key": "k",
        "headers": {"authorization": "Bearer x", "idempotency-key": "i"},
        "items": [{"card_number": "4111", "sku": "A"}],
        "token": "t",
        "tokens": [["t", 1]],
        "keep": 1,
    }
    assert redact(value) == {
        "Password": "***",
        "api_key": "***",
        "headers": {"authorization": "***", "idempotency-key": "i"},
        "items": [{"card_number": "***", "sku": "A"}],
        "token": "***",
        "tokens": "***",
        "keep": 1,
    }
    event = {"type": "StepDispatched", "token": "3d93", "input": {"token": "secret"}}
    assert redact_event(event) == {
        "type": "StepDispatched",
        "token": "3d93",
        "input": {"token": "***"},
    }
    state = {
        "id": "x",
        "input": {"secret": "s"},
        "units": {"a": {"token": "t1", "tokens": [["t1", 1]]}},
    }
    assert redact_state(state) == {
        "id": "x",
        "input": {"secret": "***"},
        "units": {"a": {"token": "t1", "tokens": "***"}},
    }


def test_units_keep_the_servers_order_and_leave_out_untouched_ones() -> None:
    # The server lists units in the order they last changed; timestamps
    # (here out of order on purpose) must not reorder them.
    state = {
        "units": {
            "second": {"status": "SUCCEEDED", "finished_at_ms": 10},
            "pending": {"attempt": 0},
            "first": {"status": "SUCCEEDED", "finished_at_ms": 9},
            "late": {"status": "SCHEDULED", "scheduled_at_ms": 1},
        }
    }
    assert [k for k, _ in execution.touched_units(state)] == ["second", "first", "late"]


def test_follower_reports_each_new_status_once() -> None:
    follower = execution.Follower()
    retry = {
        "status": "RETRY_WAIT",
        "attempt": 1,
        "last_error": {"message": "server responded 503"},
    }
    # Chapter 62's line: the unit's status, as the other lines give theirs.
    assert follower.observe({"units": {"a": retry}}) == [
        "  ↻ a                              retry_wait server responded 503"
    ]
    assert follower.observe({"units": {"a": retry}}) == []
    again = {**retry, "attempt": 2}
    assert len(follower.observe({"units": {"a": again}})) == 1
    assert follower.observe({"units": {"a": {"status": "DISPATCHED", "attempt": 3}}}) == []
    skipped = follower.observe({"units": {"b": {"status": "SKIPPED", "finished_at_ms": 5}}})
    assert skipped == ["  ↷ b                              skipped "]


def test_fixture_states_list_units_as_the_runtime_would() -> None:
    """The CLI keeps the server's unit order, so the fake runtime's final
    states must list units as orbit_core's state document does for their
    histories."""
    from cli_fake_runtime import FIXTURES, load_fixture

    from orbit_core import events
    from orbit_core.state import fold

    checked = 0
    for path in sorted((FIXTURES / "executions").glob("*.json")):
        doc = load_fixture(f"executions/{path.name}")
        history = [events.from_json(e) for e in doc["history"]["events"]]
        if not history:
            continue
        expected = list(fold(history, doc["states"][-1]["id"]).to_json()["units"])
        assert list(doc["states"][-1]["units"]) == expected, path.name
        checked += 1
    assert checked >= 7


WAITING_STATE: dict[str, Any] = {  # JSON
    "status": "RUNNING",
    "units": {"compose": {"status": "SCHEDULED", "attempt": 1, "scheduled_at_ms": 5}},
    "waiting_for": [
        {
            "task": "greeting.compose",
            "contract_version": "1.0.0",
            "runtime": "typescript",
            "units": ["compose"],
            "queued": 1,
            "since_ms": 5,
            "serving": 0,
            "workers": [{"worker_id": "py-1", "runtime": "python", "contract_version": "1.0.0"}],
        }
    ],
}


def test_follower_reports_a_task_no_worker_serves_after_a_few_seconds() -> None:
    now = [100.0]
    follower = execution.Follower(clock=lambda: now[0])
    assert follower.observe(WAITING_STATE) == ["  · compose                        scheduled "]
    now[0] += execution.WAIT_NOTICE_S - 0.1
    assert follower.observe(WAITING_STATE) == []
    now[0] += 0.2
    assert follower.observe(WAITING_STATE) == [
        "  … compose                        no worker is polling for greeting.compose@1.0.0"
        " on runtime typescript",
        "    connected for greeting.compose: py-1 (python, 1.0.0)",
    ]
    now[0] += 10
    assert follower.observe(WAITING_STATE) == []
    served = {**WAITING_STATE, "waiting_for": [{**WAITING_STATE["waiting_for"][0], "serving": 1}]}
    assert follower.observe(served) == []


def test_status_row_of_a_task_no_worker_serves() -> None:
    waiting = execution.unserved(WAITING_STATE)
    row = execution.table_row("compose", WAITING_STATE["units"]["compose"], waiting.get("compose"))
    assert row.endswith("  no worker is polling for greeting.compose@1.0.0 on runtime typescript")
    no_one = {**WAITING_STATE["waiting_for"][0], "workers": [], "runtime": "any"}
    assert execution.no_worker(no_one) == "no worker is polling for greeting.compose@1.0.0"
    assert execution.connected_workers(no_one) == "no worker connected for greeting.compose"


def test_a_running_execution_has_been_running_until_now() -> None:
    # Issue 24: `elapsed` once stopped at the last change (6ms for an
    # execution running for 20 s).
    running = {"status": "RUNNING", "created_at_ms": 1_000, "updated_at_ms": 1_006}
    assert execution.elapsed_ms(running, now_ms=21_000) == 20_000
    assert execution.elapsed_ms({**running, "status": "COMPENSATING"}, now_ms=5_000) == 4_000
    done = {**running, "status": "COMPLETED", "finished_at_ms": 1_500}
    assert execution.elapsed_ms(done, now_ms=21_000) == 500
    failed = {**running, "status": "FAILED"}
    assert execution.elapsed_ms(failed, now_ms=21_000) == 6


def test_timeline_migration_line() -> None:
    migrated = {
        "seq": 7,
        "timestamp_ms": 7_000,
        "type": "WorkflowMigrated",
        "from_version": "1.0.0",
        "from_hash": "sha256:a",
        "to_version": "2.0.0",
        "to_hash": "sha256:b",
        "migration_hash": "sha256:c",
        "input": {"id": "ap-1"},
        "renamed": {},
    }
    assert event_line(migrated, 1_000) == (
        "+    6.0s   #7  WorkflowMigrated          from_version=1.0.0 to_version=2.0.0"
    )
    renamed = event_line({**migrated, "renamed": {"b": "pause", "a": "start"}}, 1_000)
    assert renamed.endswith("to_version=2.0.0 renamed=a->start,b->pause")
