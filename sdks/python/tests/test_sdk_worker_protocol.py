"""The worker's side of the protocol: sessions, heartbeats, outages, stopping."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import ApiError, Context, Worker

MakeWorker = Callable[..., Worker]
StartWorker = Callable[[Worker], Worker]

UNAVAILABLE = (503, {"error": {"code": "NOT_LEADER", "message": "this server is a standby"}})
UNKNOWN_SESSION = (
    404,
    {"error": {"code": "UNKNOWN_SESSION", "message": "unknown or expired worker session"}},
)


def _echo(input: Any, ctx: Context) -> dict[str, Any]:
    return {"echo": input}


def test_registration_announces_the_worker_and_its_contracts(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    fake.warnings = ["`b.two` is announced at version 2.0.0 but registered workflows use 1.0.0"]
    worker = make_worker(worker_id="hello-python")
    worker.register("a.one", _echo)
    worker.register("b.two", _echo, version="2.0.0")
    start_worker(worker)

    fake.wait_for(lambda: bool(fake.calls_to("/v1/workers/poll")))
    [register] = fake.calls_to("/v1/workers/register")
    assert register.method == "POST"
    assert register.body == {
        "worker_id": "hello-python",
        "runtime": "python",
        "sdk": "orbit-python/0.1.0",
        "contracts": [
            {"task_name": "a.one", "contract_version": "1.0.0"},
            {"task_name": "b.two", "contract_version": "2.0.0"},
        ],
        # The ORBIT extensions it can use; a runtime that does not offer them
        # ignores the field (docs/worker-protocol.md).
        "extensions": ["result-then-poll"],
    }
    poll = fake.calls_to("/v1/workers/poll")[0]
    assert poll.body == {
        "worker_session_id": next(iter(fake.sessions)),
        "wait_ms": 300,
    }
    fake.wait_for(lambda: "registered" in caplog.text)
    assert "worker hello-python registered (2 tasks)" in caplog.messages
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING)
    assert warning.getMessage() == f"runtime: {fake.warnings[0]}"


def test_the_announced_runtime_can_be_overridden(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker(runtime="pypy")
    worker.register("a.one", _echo)
    start_worker(worker)
    fake.wait_for(lambda: bool(fake.calls_to("/v1/workers/register")))
    assert fake.calls_to("/v1/workers/register")[0].body["runtime"] == "pypy"


def test_run_without_tasks_raises_runtime_error(make_worker: MakeWorker) -> None:
    with pytest.raises(RuntimeError, match="no task is registered"):
        make_worker().run()


def test_run_raises_api_error_when_registration_is_refused(
    fake: FakeRuntime, make_worker: MakeWorker
) -> None:
    fake.token = "worker-secret"
    worker = make_worker(token="wrong")
    worker.register("a.one", _echo)

    with pytest.raises(ApiError) as caught:
        worker.run(install_signal_handlers=False)

    assert (caught.value.status, caught.value.code) == (401, "UNAUTHENTICATED")
    assert str(caught.value) == "UNAUTHENTICATED (401): missing or invalid credentials"
    assert fake.calls_to("/v1/workers/register")[0].headers["authorization"] == "Bearer wrong"


def test_registration_is_retried_through_outages_and_5xx(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The retries after the first are logged at DEBUG (_contact.py).
    caplog.set_level(logging.DEBUG, logger="orbit")
    fake.stop()
    worker = make_worker()
    worker.register("a.one", _echo)
    start_worker(worker)
    time.sleep(0.5)
    fake.script("/v1/workers/register", UNAVAILABLE)
    fake.start()

    token = fake.enqueue("a.one", {"n": 1})
    assert fake.result(token).body["output"] == {"echo": {"n": 1}}
    assert len(fake.calls_to("/v1/workers/register")) == 2
    refused = [m for m in caplog.messages if m.startswith("cannot reach ORBIT runtime at ")]
    assert refused
    assert refused[0] == (
        f"cannot reach ORBIT runtime at {fake.url}: "
        "<urlopen error [Errno 111] Connection refused>; retrying in 0.2s"
    )
    assert any(
        m.startswith("NOT_LEADER (503): this server is a standby; retrying in ")
        for m in caplog.messages
    )


def test_unknown_session_on_poll_registers_again(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker(concurrency=3)
    worker.register("a.one", _echo)
    start_worker(worker)
    fake.wait_for(lambda: len(fake.calls_to("/v1/workers/poll")) >= 3)

    fake.expire_sessions()
    token = fake.enqueue("a.one", {})

    assert fake.result(token).path == "/v1/tasks/complete"
    # Three poll loops lost the session together; only one registered again.
    assert len(fake.calls_to("/v1/workers/register")) == 2
    assert len(fake.sessions) == 1


def test_unknown_session_on_heartbeat_registers_again(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker()
    worker.register("a.one", _echo)
    start_worker(worker)
    fake.wait_for(lambda: bool(fake.calls_to("/v1/workers/heartbeat")))
    fake.script("/v1/workers/heartbeat", UNKNOWN_SESSION)

    fake.wait_for(lambda: len(fake.calls_to("/v1/workers/register")) == 2)
    fake.wait_for(lambda: len(fake.calls_to("/v1/workers/heartbeat")) >= 3)
    last = fake.calls_to("/v1/workers/heartbeat")[-1]
    assert last.body["worker_session_id"] in fake.sessions


def test_unknown_session_on_complete_registers_again_and_delivers(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    worker = make_worker()
    worker.register("a.one", _echo)
    fake.script("/v1/tasks/complete", UNKNOWN_SESSION)
    start_worker(worker)
    token = fake.enqueue("a.one", {"n": 2})

    assert fake.result(token).body == {"token": token, "output": {"echo": {"n": 2}}}
    assert len(fake.calls_to("/v1/tasks/complete")) == 2
    assert len(fake.calls_to("/v1/workers/register")) == 2


def test_results_are_retried_through_5xx_with_backoff(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The retries after the first are logged at DEBUG (_contact.py).
    caplog.set_level(logging.DEBUG, logger="orbit")
    worker = make_worker()
    worker.register("a.one", _echo)
    fake.script("/v1/tasks/complete", UNAVAILABLE, UNAVAILABLE, (502, "Bad Gateway"))
    start_worker(worker)
    token = fake.enqueue("a.one", {})

    fake.result(token)
    attempts = fake.calls_to("/v1/tasks/complete")
    assert len(attempts) == 4
    gaps = [later.at - earlier.at for earlier, later in zip(attempts, attempts[1:])]
    for gap, delay in zip(gaps, (0.2, 0.4, 0.8)):
        assert delay <= gap < delay + 0.3
    retries = [m for m in caplog.messages if m.startswith("result delivery failed")]
    assert [m.split("; ")[1].split(" ")[2] for m in retries] == ["0.2s", "0.4s", "0.8s"]
    assert retries[2].startswith("result delivery failed: HTTP_ERROR (502): Bad Gateway")


def test_results_survive_a_runtime_restart(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The retries after the first are logged at DEBUG (_contact.py).
    caplog.set_level(logging.DEBUG, logger="orbit")
    worker = make_worker(concurrency=2)
    running = threading.Event()
    release = threading.Event()

    @worker.task("a.one")
    def slow(input: Any, ctx: Context) -> dict[str, Any]:
        running.set()
        release.wait(10)
        return {"done": True}

    start_worker(worker)
    token = fake.enqueue("a.one", {})
    # Not `token in fake.dispatched`: the fake records the dispatch before the
    # poll's answer is read, and stopping it then cuts that answer off.
    assert running.wait(10)

    fake.stop()
    release.set()
    fake.wait_for(lambda: "result delivery failed" in caplog.text)
    time.sleep(1.0)  # several retries while the runtime is down
    fake.restart()

    # Delivery and poll retries back off up to 5 s each: allow two full
    # rounds so a loaded CI machine does not time the test out.
    patience = 20.0
    assert fake.result(token, patience).body == {"token": token, "output": {"done": True}}
    assert len(fake.calls_to("/v1/tasks/complete")) == 1
    # Polls found the session gone after the restart and registered again.
    fake.wait_for(lambda: len(fake.calls_to("/v1/workers/register")) == 2, patience)
    second = fake.enqueue("a.one", {})
    assert fake.result(second, patience).path == "/v1/tasks/complete"
    assert any(m.startswith("poll failed: cannot reach ORBIT runtime at") for m in caplog.messages)


def test_an_answered_result_is_not_sent_again(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    worker = make_worker(concurrency=1)
    worker.register("a.one", _echo)
    too_large = (413, {"error": {"code": "PAYLOAD_TOO_LARGE", "message": "task result is big"}})
    stale = (200, {"accepted": False, "reason": "stale attempt"})
    fake.script("/v1/tasks/complete", too_large, stale)
    start_worker(worker)

    first = fake.enqueue("a.one", {}, execution_id="e-1", step_id="s")
    second = fake.enqueue("a.one", {}, execution_id="e-2", step_id="s")
    fake.wait_for(lambda: len(fake.calls_to("/v1/tasks/complete")) == 2)
    fake.wait_for(lambda: "result ignored" in caplog.text)
    time.sleep(0.5)

    assert [c.body["token"] for c in fake.calls_to("/v1/tasks/complete")] == [first, second]
    # The refused output is not sent again; a small failure takes its place.
    [fallback] = fake.calls_to("/v1/tasks/fail")
    assert fallback.body["token"] == first
    assert fallback.body["error_code"] == "INVALID_RESULT"
    assert (
        'result refused; reporting the attempt as failed {"execution_id": "e-1", "step": "s", '
        '"attempt": 1, "error": "PAYLOAD_TOO_LARGE (413): task result is big"}' in caplog.messages
    )
    assert (
        'result ignored {"execution_id": "e-2", "step": "s", "attempt": 1, '
        '"reason": "stale attempt"}' in caplog.messages
    )


def test_poll_failures_back_off(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = make_worker(concurrency=1)
    worker.register("a.one", _echo)
    fake.script("/v1/workers/poll", UNAVAILABLE, UNAVAILABLE)
    start_worker(worker)
    token = fake.enqueue("a.one", {})

    fake.result(token)
    polls = fake.calls_to("/v1/workers/poll")
    assert polls[1].at - polls[0].at >= 0.2
    assert polls[2].at - polls[1].at >= 0.4
    assert "poll failed: NOT_LEADER (503): this server is a standby; retrying in 0.4s" in (
        caplog.messages
    )


def test_heartbeats_run_at_the_runtime_interval_while_a_handler_is_busy(
    fake: FakeRuntime, make_worker: MakeWorker, start_worker: StartWorker
) -> None:
    fake.heartbeat_interval_ms = 100
    worker = make_worker(concurrency=1)

    @worker.task("a.one")
    def busy(input: Any, ctx: Context) -> dict[str, Any]:
        time.sleep(0.6)  # blocks its poll thread, not the heartbeat thread
        return {}

    start_worker(worker)
    token = fake.enqueue("a.one", {})
    fake.wait_for(lambda: token in fake.dispatched)
    started = time.monotonic()
    fake.result(token)

    beats = [c for c in fake.calls_to("/v1/workers/heartbeat") if c.at >= started]
    assert len(beats) >= 4
    assert beats[0].body == {"worker_session_id": next(iter(fake.sessions))}


def test_a_cancel_list_sets_ctx_cancelled(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    worker = make_worker(concurrency=2)
    started = threading.Event()

    @worker.task("reports.render")
    def render(input: Any, ctx: Context) -> dict[str, Any]:
        started.set()
        stopped = ctx.cancelled.wait(5)
        return {"cancelled": stopped and ctx.is_cancelled}

    start_worker(worker)
    token = fake.enqueue("reports.render", {}, execution_id="r-1", step_id="render")
    assert started.wait(5)
    fake.cancel("some-token-this-worker-does-not-hold")
    fake.cancel(token)

    assert fake.result(token).body["output"] == {"cancelled": True}
    assert (
        'cancellation requested {"execution_id": "r-1", "step": "render", "attempt": 1, '
        '"task": "reports.render"}' in caplog.messages
    )


def test_stop_drains_running_tasks_then_unregisters(
    fake: FakeRuntime, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    worker = make_worker(concurrency=2)
    started = threading.Event()

    @worker.task("a.one")
    def slow(input: Any, ctx: Context) -> dict[str, Any]:
        started.set()
        time.sleep(0.5)
        return {"finished": True}

    thread = worker.start()
    assert thread.daemon
    token = fake.enqueue("a.one", {})
    assert started.wait(5)
    stopped_at = time.monotonic()
    worker.stop()
    thread.join(5)

    assert not thread.is_alive()
    assert fake.result(token, timeout=0).body["output"] == {"finished": True}
    [unregister] = fake.calls_to("/v1/workers/unregister")
    assert unregister.at > fake.results[token].at
    assert not fake.sessions
    assert not [c for c in fake.calls_to("/v1/workers/poll") if c.at > stopped_at + 0.05]
    assert "worker test-worker unregistered" in caplog.messages


def test_stop_returns_within_the_poll_wait(fake: FakeRuntime, make_worker: MakeWorker) -> None:
    worker = make_worker(poll_wait_ms=500, concurrency=4)
    worker.register("a.one", _echo)
    thread = worker.start()
    fake.wait_for(lambda: len(fake.calls_to("/v1/workers/poll")) >= 4)

    begun = time.monotonic()
    worker.stop()
    thread.join(5)
    assert time.monotonic() - begun < 1.5
    assert fake.connections <= 7


def test_results_are_not_retried_forever_once_shutdown_begins(
    fake: FakeRuntime, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    worker = make_worker(concurrency=1)
    started = threading.Event()

    @worker.task("a.one")
    def slow(input: Any, ctx: Context) -> dict[str, Any]:
        started.set()
        time.sleep(0.3)
        return {}

    thread = worker.start()
    fake.enqueue("a.one", {})
    assert started.wait(5)
    fake.script("/v1/tasks/complete", *[UNAVAILABLE] * 10)
    worker.stop()
    thread.join(5)

    assert not thread.is_alive()
    assert len(fake.calls_to("/v1/tasks/complete")) == 2
    assert any(m.startswith("result not delivered before shutdown") for m in caplog.messages)


def test_shutdown_waits_for_every_running_task_and_only_those(
    fake: FakeRuntime,
    make_worker: MakeWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    worker = make_worker(concurrency=3)
    started: list[str] = []
    release = threading.Event()

    @worker.task("a.one")
    def hold(input: Any, ctx: Context) -> dict[str, Any]:
        started.append(ctx.token)
        release.wait(10)
        return {}

    thread = worker.start()
    tokens = [fake.enqueue("a.one", {}) for _ in range(2)]
    fake.wait_for(lambda: len(started) == 2)
    worker.stop()
    fake.wait_for(lambda: "waiting for 2 running task(s) to finish" in caplog.text)
    thread.join(0.3)
    assert thread.is_alive()  # held by the two tasks, not by the idle poller
    release.set()
    thread.join(10)
    assert not thread.is_alive()
    assert {fake.result(token, timeout=0).body["token"] for token in tokens} == set(tokens)
    assert worker._tasks_running() == 0
