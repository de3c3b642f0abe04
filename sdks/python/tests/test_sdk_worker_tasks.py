"""What a handler does, and what the worker reports for it."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Context, TaskError, Worker

MakeWorker = Callable[..., Worker]
StartWorker = Callable[[Worker], Worker]


def test_a_returned_dict_completes_the_task(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker()
    seen: list[tuple[Any, Context]] = []

    @worker.task("greeting.compose", version="1.0.0")
    def compose(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
        seen.append((input, ctx))
        return {"message": f"Hello, {input['name']}"}

    start_worker(worker)
    token = fake.enqueue(
        "greeting.compose",
        {"name": "Ada"},
        execution_id="greet-ada",
        step_id="compose",
        attempt=2,
        redelivery=True,
        deadline_ms=1794736057501,
        timeout_ms=30000,
    )

    call = fake.result(token)
    assert call.path == "/v1/tasks/complete"
    assert call.body == {"token": token, "output": {"message": "Hello, Ada"}}
    assert call.headers["content-type"] == "application/json"
    [(received, ctx)] = seen
    assert received == {"name": "Ada"}
    assert (ctx.token, ctx.execution_id, ctx.step_id, ctx.task_name) == (
        token,
        "greet-ada",
        "compose",
        "greeting.compose",
    )
    assert (ctx.workflow, ctx.workflow_version) == ("Wf", "1.0.0")
    assert (ctx.attempt, ctx.redelivery, ctx.idempotency_key) == (2, True, "greet-ada/compose")
    assert ctx.deadline_ms == 1794736057501
    assert not ctx.is_cancelled


def test_the_decorator_returns_the_function_unchanged(make_worker: MakeWorker) -> None:
    worker = make_worker()

    def compose(input: Any, ctx: Any) -> dict[str, Any]:
        return {"message": "hi"}

    assert worker.task("greeting.compose")(compose) is compose
    assert compose({}, None) == {"message": "hi"}


def test_registering_a_name_twice_raises_value_error(make_worker: MakeWorker) -> None:
    worker = make_worker()
    worker.register("payments.refund", lambda i, c: {}, version="1.0.0")
    with pytest.raises(ValueError, match="already registered"):
        worker.register("payments.refund", lambda i, c: {}, version="2.0.0")
    with pytest.raises(ValueError, match="already registered"):
        worker.task("payments.refund")(lambda i, c: {})


def test_a_task_error_fails_the_attempt_with_its_fields(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    worker = make_worker()

    @worker.task("payments.charge")
    def charge(input: Any, ctx: Context) -> Any:
        raise TaskError("CARD_DECLINED", "limit exceeded", retryable=False, details={"limit": 5000})

    start_worker(worker)
    token = fake.enqueue("payments.charge", {"amount": 9000}, execution_id="o-1", step_id="charge")

    assert fake.result(token).body == {
        "token": token,
        "error_code": "CARD_DECLINED",
        "error_message": "limit exceeded",
        "retryable": False,
        "details": {"limit": 5000},
    }
    fake.wait_for(lambda: "task failed" in caplog.text)
    assert (
        'task failed {"execution_id": "o-1", "step": "charge", "attempt": 1, '
        '"code": "CARD_DECLINED"}' in caplog.messages
    )


def test_a_task_error_defaults_to_retryable_without_details(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker()
    worker.register("svc.call", _raise(TaskError("BUSY")))
    start_worker(worker)
    token = fake.enqueue("svc.call", {})

    assert fake.result(token).body == {
        "token": token,
        "error_code": "BUSY",
        "error_message": "",
        "retryable": True,
    }


def test_any_other_exception_is_a_retryable_unhandled_exception(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = make_worker()

    @worker.task("svc.call")
    def call(input: Any, ctx: Context) -> Any:
        return {"ratio": 1 / input["n"]}

    start_worker(worker)
    token = fake.enqueue("svc.call", {"n": 0})

    body = fake.result(token).body
    assert body["error_code"] == "UNHANDLED_EXCEPTION"
    assert body["error_message"] == "ZeroDivisionError: division by zero"
    assert body["retryable"] is True
    trace = body["details"]["traceback"]
    assert trace.startswith("Traceback (most recent call last):")
    assert 'return {"ratio": 1 / input["n"]}' in trace
    assert trace.rstrip().endswith("ZeroDivisionError: division by zero")
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors
    assert errors[0].exc_info is not None


@pytest.mark.parametrize(
    ("returned", "expected"),
    [(None, {}), ({"a": [1, 2.5, None, "x"]}, {"a": [1, 2.5, None, "x"]})],
)
def test_results_are_reported_as_json_objects(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    returned: Any,
    expected: Any,
) -> None:
    worker = make_worker()
    worker.register("svc.call", lambda i, c: returned)
    start_worker(worker)
    token = fake.enqueue("svc.call", {})

    assert fake.result(token).body == {"token": token, "output": expected}


@pytest.mark.parametrize(
    "returned", [[1, 2], "text", 3, {"when": threading.Event()}, {"x": float("nan")}]
)
def test_anything_but_a_json_object_is_an_invalid_result(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker, returned: Any
) -> None:
    worker = make_worker()
    worker.register("svc.call", lambda i, c: returned)
    start_worker(worker)
    token = fake.enqueue("svc.call", {})

    body = fake.result(token).body
    assert body["error_code"] == "INVALID_RESULT"
    assert body["retryable"] is False


def test_missing_input_reaches_the_handler_as_an_empty_dict(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker()
    worker.register("svc.call", lambda i, c: {"input": i})
    start_worker(worker)
    token = fake.enqueue("svc.call", None)

    assert fake.result(token).body["output"] == {"input": {}}


def test_async_handlers_run_on_a_fresh_event_loop(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker(concurrency=2)
    loops: list[int] = []

    @worker.task("text.fetch")
    async def fetch(input: Any, ctx: Context) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        loops.append(id(asyncio.get_running_loop()))
        if input.get("fail"):
            raise TaskError("FETCH_FAILED", "no route", retryable=False)
        return {"bytes": len(input["url"])}

    start_worker(worker)
    ok = fake.enqueue("text.fetch", {"url": "http://x"})
    failed = fake.enqueue("text.fetch", {"url": "http://y", "fail": True})

    assert fake.result(ok).body["output"] == {"bytes": 8}
    assert fake.result(failed).body["error_code"] == "FETCH_FAILED"
    assert len(set(loops)) == 2


@pytest.mark.parametrize("error", [SystemExit(3), asyncio.CancelledError()])
def test_base_exceptions_are_reported_too(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker, error: BaseException
) -> None:
    worker = make_worker(concurrency=1)
    worker.register("svc.call", _raise(error))
    worker.register("svc.ok", lambda i, c: {"ok": True})
    start_worker(worker)
    failed = fake.enqueue("svc.call", {})
    after = fake.enqueue("svc.ok", {})

    body = fake.result(failed).body
    assert body["error_code"] == "UNHANDLED_EXCEPTION"
    assert body["error_message"].startswith(type(error).__name__)
    # The poll thread survived and took the next task.
    assert fake.result(after).body["output"] == {"ok": True}


def test_a_task_the_worker_does_not_serve_fails_with_unknown_task(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker()
    worker.register("svc.call", lambda i, c: {})
    start_worker(worker)
    token = fake.enqueue("svc.other", {})

    body = fake.result(token).body
    assert body["error_code"] == "UNKNOWN_TASK"
    assert body["retryable"] is True


def test_executing_and_ctx_log_lines(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    worker = make_worker()

    @worker.task("greeting.compose")
    def compose(input: Any, ctx: Context) -> dict[str, Any]:
        ctx.log(f"composing a greeting for {input['name']}")
        ctx.log("with fields", chars=3, tags=["a"])
        return {}

    start_worker(worker)
    token = fake.enqueue(
        "greeting.compose", {"name": "Grace"}, execution_id="d599", step_id="compose"
    )
    fake.result(token)

    messages = [r.getMessage() for r in caplog.records if r.name == "orbit"]
    identity = '"execution_id": "d599", "step": "compose", "attempt": 1'
    assert f'executing {{{identity}, "task": "greeting.compose", "redelivery": false}}' in messages
    assert f"composing a greeting for Grace {{{identity}}}" in messages
    assert f'with fields {{{identity}, "chars": 3, "tags": ["a"]}}' in messages
    record = next(r for r in caplog.records if r.getMessage().startswith("executing"))
    assert record.levelno == logging.INFO
    line = record.getMessage()
    assert json.loads(line[line.index("{") :])["task"] == "greeting.compose"


def test_concurrency_runs_that_many_tasks_at_once(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker(concurrency=3)
    barrier = threading.Barrier(3, timeout=5)
    threads: set[str] = set()

    @worker.task("svc.call")
    def call(input: Any, ctx: Context) -> dict[str, Any]:
        threads.add(threading.current_thread().name)
        barrier.wait()  # breaks, failing the tasks, unless all three run together
        return {}

    start_worker(worker)
    tokens = [fake.enqueue("svc.call", {}) for _ in range(3)]

    for token in tokens:
        assert fake.result(token).path == "/v1/tasks/complete"
    assert threads == {"orbit-poll-1", "orbit-poll-2", "orbit-poll-3"}


def test_concurrency_bounds_the_tasks_in_flight(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker(concurrency=2)
    lock = threading.Lock()
    running = [0]
    peak = [0]

    @worker.task("svc.call")
    def call(input: Any, ctx: Context) -> dict[str, Any]:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        ctx.cancelled.wait(0.05)
        with lock:
            running[0] -= 1
        return {}

    start_worker(worker)
    tokens = [fake.enqueue("svc.call", {}) for _ in range(6)]
    for token in tokens:
        fake.result(token)
    assert peak[0] == 2


def _raise(error: BaseException) -> Callable[[Any, Any], Any]:
    def handler(input: Any, ctx: Any) -> Any:
        raise error

    return handler


def test_a_typed_handler_gets_and_returns_the_generated_types(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    import greeting_contracts as g

    worker = make_worker()
    seen: list[g.GreetingComposeInput] = []

    @worker.task(g.GREETING_COMPOSE)
    def compose(input: g.GreetingComposeInput, ctx: Context) -> g.GreetingComposeOutput:
        seen.append(input)
        return g.GreetingComposeOutput(message=f"Hello, {input.person.name}" * input.person.times)

    start_worker(worker)
    token = fake.enqueue("greeting.compose", {"person": {"name": "Ada", "times": 2}})
    call = fake.result(token)
    assert call.body == {"token": token, "output": {"message": "Hello, AdaHello, Ada"}}
    assert seen == [g.GreetingComposeInput(person=g.Person(name="Ada", times=2), tags=())]
    [register] = fake.calls_to("/v1/workers/register")
    [entry] = register.body["contracts"]
    assert entry["task_name"] == "greeting.compose"
    assert entry["contract_version"] == "1.0.0"
    assert entry["contract_hash"] == g.GREETING_COMPOSE.contract_hash
    assert entry["contract_hash"].startswith("sha256:") and len(entry["contract_hash"]) == 71
    assert entry["contract"] == json.loads(g.GREETING_COMPOSE.contract)


def test_input_a_typed_handler_cannot_decode_is_invalid_input_with_the_path(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    import greeting_contracts as g

    worker = make_worker()
    called: list[object] = []
    worker.register(g.GREETING_COMPOSE, lambda input, ctx: called.append(input))
    start_worker(worker)
    token = fake.enqueue("greeting.compose", {"person": {"name": "Ada", "times": "two"}})
    call = fake.result(token)
    assert call.path == "/v1/tasks/fail"
    assert call.body["error_code"] == "INVALID_INPUT"
    assert call.body["retryable"] is False
    assert "input.person.times" in call.body["error_message"]
    assert call.body["details"] == {"path": "input.person.times"}
    assert called == []


def test_untyped_and_typed_handlers_register_together(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    import greeting_contracts as g

    worker = make_worker()
    worker.register(g.GREETING_COMPOSE, lambda input, ctx: g.GreetingComposeOutput(message="x"))
    worker.register("other.task", lambda input, ctx: {"ok": True})
    start_worker(worker)
    token = fake.enqueue("other.task", {"a": 1})
    assert fake.result(token).body["output"] == {"ok": True}
    [register] = fake.calls_to("/v1/workers/register")
    assert register.body["contracts"][1] == {"task_name": "other.task", "contract_version": "1.0.0"}
