"""The SDK's own HTTP/1.1 client against answers framed every way a server
or a proxy may frame them: the runtime's Content-Length, chunked bodies,
bodies ended by closing, interim 100 answers, HTTP/1.0 and heads split
over many packets."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from orbit_sdk import ApiError, Client

Script = Callable[[socket.socket, bytes], bool]  # answers one request; False closes


class ScriptedServer:
    """Accepts connections and answers each request with `script`, counting
    the connections and keeping every request's raw bytes."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[bytes] = []
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            pending = b""
            while True:
                while b"\r\n\r\n" not in pending:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    pending += chunk
                head, _, pending = pending.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(pending) < length:
                    pending += sock.recv(65536)
                request, pending = head + b"\r\n\r\n" + pending[:length], pending[length:]
                self.requests.append(request)
                if not self.script(sock, request):
                    return

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def answer(raw: bytes, keep: bool = True) -> Script:
    def script(sock: socket.socket, request: bytes) -> bool:
        sock.sendall(raw)
        return keep

    return script


def test_a_content_length_body_and_keep_alive(serve: Callable[[Script], ScriptedServer]) -> None:
    body = b'{"status":"ok"}'
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
    server = serve(answer(raw % (len(body), body)))
    with Client(server=server.url, token="") as client:
        for _ in range(5):
            assert client.get("/v1/health") == {"status": "ok"}
    assert server.connections == 1


def test_a_chunked_body_with_extensions_and_trailers(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5;ext=1\r\n{"a":\r\n'
        b"3\r\n 1}\r\n"
        b"0\r\nX-Trailer: yes\r\n\r\n"
    )
    server = serve(answer(raw))
    with Client(server=server.url, token="") as client:
        assert client.get("/x") == {"a": 1}
        assert client.get("/x") == {"a": 1}
    assert server.connections == 1


def test_a_body_ended_by_closing_the_connection(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    server = serve(answer(b"HTTP/1.0 200 OK\r\n\r\n[1, 2]", keep=False))
    with Client(server=server.url, token="") as client:
        assert client.get("/x") == [1, 2]
        assert client.get("/x") == [1, 2]
    assert server.connections == 2


def test_connection_close_is_honoured(serve: Callable[[Script], ScriptedServer]) -> None:
    raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    server = serve(answer(raw, keep=False))
    with Client(server=server.url, token="") as client:
        assert client.post("/v1/executions", {}) == (200, {})
        assert client.post("/v1/executions", {}) == (200, {})
    assert server.connections == 2


def test_an_interim_answer_is_skipped(serve: Callable[[Script], ScriptedServer]) -> None:
    raw = b'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 8\r\n\r\n{"a": 2}'
    server = serve(answer(raw))
    with Client(server=server.url, token="") as client:
        assert client.post("/x", {"b": 1}) == (201, {"a": 2})


def test_a_head_split_over_many_packets(serve: Callable[[Script], ScriptedServer]) -> None:
    body = b'{"error":{"code":"NOT_FOUND","message":"x"}}'
    raw = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    def dribble(sock: socket.socket, request: bytes) -> bool:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, len(raw), 3):
            sock.sendall(raw[i : i + 3])
        return True

    server = serve(dribble)
    with Client(server=server.url, token="") as client, pytest.raises(ApiError) as caught:
        client.get("/x")
    assert (caught.value.status, caught.value.code, caught.value.message) == (404, "NOT_FOUND", "x")


def test_a_truncated_body_is_a_connection_error(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", keep=False))
    with Client(server=server.url, token="") as client, pytest.raises(ApiError) as caught:
        client.get("/x")
    assert caught.value.is_connection_error


def test_the_request_head_and_body(serve: Callable[[Script], ScriptedServer]) -> None:
    server = serve(answer(b"HTTP/1.1 204 No Content\r\n\r\n"))
    with Client(server=server.url + "/base", token="secret") as client:
        assert client.post("/v1/tasks/complete", {"token": "t", "output": {"n": 1.5}}) == (
            204,
            None,
        )
        assert client.post("/v1/workers/unregister", None) == (204, None)
    port = server.url.rsplit(":", 1)[1]
    assert server.requests[0] == (
        b"POST /base/v1/tasks/complete HTTP/1.1\r\n"
        b"Host: 127.0.0.1:" + port.encode() + b"\r\n"
        b"accept: application/json\r\n"
        b"user-agent: orbit-python/0.1.0\r\n"
        b"authorization: Bearer secret\r\n"
        b"content-type: application/json\r\n"
        b"Content-Length: 32\r\n\r\n"
        b'{"token":"t","output":{"n":1.5}}'
    )
    assert server.requests[1].endswith(b"Content-Length: 0\r\n\r\n")


def test_a_token_that_cannot_be_a_header_fails_each_request() -> None:
    client = Client(server="http://127.0.0.1:1", token="a\nb")
    with pytest.raises(ValueError, match="Invalid header value"):
        client.get("/v1/health")
