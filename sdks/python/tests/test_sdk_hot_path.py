"""The shortcuts of a task's hot path keep what they replaced: a result
encoded once is the same JSON, ctx.cancelled made on first use still sees a
cancel that came first, and log records read as Logger.log made them."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Context, Worker, _execute, _json, _log
from orbit_sdk._json import RawJson

MakeWorker = Callable[..., Worker]
StartWorker = Callable[[Worker], Worker]


def _context(token: str = "tok-1") -> Context:
    return Context._from_assignment({"token": token, "task_name": "a.one"})


@pytest.mark.parametrize(
    "output",
    [{}, {"n": 1, "s": 'é"\n', "f": 1.5, "l": [None, True]}, {1: "int key"}],
)
@pytest.mark.parametrize(
    "poll",
    [
        None,
        {"worker_session_id": "s-1", "wait_ms": 300},
        {"worker_session_id": 's-"é"\n', "wait_ms": 0},
        {"wait_ms": 300, "worker_session_id": "s-1"},
        {"worker_session_id": "s-1", "wait_ms": 300, "other": [1]},
        {"worker_session_id": None, "wait_ms": 300.0},
    ],
)
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


def _record(created: float, level: int = logging.INFO, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("orbit", level, _log.__file__, 1, "%s %s", ("m", "{}"), None)
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    record.__dict__.update(extra)
    return record


def test_the_worker_formatter_writes_what_logging_formatter_writes() -> None:
    plain = logging.Formatter(_log.LOG_FORMAT)
    ours = _log._LineFormatter()
    # Lines within one second, across seconds, and back to an earlier second.
    times = [1_700_000_000.001, 1_700_000_000.5, 1_700_000_000.999, 1_700_000_001.0]
    times += [1_700_003_600.25, 1_700_000_000.75, 0.5]
    for created in times:
        for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR):
            expected, got = _record(created, level), _record(created, level)
            assert ours.format(got) == plain.format(expected)
            assert (got.asctime, got.message) == (expected.asctime, expected.message)
    try:
        raise ValueError("boom")
    except ValueError:
        info = sys.exc_info()
    with_exc = {"exc_info": info}
    with_stack = {"stack_info": "Stack (most recent call last):\n  here"}
    for extra in (with_exc, with_stack):
        got, expected = _record(times[0], **extra), _record(times[0], **extra)
        assert ours.format(got) == plain.format(expected)


def test_configure_logging_installs_the_worker_formatter_only_on_a_bare_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    _log.configure_logging()
    (handler,) = root.handlers
    assert isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr
    assert isinstance(handler.formatter, _log._LineFormatter)
    assert root.level == logging.INFO
    # Logging already set up is left alone.
    _log.configure_logging()
    assert root.handlers == [handler]


@pytest.mark.parametrize(
    "task",
    [
        {"token": "t", "execution_id": "e-1", "step_id": "s", "task_name": "a.one"},
        {
            "token": "t",
            "execution_id": 'é"\\\n\u2028😀',
            "step_id": "</s>",
            "attempt": 12345678901234,
        },
        {"token": "t", "execution_id": "", "redelivery": True, "attempt": "3"},
    ],
)
def test_the_executing_fields_are_the_json_log_fields_writes(task: dict[str, Any]) -> None:
    ctx = Context._from_assignment(task)
    fields = {**ctx._identity(), "task": ctx.task_name, "redelivery": ctx.redelivery}
    assert ctx._executing_json() == json.dumps(fields, default=str)


def test_the_executing_fields_of_a_context_built_by_hand_fall_back_to_json() -> None:
    ctx = _context()
    ctx.attempt = 2.5  # type: ignore[assignment]
    ctx.step_id = {"odd"}  # type: ignore[assignment]
    fields = {**ctx._identity(), "task": ctx.task_name, "redelivery": ctx.redelivery}
    assert ctx._executing_json() == json.dumps(fields, default=str)


def test_a_context_from_an_assignment_has_what_the_constructor_gives() -> None:
    task = {
        "token": 7,
        "execution_id": "e",
        "workflow": "W",
        "workflow_version": "1.0.0",
        "step_id": "s",
        "task_name": "a.one",
        "attempt": "2",
        "idempotency_key": "k",
        "redelivery": 1,
        "deadline_ms": "99",
    }
    built = Context(
        token="7",
        execution_id="e",
        workflow="W",
        workflow_version="1.0.0",
        step_id="s",
        task_name="a.one",
        attempt=2,
        idempotency_key="k",
        redelivery=True,
        deadline_ms=99,
    )
    ctx = Context._from_assignment(task)
    for name in Context.__slots__:
        assert getattr(ctx, name) == getattr(built, name), name
    assert Context._from_assignment({"token": "t"}).deadline_ms is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"task": {"token": "t", "input": {"s": "\\u00e9\\ud83d\\ude00"}}, "accepted": true}',
        '{"s": "é😀"}'.encode(),
        b'{"lone": "\\udc80"}',
        '{"s": "é"}'.encode("utf-8-sig"),
        '{"s": "é"}'.encode("utf-16-le"),
        '{"s": "é"}'.encode("utf-16"),
        b"[1, 2]",
        b" {}",
        b"{}",
    ],
)
def test_an_answer_decodes_as_json_loads_decodes_it(body: bytes) -> None:
    assert _json.decode(body) == json.loads(body)


@pytest.mark.parametrize("body", [b'{"s": "\xff"}', b"{", b'{"a": 1} x'])
def test_an_answer_that_is_not_json_fails_as_with_json_loads(body: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(body)
    with pytest.raises(ValueError):
        _json.decode(body)


def test_the_worker_handler_writes_and_flushes_what_stream_handler_does() -> None:
    class Stream(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1

    ours_stream, plain_stream = Stream(), Stream()
    ours = _log._LineHandler(ours_stream)
    ours.setFormatter(_log._LineFormatter())
    plain = logging.StreamHandler(plain_stream)
    plain.setFormatter(logging.Formatter(_log.LOG_FORMAT))
    for created in (1_700_000_000.25, 1_700_000_000.5, 1_700_000_002.0):
        ours.handle(_record(created))
        plain.handle(_record(created))
    assert ours_stream.getvalue() == plain_stream.getvalue()
    assert ours_stream.flushes == plain_stream.flushes == 3


def test_the_worker_handler_reports_a_failed_write_as_stream_handler_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("disk full")

    handler = _log._LineHandler(Broken())
    failed: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", failed.append)
    record = _record(1_700_000_000.0)
    handler.handle(record)
    assert failed == [record]
