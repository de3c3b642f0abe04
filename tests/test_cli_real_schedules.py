"""`orbit schedule ...` against a real `orbit server`, compared with the
transcripts of chapters 41 and 66 (times masked): create, list, trigger
(started and skipped by the overlap policy), get, update, pause, resume and
delete, `orbit status` of a scheduled execution, and the errors: each one
line on stderr, exit status 1 for the API's refusals and 2 for bad
arguments. No worker runs, so started executions stay RUNNING."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from cli_real import REPO, Orbit, one_error_line
from e2e.e2e_transcripts import same
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(120)

ORDERS = REPO / "tests" / "book" / "support" / "order_processing.orbit"
NIGHTLY_INPUT = (
    '{"order_id": "N-1", "customer_id": "cust-1", "amount": 120.0, '
    '"items": [{"sku": "BOOK-1", "quantity": 1}]}'
)


@pytest.fixture(scope="module")
def orbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Orbit]:
    db = tmp_path_factory.mktemp("cli-schedules") / "orbit.db"
    with ServerProcess(db) as proc:
        orbit = Orbit(f"http://{proc.addr}")
        orbit.ok("deploy", str(ORDERS))
        yield orbit


def create_nightly(orbit: Orbit) -> str:
    return orbit.ok(
        "schedule", "create", "nightly-orders", "--workflow", "OrderProcessing",
        "--cron", "0 2 * * *", "--timezone", "Europe/Berlin",
        "--input", NIGHTLY_INPUT, "--description", "Nightly reconciliation order",
    ).stdout  # fmt: skip


def test_the_schedules_of_chapters_41_and_66(orbit: Orbit) -> None:
    same(
        create_nightly(orbit),
        """\
        active nightly-orders  cron "0 2 * * *" Europe/Berlin
          workflow:   OrderProcessing (latest version)
          input:      {"order_id":"N-1","customer_id":"cust-1","amount":120.0,"items":[{"sku":"BOOK-1","quantity":1}]}
          overlap:    skip   catchup: skip_missed
          description: Nightly reconciliation order
          fired:      0   skipped: 0
          last fire:  -
          last run:   -
          next fires:
            2026-11-16T01:00:00Z
            2026-11-17T01:00:00Z
            2026-11-18T01:00:00Z
            2026-11-19T01:00:00Z
            2026-11-20T01:00:00Z
        """,
    )
    orbit.ok(
        "schedule", "create", "hourly-check", "--workflow", "OrderProcessing",
        "--every", "1h", "--jitter", "30s", "--input", NIGHTLY_INPUT,
    )  # fmt: skip
    same(
        orbit.ok("schedule", "list").stdout,
        """\
        SCHEDULE                 WORKFLOW             TIMING                           STATE    NEXT FIRE              LAST EXECUTION
        hourly-check             OrderProcessing      every 1h                         active   2026-11-15T19:00:12.359Z -
        nightly-orders           OrderProcessing      cron "0 2 * * *" Europe/Berlin   active   2026-11-16T01:00:00Z   -
        """,
    )

    started = orbit.ok("schedule", "trigger", "nightly-orders").stdout
    same(started, "started execution nightly-orders:manual:2026-11-15T18:52:22.296Z\n")
    # Chapter 66's `schedule get` shows the schedule after the first trigger;
    # the second, skipped by the overlap policy, then counts as skipped.
    same(
        orbit.ok("schedule", "get", "nightly-orders").stdout,
        """\
        active nightly-orders  cron "0 2 * * *" Europe/Berlin
          workflow:   OrderProcessing (latest version)
          input:      {"order_id":"N-1","customer_id":"cust-1","amount":120.0,"items":[{"sku":"BOOK-1","quantity":1}]}
          overlap:    skip   catchup: skip_missed
          description: Nightly reconciliation order
          fired:      1   skipped: 0
          last fire:  -
          last run:   nightly-orders:manual:2026-11-15T18:52:22.296Z
          next fires:
            2026-11-16T01:00:00Z
            2026-11-17T01:00:00Z
            2026-11-18T01:00:00Z
            2026-11-19T01:00:00Z
            2026-11-20T01:00:00Z
        """,
    )
    same(
        orbit.ok("schedule", "trigger", "nightly-orders").stdout,
        "not started: the previous execution of nightly-orders is still running (overlap: skip)\n",
    )
    assert "  fired:      1   skipped: 1\n" in orbit.ok("schedule", "get", "nightly-orders").stdout
    execution = started.split()[-1]
    status = orbit.ok("status", execution).stdout.splitlines()
    assert status[0].startswith(f"RUNNING {execution}  OrderProcessing@1.0.0")
    assert status[1] == "  schedule: nightly-orders"
    document = json.loads(orbit.ok("schedule", "get", "nightly-orders", "--json").stdout)
    assert (document["last_execution_id"], document["fired"]) == (execution, 1)

    same(orbit.ok("schedule", "pause", "hourly-check").stdout, "schedule hourly-check paused\n")
    paused = orbit.ok("schedule", "get", "hourly-check").stdout
    assert paused.startswith("paused hourly-check  every 1h\n") and "next fires: -" in paused
    same(
        orbit.ok("schedule", "resume", "hourly-check").stdout,
        "schedule hourly-check resumed; next fire 2026-11-15T19:00:12.359Z\n",
    )
    same(orbit.ok("schedule", "delete", "hourly-check").stdout, "schedule hourly-check deleted\n")
    assert "hourly-check" not in orbit.ok("schedule", "list").stdout
    orbit.ok("cancel", execution)


def test_update_changes_what_it_names(orbit: Orbit) -> None:
    orbit.ok(
        "schedule", "create", "reconcile", "--workflow", "OrderProcessing",
        "--every", "15m", "--input", NIGHTLY_INPUT, "--paused",
    )  # fmt: skip
    changed = orbit.ok(
        "schedule", "update", "reconcile", "--cron", "*/30 * * * *", "--overlap",
        "cancel-previous", "--catchup", "run-once", "--jitter", "5s",
    ).stdout  # fmt: skip
    lines = changed.splitlines()
    assert lines[0] == 'paused reconcile  cron "*/30 * * * *"'
    assert "  overlap:    cancel_previous   catchup: run_once" in lines
    assert "  jitter:     5s" in lines
    back = orbit.ok("schedule", "update", "reconcile", "--every", "1h").stdout
    assert back.startswith("paused reconcile  every 1h\n")
    orbit.ok("schedule", "delete", "reconcile")


def test_errors_are_one_line(orbit: Orbit) -> None:
    def refused(*args: str) -> str:
        result = orbit("schedule", *args)
        assert result.exit_code == 1, result.output
        return one_error_line(result)

    base = ("create", "bad", "--workflow", "OrderProcessing", "--input", NIGHTLY_INPUT)
    assert refused(*base, "--cron", "0 25 * * *") == (
        "error: INVALID_SCHEDULE (400): cron `0 25 * * *`: `25` is out of range for the hour "
        "field (0-23)"
    )
    assert refused(*base, "--cron", "0 2 * * *", "--timezone", "Mars/Base") == (
        "error: INVALID_SCHEDULE (400): timezone `Mars/Base`: unknown time zone "
        "(expected an IANA name such as Europe/Berlin)"
    )
    assert refused(*base, "--every", "-5m") == (
        "error: INVALID_SCHEDULE (400): interval `-5m`: must not be negative"
    )
    wrong = '{"order_id": 7, "customer_id": "c", "amount": 1.0, "items": []}'
    assert refused(
        "create", "bad", "--workflow", "OrderProcessing", "--every", "1h", "--input", wrong
    ) == (
        "error: INVALID_INPUT (400): the schedule input is invalid for OrderProcessing@1.0.0 "
        "at $.order_id: expected String, found an integer"
    )
    assert refused("create", "bad", "--workflow", "Nope", "--every", "1h") == (
        "error: WORKFLOW_NOT_FOUND (404): workflow Nope is not registered"
    )
    assert refused(*base[:4], "--every", "1h", "--input", "{").startswith(
        "error: --input is not valid JSON: "
    )
    assert refused("get", "bad") == "error: SCHEDULE_NOT_FOUND (404): schedule `bad` not found"
    for action in ("pause", "resume", "trigger", "delete"):
        assert refused(action, "bad").startswith("error: SCHEDULE_NOT_FOUND (404)")
    create_nightly_twice = orbit(
        "schedule", "create", "dup", "--workflow", "OrderProcessing", "--every", "1h",
        "--input", NIGHTLY_INPUT,
    )  # fmt: skip
    assert create_nightly_twice.exit_code == 0
    again = orbit(
        "schedule", "create", "dup", "--workflow", "OrderProcessing", "--every", "1h",
        "--input", NIGHTLY_INPUT,
    )  # fmt: skip
    assert one_error_line(again) == ("error: SCHEDULE_EXISTS (409): schedule `dup` already exists")
    orbit.ok("schedule", "delete", "dup")

    for args in (
        ("create", "x", "--workflow", "W"),
        ("create", "x", "--workflow", "W", "--cron", "* * * * *", "--every", "1m"),
        ("create", "x", "--every", "1m"),
        ("create", "x", "--workflow", "W", "--every", "1m", "--overlap", "queue"),
        ("update", "x"),
        ("update", "x", "--cron", "* * * * *", "--every", "1m"),
    ):
        assert orbit("schedule", *args).exit_code == 2, args
    listed = orbit.ok("schedule", "list").stdout.splitlines()[1:]
    assert not [line for line in listed if line.startswith(("bad ", "x "))]
