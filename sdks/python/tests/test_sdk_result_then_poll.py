"""The result-then-poll extension: used when the runtime offers it, and only then."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Context, Worker

MakeWorker = Callable[..., Worker]
StartWorker = Callable[[Worker], Worker]

POLL = "/v1/workers/poll"
COMPLETE = "/v1/tasks/complete"
FAIL = "/v1/tasks/fail"
EXTENSION = "result-then-poll"


def _echo(input: Any, ctx: Context) -> dict[str, Any]:
    return {"echo": input}


def test_results_carry_the_next_poll_when_the_runtime_offers_it(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    fake.extensions = [EXTENSION]
    worker = make_worker(concurrency=1)
    worker.register("a.one", _echo)
    tokens = [fake.enqueue("a.one", {"n": n}) for n in range(3)]
    start_worker(worker)

    for token in tokens:
        fake.result(token)
    session = next(iter(fake.sessions))
    reports = fake.calls_to(COMPLETE)
    assert [call.body["token"] for call in reports] == tokens
    for call in reports:
        assert call.body["poll"] == {"worker_session_id": session, "wait_ms": 300}
    # One poll found the first task; each result's answer brought the next.
    assert len(fake.calls_to(POLL)) == 1


def test_results_are_the_books_when_the_runtime_does_not_offer_it(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker(concurrency=1)
    worker.register("a.one", _echo)
    tokens = [fake.enqueue("a.one", {"n": n}) for n in range(2)]
    start_worker(worker)

    for n, token in enumerate(tokens):
        assert fake.result(token).body == {"token": token, "output": {"echo": {"n": n}}}
    assert len(fake.calls_to(POLL)) >= 2


def test_a_refused_result_loses_no_task(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    fake.extensions = [EXTENSION]
    refusal = {"error": {"code": "INVALID_INPUT", "message": "output too deep"}}
    fake.script(COMPLETE, (400, refusal))
    worker = make_worker(concurrency=1)
    worker.register("a.one", _echo)
    first = fake.enqueue("a.one", {"n": 1})
    second = fake.enqueue("a.one", {"n": 2})
    start_worker(worker)

    # The refused report took no task; the failure sent in its place
    # carries the poll, which brings the second task.
    assert fake.result(first).path == FAIL
    assert fake.result(second).path == COMPLETE
    assert "poll" in fake.calls_to(FAIL)[0].body


def test_a_poll_that_could_not_run_sends_the_worker_back_to_polling(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    fake.extensions = [EXTENSION]
    running = threading.Event()
    proceed = threading.Event()

    def slow(input: Any, ctx: Context) -> dict[str, Any]:
        running.set()
        proceed.wait(10)
        return {}

    worker = make_worker(concurrency=1)
    worker.register("a.one", slow)
    first = fake.enqueue("a.one")
    start_worker(worker)
    assert running.wait(10)
    # The runtime forgets the session while the handler runs: the result's
    # poll fails (poll_error), and the worker's own poll registers again.
    fake.expire_sessions()
    second = fake.enqueue("a.one")
    proceed.set()
    fake.result(first)
    fake.result(second)
    assert len(fake.calls_to("/v1/workers/register")) == 2


def test_shutdown_does_not_wait_for_a_results_poll(
    fake: FakeRuntime, make_worker: MakeWorker
) -> None:
    fake.extensions = [EXTENSION]
    worker = make_worker(concurrency=1, poll_wait_ms=20_000)
    worker.register("a.one", _echo)
    token = fake.enqueue("a.one")
    thread = worker.start()
    fake.result(token)
    # The result's poll now waits up to 20 s for a task that never comes.
    fake.wait_for(lambda: len(fake.calls_to(COMPLETE)) == 1)
    started = time.monotonic()
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - started < 3
    assert fake.calls_to("/v1/workers/unregister")
