"""grpc_unary.UnaryServer on its own: what grpcio's server did for the
binding and this one must still do (replies, statuses and trailing
metadata, unknown methods, cancellation seen by `is_active`, a failing
handler, stopping with a grace period), with grpcio's client; and
`GrpcServer`'s pools over a stand-in for `WorkerCalls`."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any, cast

import grpc
import pytest

from orbit_server.config import Address, ServerConfig
from orbit_server.grpc_proto import worker_pb2 as pb
from orbit_server.grpc_proto import worker_pb2_grpc as pb_grpc
from orbit_server.grpc_server import GrpcServer
from orbit_server.grpc_unary import Call, Reply, UnaryServer
from orbit_server.worker_calls import WorkerCalls

pytestmark = pytest.mark.timeout(60)


class Handlers:
    """Methods a test calls, and what they saw."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.inactive = threading.Event()
        self.undelivered = threading.Event()
        self.metadata: dict[str, str | bytes] = {}

    def echo(self, call: Call, data: bytes) -> Reply:
        self.metadata = dict(call.metadata)
        return Reply(data[::-1])

    def refuse(self, call: Call, data: bytes) -> Reply:
        return Reply(
            None, grpc.StatusCode.NOT_FOUND, "UNKNOWN_SESSION: gone é", (("orbit-error-code", "X"),)
        )

    def broken(self, call: Call, data: bytes) -> Reply:
        raise RuntimeError("a bug")

    def hand_over(self, call: Call, data: bytes) -> Reply:
        """Answers once released, or once its caller is seen gone, as a long
        poll handed a task does, and asks to hear if that answer is lost."""
        self.entered.set()
        while not self.release.wait(0.01):
            if not call.is_active():
                self.inactive.set()
                break
        call.on_undelivered(self.undelivered.set)
        return Reply(b"task")

    def park(self, call: Call, data: bytes) -> Reply:
        """Waits as a long poll does, asking whether the caller is there."""
        self.entered.set()
        while not self.release.wait(0.01):
            if not call.is_active():
                self.inactive.set()
                return Reply(b"late")
        return Reply(b"released")


@pytest.fixture
def served() -> Iterator[tuple[UnaryServer, Handlers, grpc.Channel]]:
    handlers = Handlers()
    pool = futures.ThreadPoolExecutor(8)
    methods = {
        "/t.S/Echo": handlers.echo,
        "/t.S/Refuse": handlers.refuse,
        "/t.S/Broken": handlers.broken,
        "/t.S/Park": handlers.park,
        "/t.S/HandOver": handlers.hand_over,
    }
    server = UnaryServer(
        {path: (handler, pool) for path, handler in methods.items()},
        [("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", 1000)],
    )
    port = server.add_port("127.0.0.1:0")
    assert port
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield server, handlers, channel
    handlers.release.set()
    assert server.stop(0).wait(10)
    pool.shutdown()


def _error(call: grpc.UnaryUnaryMultiCallable, data: bytes, timeout: float = 10) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(data, timeout=timeout)
    error: grpc.RpcError = caught.value
    return error


