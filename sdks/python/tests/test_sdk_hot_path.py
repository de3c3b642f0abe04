"""The shortcuts of a task's hot path keep what they replaced: a result
encoded once is the same JSON, ctx.cancelled made on first use still sees a
cancel that came first, and log records read as Logger.log made them."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Context, Worker, _execute, _log
from orbit_sdk._json import RawJson

MakeWorker = Callable[..., Worker]
StartWorker = Callable[[Worker], Worker]


def _context(token: str = "tok-1") -> Context:
    return Context._from_assignment({"token": token, "task_name": "a.one"})


@pytest.mark.parametrize(
    "output",
    [{}, {"n": 1, "s": 'é"\n', "f": 1.5, "l": [None, True]}, {1: "int key"}],
)
@pytest.mark.parametrize("poll", [None, {"worker_session_id": "s-1", "wait_ms": 300}])
def test_a_completion_is_sent_as_the_json_of_its_body(
    output: dict[Any, Any], poll: dict[str, Any] | None
) -> None:
    ctx = _context('tok-"1"')
    outcome = _execute.run_handler(lambda i, c: output, {"token": ctx.token}, ctx)
    payload = outcome.payload(poll)

    expected = {"token": ctx.token, "output": output, **({} if poll is None else {"poll": poll})}
    assert isinstance(payload, RawJson)
    assert payload.data == json.dumps(expected, separators=(",", ":")).encode()


def test_a_result_that_is_not_json_is_still_refused_before_sending() -> None:
    ctx = _context()
    outcome = _execute.run_handler(lambda i, c: {"x": float("nan")}, {}, ctx)
    assert outcome.path == _execute.FAIL
    assert outcome.body["error_code"] == "INVALID_RESULT"
    assert outcome.payload(None) is outcome.body


def test_a_cancel_before_the_handler_looks_is_seen_through_is_cancelled(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker(concurrency=1)
    started = threading.Event()

    @worker.task("a.one")
    def poll_the_flag(input: Any, ctx: Context) -> dict[str, Any]:
        # Only is_cancelled: the Event behind it is never asked for here.
        started.set()
        deadline = time.monotonic() + 5
        while not ctx.is_cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"cancelled": ctx.is_cancelled, "event": ctx.cancelled.is_set()}

    start_worker(worker)
    token = fake.enqueue("a.one", {})
    assert started.wait(5)
    fake.cancel(token)
    assert fake.result(token).body["output"] == {"cancelled": True, "event": True}


def test_ctx_cancelled_is_one_event_whichever_thread_makes_it() -> None:
    ctx = _context()
    seen: list[threading.Event] = []
    threads = [threading.Thread(target=lambda: seen.append(ctx.cancelled)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len({id(event) for event in seen}) == 1
    assert not ctx.is_cancelled
    seen[0].set()
    assert ctx.is_cancelled


def test_log_fields_records_read_as_logger_log_made_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    _log.log_fields(logging.INFO, "executing", {"execution_id": "e-1", "attempt": 1})
    try:
        raise ValueError("boom")
    except ValueError:
        _log.log_fields(logging.ERROR, "handler raised an exception", {"x": {1}}, exc_info=True)
    _log.log_fields(logging.DEBUG, "not shown", {})

    first, second = caplog.records
    assert first.getMessage() == 'executing {"execution_id": "e-1", "attempt": 1}'
    assert (first.msg, first.name, first.levelno) == ("%s %s", "orbit", logging.INFO)
    assert (first.funcName, first.pathname) == ("log_fields", _log.__file__)
    assert first.exc_info is None
    assert second.getMessage() == 'handler raised an exception {"x": "{1}"}'
    assert second.exc_info is not None and second.exc_info[0] is ValueError
    assert caplog.text.count("ValueError: boom") == 1
    assert sys.exc_info() == (None, None, None)
