"""What a worker logs while the runtime is away: one line when it is lost,
reminders further and further apart, one line when it answers again."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Context, Worker
from orbit_sdk._contact import Contact


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _orbit(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "orbit" and r.levelno == level]


def test_one_line_on_loss_reminders_back_off_and_one_line_on_return(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="orbit")
    clock = Clock()
    contact = Contact(clock)
    contact.answered()  # nothing was lost: nothing to say
    for _ in range(70):  # seventy seconds of retries, one a second
        contact.failed("poll failed: down; retrying in 1.0s")
        clock.now += 1
    contact.answered()
    contact.answered()

    assert _orbit(caplog, logging.WARNING) == [
        "poll failed: down; retrying in 1.0s",
        "poll failed: down; retrying in 1.0s "
        "(runtime unreachable for 10s; 9 similar lines logged at DEBUG only)",
        "poll failed: down; retrying in 1.0s "
        "(runtime unreachable for 30s; 19 similar lines logged at DEBUG only)",
    ]
    assert len(_orbit(caplog, logging.DEBUG)) == 67
    assert _orbit(caplog, logging.INFO) == ["runtime reachable again after 70.0s"]

    caplog.clear()
    contact.failed("heartbeat failed: down again")
    assert _orbit(caplog, logging.WARNING) == ["heartbeat failed: down again"]


def test_reminders_are_at_most_ten_minutes_apart(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="orbit")
    clock = Clock()
    contact = Contact(clock)
    for _ in range(3 * 3600 // 5):  # three hours, a retry every 5 s
        contact.failed("poll failed")
        clock.now += 5
    reminders = _orbit(caplog, logging.WARNING)[1:]
    away = [float(m.split("for ")[1].split("s;")[0]) for m in reminders]
    # 10 s after the loss, then twice as far apart each time, up to 600 s.
    assert away[:8] == [10, 30, 70, 150, 310, 630, 1230, 1830]
    assert {b - a for a, b in zip(away[6:], away[7:])} == {600}


def test_a_worker_logs_an_outage_once_and_its_end_once(
    fake: FakeRuntime,
    make_worker: Callable[..., Worker],
    start_worker: Callable[[Worker], Worker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="orbit")
    worker = make_worker(concurrency=4)
    worker._random = lambda: 0.05  # retries 10 ms, 20 ms ... 250 ms apart

    @worker.task("a.one")
    def echo(input: object, ctx: Context) -> dict[str, object]:
        return {}

    start_worker(worker)
    fake.wait_for(lambda: len(fake.calls_to("/v1/workers/poll")) >= 4)
    fake.stop()
    # Four poll threads and the heartbeat retry many times in the meantime.
    fake.wait_for(lambda: len(_orbit(caplog, logging.DEBUG)) >= 30, timeout=10)
    fake.restart()
    token = fake.enqueue("a.one", {})
    fake.result(token)

    warnings = _orbit(caplog, logging.WARNING)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(("poll failed: ", "heartbeat failed: "))
    assert "cannot reach ORBIT runtime at" in warnings[0]
    back = [m for m in _orbit(caplog, logging.INFO) if m.startswith("runtime reachable again")]
    assert len(back) == 1, caplog.messages


def test_a_result_the_runtime_keeps_failing_is_logged_once_and_once_delivered(
    fake: FakeRuntime,
    make_worker: Callable[..., Worker],
    start_worker: Callable[[Worker], Worker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Polls are answered while this one result is not: the worker's contact
    # with the runtime is fine, and only the result's own lines are quiet.
    caplog.set_level(logging.DEBUG, logger="orbit")
    worker = make_worker(concurrency=1)
    worker._random = lambda: 0.05

    @worker.task("a.one")
    def echo(input: object, ctx: Context) -> dict[str, object]:
        return {}

    storage = (500, {"error": {"code": "STORAGE_ERROR", "message": "not loaded"}})
    fake.script("/v1/tasks/complete", *[storage] * 6)
    start_worker(worker)
    token = fake.enqueue("a.one", {}, execution_id="e-1", step_id="s")
    fake.result(token)
    fake.wait_for(lambda: "result delivered after" in caplog.text)

    identity = '{"execution_id": "e-1", "step": "s", "attempt": 1}'
    warnings = _orbit(caplog, logging.WARNING)
    assert warnings == [
        f"result delivery failed: STORAGE_ERROR (500): not loaded; retrying in 0.0s {identity}"
    ]
    assert len(_orbit(caplog, logging.DEBUG)) == 5
    delivered = [m for m in _orbit(caplog, logging.INFO) if m.startswith("result delivered")]
    assert len(delivered) == 1 and delivered[0].endswith(f"s of retries {identity}"), delivered
    assert not [m for m in caplog.messages if m.startswith("runtime reachable again")]
