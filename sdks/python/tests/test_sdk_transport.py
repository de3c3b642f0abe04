"""Connection reuse: keep-alive, and recovering from connections the server closed."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import ApiError, Client, Worker, _http


@pytest.fixture
def client(fake: FakeRuntime) -> Iterator[Client]:
    fake.routes["GET", "/v1/health"] = lambda call: (200, {"status": "ok"})
    fake.routes["POST", "/v1/executions"] = lambda call: (201, {"execution_id": "e"})
    with Client(server=fake.url) as client:
        yield client


def test_sequential_requests_share_one_connection(fake: FakeRuntime, client: Client) -> None:
    for _ in range(20):
        client.get("/v1/health")
    assert fake.connections == 1


def test_a_busy_worker_keeps_its_connections_open(
    fake: FakeRuntime, make_worker: Callable[..., Worker], start_worker: Callable[[Worker], Worker]
) -> None:
    worker = make_worker(concurrency=2)
    worker.register("a.one", lambda i, c: {})
    start_worker(worker)
    tokens = [fake.enqueue("a.one", {}) for _ in range(100)]
    for token in tokens:
        fake.result(token)
    # Two poll loops, the heartbeat and registration: a handful, not hundreds.
    assert fake.connections <= 5


def test_a_connection_the_server_closed_while_idle_is_replaced(
    fake: FakeRuntime, client: Client
) -> None:
    client.get("/v1/health")
    fake.drop_connections()
    assert client.start("Hello") == "e"
    assert fake.connections == 2


def test_a_replayable_request_is_resent_once_on_a_stale_connection(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    client.get("/v1/health")
    fake.drop_connections()
    # Pretend the close arrived just after the idle check passed.
    monkeypatch.setattr(_http, "_is_dropped", lambda sock: False)

    assert client.get("/v1/health") == {"status": "ok"}
    assert len(fake.calls_to("/v1/health")) == 2


def test_a_start_is_not_resent_on_a_stale_connection(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    client.get("/v1/health")
    fake.drop_connections()
    monkeypatch.setattr(_http, "_is_dropped", lambda sock: False)

    with pytest.raises(ApiError) as caught:
        client.start("Hello")
    assert caught.value.is_connection_error
    assert client.start("Hello") == "e"


def test_a_worker_call_on_a_connection_closed_while_idle_is_sent_again_unchecked(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    fake.routes["POST", "/v1/workers/heartbeat"] = lambda call: (200, {"cancel": []})
    client.post("/v1/workers/heartbeat", {"worker_session_id": "s"})
    fake.drop_connections()

    def no_check(sock: object) -> bool:
        raise AssertionError("a replayable call needs no idle check")

    # Worker calls skip the check: a stale connection costs a second send.
    monkeypatch.setattr(_http, "_is_dropped", no_check)
    assert client.post("/v1/workers/heartbeat", {"worker_session_id": "s"}) == (
        200,
        {"cancel": []},
    )
    assert fake.connections == 2
    assert len(fake.calls_to("/v1/workers/heartbeat")) == 2


def _idle_socket(client: Client) -> socket.socket:
    (conn,) = client._transport._idle
    assert conn.sock is not None
    return conn.sock


def _kernel_timeout_s(sock: socket.socket, option: int) -> float:
    seconds, micros = struct.unpack("ll", sock.getsockopt(socket.SOL_SOCKET, option, 16))
    return float(seconds + micros / 1_000_000)


@pytest.mark.skipif(not _http._KERNEL_TIMEOUTS, reason="kernel time-outs are used on Linux")
def test_a_plain_connection_blocks_and_the_kernel_times_it_out(fake: FakeRuntime) -> None:
    fake.routes["GET", "/v1/health"] = lambda call: (200, {"status": "ok"})
    with Client(server=fake.url, timeout=2.5) as client:
        client.get("/v1/health")
        sock = _idle_socket(client)
        # (The kernel keeps the time-outs in clock ticks, hence the approx.)
        # Blocking: Python polls before no send or recv of it.
        assert sock.gettimeout() is None
        assert _kernel_timeout_s(sock, socket.SO_RCVTIMEO) == pytest.approx(2.5, abs=0.01)
        assert _kernel_timeout_s(sock, socket.SO_SNDTIMEO) == pytest.approx(2.5, abs=0.01)
        # A call with a longer time-out (a long poll's) sets it on the same socket.
        fake.routes["GET", "/v1/executions/e/wait"] = lambda call: (200, {"status": "RUNNING"})
        client.wait("e", timeout_ms=10)
        assert _idle_socket(client) is sock
        assert _kernel_timeout_s(sock, socket.SO_RCVTIMEO) == pytest.approx(15.01, abs=0.01)


def test_a_kernel_timeout_reads_as_timed_out() -> None:
    # What a blocking socket gives when SO_RCVTIMEO expires.
    class Expired:
        def recv(self, size: int) -> bytes:
            raise BlockingIOError(11, "Resource temporarily unavailable")

        def sendall(self, data: bytes) -> None:
            raise BlockingIOError(11, "Resource temporarily unavailable")

    conn = _http._Connection(1.0)
    conn.sock = Expired()  # type: ignore[assignment]
    with pytest.raises(socket.timeout, match=r"^timed out$"):
        conn.read_response("GET")
    with pytest.raises(socket.timeout, match=r"^timed out$"):
        conn.send(b"GET / HTTP/1.1\r\n\r\n")


def test_a_request_leaves_its_connection_idle_and_counted_nowhere_else(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    transport = client._transport
    client.get("/v1/health")
    with pytest.raises(ApiError):  # an error answer: the connection stays
        client.get("/v1/missing")
    fake.drop_connections()
    monkeypatch.setattr(_http, "_is_dropped", lambda conn: False)
    with pytest.raises(ApiError):  # a stale connection: a start is not sent again
        client.start("Hello")
    assert client.start("Hello") == "e"
    assert (transport._busy, transport._waiting, transport._ended) == (set(), set(), set())
    assert len(transport._idle) == 1


def test_request_heads_are_kept_for_a_few_paths_and_sent_as_made(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    monkeypatch.setattr(_http, "MAX_KEPT_STARTS", 2)
    fake.routes["GET", "/v1/executions/e"] = lambda call: (200, {"id": "e"})
    transport = client._transport
    for _ in range(2):
        assert client.get("/v1/health") == {"status": "ok"}
        assert client.start("Hello") == "e"
        assert client.get("/v1/executions/e") == {"id": "e"}  # beyond the limit: made each time
    assert [(method, path) for method, path, _ in transport._starts] == [
        ("GET", "/v1/health"),
        ("POST", "/v1/executions"),
    ]
    assert len(fake.calls_to("/v1/executions/e")) == 2
    # A target that cannot be sent is refused every time, never kept.
    for _ in range(2):
        with pytest.raises(ApiError, match="control characters"):
            client.get("/v1/health\n")