def test_a_call_gets_its_reply_and_the_handler_its_metadata(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    _, handlers, channel = served
    echo = channel.unary_unary("/t.S/Echo")
    for _ in range(3):  # several calls, one after another on one connection
        assert echo(b"abc", timeout=10, metadata=(("authorization", "Bearer x"),)) == b"cba"
    assert echo(b"", timeout=10) == b""
    assert handlers.metadata.get("authorization") is None  # the last call sent none
    echo(b"x", timeout=10, metadata=(("authorization", "Bearer y"), ("k-bin", b"\x00")))
    assert handlers.metadata["authorization"] == "Bearer y"
    assert handlers.metadata["k-bin"] == b"\x00"


def test_a_refusal_is_a_status_with_its_trailing_metadata(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    error = _error(served[2].unary_unary("/t.S/Refuse"), b"")
    assert error.code() is grpc.StatusCode.NOT_FOUND
    assert error.details() == "UNKNOWN_SESSION: gone é"
    assert ("orbit-error-code", "X") in tuple(error.trailing_metadata() or ())


def test_an_unknown_method_is_unimplemented(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    assert _error(served[2].unary_unary("/t.S/Nope"), b"").code() is grpc.StatusCode.UNIMPLEMENTED


def test_a_unary_method_needs_exactly_one_message(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    _, handlers, channel = served
    several = channel.stream_unary("/t.S/Echo")
    with pytest.raises(grpc.RpcError) as caught:
        several(iter(()), timeout=10)
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
    assert several(iter((b"ab",)), timeout=10) == b"ba"
    # Two messages are refused (grpcio's own server answers OK from the
    # first): the handler never runs.
    handlers.metadata = {}
    for count in (2, 3):
        with pytest.raises(grpc.RpcError) as caught:
            several(iter([b"a"] * count), timeout=10, metadata=(("k", "v"),))
        assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
        assert caught.value.details() == "a unary method takes exactly one request message"
    assert handlers.metadata == {}


def test_a_message_over_the_limit_is_refused_by_the_core(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    error = _error(served[2].unary_unary("/t.S/Echo"), b"x" * 2000)
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_call_admit_refuses_is_answered_without_its_message_being_read() -> None:
    """Credentials are checked before the message is read: a caller without
    one gets the refusal whatever it sends (it got the core's size error, or
    had up to the size limit read and decoded first), and the server reads
    no byte of its message."""
    read: list[int] = []
    ran: list[bytes] = []

    def admit(call: Call) -> Reply | None:
        if dict(call.metadata).get("authorization") == "Bearer ok":
            call.principal = "worker"
            return None
        return Reply(None, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED: no")

    def echo(call: Call, data: bytes) -> Reply:
        assert call.principal == "worker"
        ran.append(data)
        return Reply(data)

    pool = futures.ThreadPoolExecutor(2)
    server = UnaryServer(
        {"/t.S/Echo": (echo, pool)},
        [("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", 1000)],
        admit,
    )
    message = Call._message

    def reading(call: Call, event: Any) -> None:
        data = event.batch_operations[0].message() if event.success else None
        read.append(len(data or b""))
        message(call, event)

    port = server.add_port("127.0.0.1:0")
    server.start()
    try:
        with (
            pytest.MonkeyPatch.context() as patch,
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            patch.setattr(Call, "_message", reading)
            echo_call = channel.unary_unary("/t.S/Echo")
            for body in (b"x" * 100_000, b"\xff" * 500, b""):
                error = _error(echo_call, body)
                assert error.code() is grpc.StatusCode.UNAUTHENTICATED
                assert error.details() == "UNAUTHENTICATED: no"
            assert (read, ran) == ([], [])
            ok = (("authorization", "Bearer ok"),)
            assert echo_call(b"abc", timeout=10, metadata=ok) == b"abc"
            assert (read, ran) == ([3], [b"abc"])
            # An admitted caller still meets the core's size limit.
            with pytest.raises(grpc.RpcError) as caught:
                echo_call(b"x" * 2000, timeout=10, metadata=ok)
            assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        assert server.stop(0).wait(10)
        pool.shutdown()


def test_a_failing_handler_answers_unknown_and_the_server_goes_on(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    _, _, channel = served
    assert _error(channel.unary_unary("/t.S/Broken"), b"").code() is grpc.StatusCode.UNKNOWN
    assert channel.unary_unary("/t.S/Echo")(b"ok", timeout=10) == b"ko"


def test_a_caller_that_gives_up_is_seen_as_inactive(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    _, handlers, channel = served
    pending = channel.unary_unary("/t.S/Park").future(b"", timeout=10)
    assert handlers.entered.wait(10)  # a deadline alone could pass before that
    assert pending.cancel()
    assert handlers.inactive.wait(10)
    assert channel.unary_unary("/t.S/Echo")(b"ok", timeout=10) == b"ko"


def test_a_reply_the_caller_gave_up_on_is_reported_undelivered(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    # Before, the reply was dropped without a word, so a task handed to a
    # poll whose worker had gone waited for the session timeout.
    # The client gives up only once the handler runs: a deadline on its own
    # could pass before the call reaches a handler on a loaded machine, and
    # then there is no reply to lose. The handler answers once the server
    # has seen the cancellation: answered before that, the reply is written
    # to a stream the server still holds open, and nothing is lost.
    _, handlers, channel = served
    pending = channel.unary_unary("/t.S/HandOver").future(b"", timeout=10)
    assert handlers.entered.wait(10)
    assert pending.cancel()
    assert handlers.inactive.wait(10)
    assert handlers.undelivered.wait(10)


def test_a_reply_that_reaches_its_caller_is_not_reported(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    _, handlers, channel = served
    handlers.release.set()
    assert channel.unary_unary("/t.S/HandOver")(b"", timeout=10) == b"task"
    # The call's close has been seen once a later call on the connection is answered.
    assert channel.unary_unary("/t.S/Echo")(b"ok", timeout=10) == b"ko"
    assert not handlers.undelivered.wait(0.3)


def test_stopping_lets_a_running_call_finish_and_takes_no_new_one(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    server, handlers, channel = served
    answers: list[bytes] = []
    park = channel.unary_unary("/t.S/Park")
    caller = threading.Thread(target=lambda: answers.append(park(b"", timeout=30)))
    caller.start()
    assert handlers.entered.wait(10)
    stopped = server.stop(30)
    with pytest.raises(grpc.RpcError):
        channel.unary_unary("/t.S/Echo")(b"x", timeout=5, wait_for_ready=False)
    assert not stopped.is_set()
    handlers.release.set()
    caller.join(10)
    assert answers == [b"released"]
    assert stopped.wait(10)


def test_after_the_grace_running_calls_are_cancelled(
    served: tuple[UnaryServer, Handlers, grpc.Channel],
) -> None:
    server, handlers, channel = served
    park = channel.unary_unary("/t.S/Park")
    errors: list[grpc.StatusCode] = []

    def call() -> None:
        try:
            park(b"", timeout=30)
        except grpc.RpcError as exc:
            errors.append(exc.code())

    caller = threading.Thread(target=call)
    caller.start()
    assert handlers.entered.wait(10)
    assert server.stop(0.2).wait(10)
    caller.join(10)
    # The core ends the call and closes the connection; which the client
    # sees first varies.
    assert len(errors) == 1 and errors[0] in (
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNAVAILABLE,
    )
    assert handlers.inactive.wait(10)


class ParkedCalls:
    """`WorkerCalls` whose polls park until released."""

    def __init__(self) -> None:
        self.parked = threading.Semaphore(0)
        self.release = threading.Event()

    def poll(self, who: object, session: str, wait_ms: int | None, connected: object) -> None:
        self.parked.release()
        self.release.wait(30)

    def heartbeat(self, who: object, session: str) -> dict[str, object]:
        return {"accepted": True, "cancel": []}


def test_parked_polls_leave_threads_for_the_other_calls() -> None:
    """As many parked polls as --threads must not hold up a heartbeat or a
    result (they waited for a poll to end while polls and the rest shared
    one pool)."""
    threads = 4
    calls = ParkedCalls()
    config = ServerConfig(grpc_addr=Address.parse("127.0.0.1:0"), threads=threads)
    server = GrpcServer(config, cast(WorkerCalls, calls))
    bound = server.start()
    pollers: list[threading.Thread] = []
    answered: list[bool] = []
    with grpc.insecure_channel(str(bound)) as channel:
        stub = pb_grpc.WorkerServiceStub(channel)
        poll = pb.PollTaskRequest(worker_session_id="s", wait_ms=20_000)
        try:
            for _ in range(threads):
                pollers.append(
                    threading.Thread(target=lambda: answered.append(bool(stub.PollTask(poll))))
                )
                pollers[-1].start()
            for _ in range(threads):
                assert calls.parked.acquire(timeout=10)
            beat = stub.Heartbeat(pb.HeartbeatRequest(worker_session_id="s"), timeout=10)
            assert beat.accepted
            assert answered == []
        finally:
            calls.release.set()
            for poller in pollers:
                poller.join(10)
    server.wait_stopped()
    assert len(answered) == threads


def test_grpc_core_starts_with_the_older_polling_engine() -> None:
    """grpc core reads GRPC_EXPERIMENTS when grpc is first imported, so the
    server's modules must not import it before grpc_server sets it."""
    script = (
        "import os, sys\n"
        "os.environ.pop('GRPC_EXPERIMENTS', None)\n"
        "import orbit_server.runner, orbit_server.app, orbit_server.tracing\n"
        "assert 'grpc' not in sys.modules, 'grpc imported before grpc_server'\n"
        "import orbit_server.grpc_server\n"
        "print(os.environ['GRPC_EXPERIMENTS'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-event_engine_listener,-event_engine_for_all_other_endpoints"]


_TASK = {
    "token": "t-1",
    "execution_id": "e-1",
    "workflow": "W",
    "workflow_version": "1.0.0",
    "step_id": "s0",
    "task_name": "bench.step",
    "contract_version": "1.0.0",
    "input": {},
    "idempotency_key": "e-1/s0",
    "attempt": 1,
    "redelivery": False,
}


class LateTask:
    """`WorkerCalls` whose poll hands out a task only once its caller is
    seen gone (the call's `is_active`, which the server passes as the
    poll's `connected`)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.undelivered_tokens: list[str] = []
        self.redelivered = threading.Event()

    def poll(
        self, who: object, session: str, wait_ms: int | None, connected: Callable[[], bool]
    ) -> object:
        self.entered.set()
        for _ in range(3000):
            if not connected():
                break
            time.sleep(0.01)
        return _TASK

    def undelivered(self, task: dict[str, object]) -> None:
        self.undelivered_tokens.append(str(task["token"]))
        self.redelivered.set()


def test_a_task_whose_poller_gave_up_is_handed_back_as_over_http() -> None:
    calls = LateTask()
    server = GrpcServer(ServerConfig(grpc_addr=Address.parse("127.0.0.1:0")), cast(Any, calls))
    bound = server.start()
    try:
        with grpc.insecure_channel(str(bound)) as channel:
            stub = pb_grpc.WorkerServiceStub(channel)
            # The worker gives up once its poll is running (a deadline could
            # pass before the call reaches the poll on a loaded machine), and
            # the poll answers once the server has seen it go.
            request = pb.PollTaskRequest(worker_session_id="s", wait_ms=1000)
            pending = stub.PollTask.future(request, timeout=30)
            assert calls.entered.wait(10)
            assert pending.cancel()
            assert calls.redelivered.wait(10)
            assert calls.undelivered_tokens == ["t-1"]
    finally:
        server.wait_stopped()
