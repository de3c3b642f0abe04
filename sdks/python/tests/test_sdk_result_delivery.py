"""How a worker reports a result the runtime cannot take yet (retries) or at all (fallbacks)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from sdk_fake_runtime import Call, FakeRuntime

from orbit_sdk import Context, Worker

MakeWorker = Callable[..., Worker]
StartWorker = Callable[[Worker], Worker]

COMPLETE = "/v1/tasks/complete"
FAIL = "/v1/tasks/fail"
TOO_DEEP = (
    400,
    {"error": {"code": "INVALID_INPUT", "message": "task output is nested deeper than 64 levels"}},
)
INTERNAL = (500, {"error": {"code": "INTERNAL", "message": "internal error: RecursionError"}})
STORAGE = (500, {"error": {"code": "STORAGE_ERROR", "message": "the store is unavailable"}})


def _echo(input: Any, ctx: Context) -> dict[str, Any]:
    return {"echo": input}


def _failing(input: Any, ctx: Context) -> dict[str, Any]:
    raise ValueError("no luck")


def _always(answer: tuple[int, Any]) -> Callable[[Call], tuple[int, Any]]:
    return lambda call: answer


def _quick_worker(make_worker: MakeWorker, **options: Any) -> Worker:
    worker = make_worker(concurrency=1, **options)
    worker._random = lambda: 0.05  # retries 10 ms, 20 ms, 40 ms ... apart
    return worker


def test_a_result_refused_with_4xx_fails_the_attempt_with_the_runtimes_message(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = _quick_worker(make_worker)
    worker.register("a.one", _echo)
    fake.script(COMPLETE, TOO_DEEP)
    start_worker(worker)
    token = fake.enqueue("a.one", {"n": 1}, execution_id="e-1", step_id="s")

    result = fake.result(token)
    assert result.path == FAIL
    assert result.body == {
        "token": token,
        "error_code": "INVALID_RESULT",
        "error_message": "the runtime refused the task's result: INVALID_INPUT (400): "
        "task output is nested deeper than 64 levels",
        "retryable": False,
        "details": {
            "refused": "complete",
            "status": 400,
            "code": "INVALID_INPUT",
            "message": "task output is nested deeper than 64 levels",
        },
    }
    assert len(fake.calls_to(COMPLETE)) == 1
    assert any(
        m.startswith("result refused; reporting the attempt as failed") for m in caplog.messages
    )


def test_a_result_answered_500_several_times_is_delivered_once_the_runtime_takes_it(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    # A storage outage of a few seconds: every report is answered 500 until
    # the database is back. Giving up would leave the attempt owned by a
    # worker that keeps heartbeating, so it would never be redelivered.
    worker = _quick_worker(make_worker)
    worker.register("a.one", _echo)
    fake.script(COMPLETE, *[STORAGE] * 5, INTERNAL, (501, "not implemented"))
    start_worker(worker)
    token = fake.enqueue("a.one", {"n": 2})

    assert fake.result(token).body == {"token": token, "output": {"echo": {"n": 2}}}
    assert len(fake.calls_to(COMPLETE)) == 8
    assert not fake.calls_to(FAIL)


def test_a_failure_answered_500_several_times_is_delivered_as_it_was(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = _quick_worker(make_worker)
    worker.register("a.one", _failing)
    fake.script(FAIL, *[STORAGE] * 4)
    start_worker(worker)
    token = fake.enqueue("a.one", {})

    result = fake.result(token)
    assert result.body["error_code"] == "UNHANDLED_EXCEPTION"
    assert [call.body["error_code"] for call in fake.calls_to(FAIL)] == ["UNHANDLED_EXCEPTION"] * 5


def test_a_refused_failure_falls_back_once_and_a_refused_fallback_is_logged(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = _quick_worker(make_worker)
    worker.register("a.one", _failing)
    fake.routes[("POST", FAIL)] = _always(TOO_DEEP)
    start_worker(worker)
    fake.enqueue("a.one", {}, execution_id="e-2", step_id="s")

    fake.wait_for(lambda: len(fake.calls_to(FAIL)) == 2)
    fake.wait_for(lambda: "result refused {" in caplog.text)
    first, fallback = fake.calls_to(FAIL)
    assert first.body["error_code"] == "UNHANDLED_EXCEPTION"
    assert fallback.body["error_code"] == "INVALID_RESULT"
    assert fallback.body["details"] == {
        "refused": "fail",
        "error_code": "UNHANDLED_EXCEPTION",
        "status": 400,
        "code": "INVALID_INPUT",
        "message": "task output is nested deeper than 64 levels",
    }
    time.sleep(0.2)
    assert len(fake.calls_to(FAIL)) == 2
    assert (
        'result refused {"execution_id": "e-2", "step": "s", "attempt": 1, '
        '"error": "INVALID_INPUT (400): task output is nested deeper than 64 levels"}'
        in caplog.messages
    )


def test_a_result_refused_for_its_credentials_is_not_reported_again(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = _quick_worker(make_worker)
    worker.register("a.one", _echo)
    forbidden = (403, {"error": {"code": "FORBIDDEN", "message": "token issued to `other`"}})
    fake.script(COMPLETE, forbidden)
    start_worker(worker)
    token = fake.enqueue("a.one", {})

    fake.wait_for(lambda: len(fake.calls_to(COMPLETE)) == 1)
    second = fake.enqueue("a.one", {})
    assert fake.result(second).path == COMPLETE
    assert token not in fake.results
    assert not fake.calls_to(FAIL)


def test_unavailable_answers_are_retried_until_the_runtime_answers(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = _quick_worker(make_worker)
    worker.register("a.one", _echo)
    gateway = [(status, "gateway says no") for status in (502, 503, 504, 429, 408)]
    fake.script(COMPLETE, *gateway, INTERNAL, INTERNAL)
    start_worker(worker)
    token = fake.enqueue("a.one", {"n": 3})

    assert fake.result(token).body == {"token": token, "output": {"echo": {"n": 3}}}
    assert len(fake.calls_to(COMPLETE)) == 8
    assert not fake.calls_to(FAIL)


def test_retries_of_a_result_stop_after_the_retry_window(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from orbit_sdk import _delivery

    monkeypatch.setattr(_delivery, "RESULT_RETRY_WINDOW_S", 0.3)
    worker = _quick_worker(make_worker)
    worker.register("a.one", _echo)
    fake.routes[("POST", COMPLETE)] = _always((503, "restarting"))
    start_worker(worker)
    fake.enqueue("a.one", {}, execution_id="e-3", step_id="s")

    fake.wait_for(lambda: "result not delivered" in caplog.text)
    calls = len(fake.calls_to(COMPLETE))
    assert calls >= 3
    time.sleep(0.3)
    assert len(fake.calls_to(COMPLETE)) == calls
    assert not fake.calls_to(FAIL)
    [gave_up] = [r for r in caplog.records if r.getMessage().startswith("result not delivered")]
    assert gave_up.levelno == logging.ERROR
    assert '"error": "HTTP_ERROR (503): restarting"' in gave_up.getMessage()
