"""HTTP/1.1 on the wire of a real `orbit server`: kept-alive connections.

The server's worker answers the requests after a connection's first one
itself and hands anything unusual to gunicorn. Every test here therefore
sends one request to warm the connection, then the request under test on the
same socket, and reads the raw bytes back.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from server_harness import ServerProcess

TOKEN = "admin-secret"
AUTH = f"Authorization: Bearer {TOKEN}\r\n".encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("wire") / "orbit.db", "--token", TOKEN).start()
    yield proc
    proc.stop()


class Wire:
    """One raw socket; `exchange` sends bytes and reads whole responses."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            self._more()
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split(" ")[1]), headers, body

    def exchange(self, data: bytes) -> tuple[int, dict[str, str], bytes]:
        self.send(data)
        return self.response()

    def closed(self) -> bool:
        """True when the server closed the connection (after what was read)."""
        return self.buf == b"" and self.sock.recv(1) == b""

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        self.buf += chunk


def _get(path: str, extra: bytes = b"") -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: t\r\n%s%s\r\n" % (path.encode(), AUTH, extra)


def _post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    head = b"POST %s HTTP/1.1\r\nHost: t\r\n%sContent-Type: application/json\r\n" % (
        path.encode(),
        AUTH,
    )
    return head + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.fixture
def wire(server: ServerProcess) -> Iterator[Wire]:
    with _warm(server) as warmed:
        yield warmed


@contextlib.contextmanager
def _warm(server: ServerProcess) -> Iterator[Wire]:
    wire = Wire(server.addr)
    try:
        assert wire.exchange(_get("/v1/health"))[0] == 200
        yield wire
    finally:
        wire.sock.close()


def _register(wire: Wire) -> str:
    body = orjson.dumps(
        {
            "worker_id": "wire",
            "runtime": "python",
            "contracts": [{"task_name": "wire.t", "contract_version": "1.0.0"}],
        }
    )
    status, _, reply = wire.exchange(_post("/v1/workers/register", body))
    assert status == 200, reply
    return str(orjson.loads(reply)["worker_session_id"])


def test_kept_alive_answers_carry_the_usual_headers(wire: Wire) -> None:
    status, headers, body = wire.exchange(_get("/v1/health"))
    assert status == 200
    assert orjson.loads(body)["status"] == "ok"
    assert headers["connection"] == "keep-alive"
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(body))
    assert headers["x-orbit-api-version"] == "orbit-api/1"
    assert headers["server"] == "gunicorn"
    assert headers["date"].endswith(" GMT")


def test_pipelined_requests_are_answered_in_order(wire: Wire) -> None:
    wire.send(_get("/v1/executions/nope-1") + _get("/v1/health") + _get("/v1/executions/nope-2"))
    first, second, third = wire.response(), wire.response(), wire.response()
    assert (first[0], second[0], third[0]) == (404, 200, 404)
    assert b"nope-1" in first[2]
    assert b"nope-2" in third[2]


def test_a_head_and_body_in_separate_packets(wire: Wire) -> None:
    request = _post("/v1/workers/heartbeat", b'{"worker_session_id": "gone"}')
    wire.send(request[:20])
    time.sleep(0.02)
    wire.send(request[20:-5])
    time.sleep(0.02)
    wire.send(request[-5:])
    status, _, body = wire.response()
    assert status == 404
    assert orjson.loads(body)["error"]["code"] == "UNKNOWN_SESSION"


def test_no_content_has_no_body_and_keeps_the_connection(wire: Wire) -> None:
    session = _register(wire)
    poll = orjson.dumps({"worker_session_id": session, "wait_ms": 0})
    status, headers, body = wire.exchange(_post("/v1/workers/poll", poll))
    assert (status, body) == (204, b"")
    assert "content-length" not in headers
    assert wire.exchange(_get("/v1/health"))[0] == 200


def test_connection_close_is_honoured(wire: Wire) -> None:
    status, headers, _ = wire.exchange(_get("/v1/health", b"Connection: close\r\n"))
    assert status == 200
    assert headers["connection"] == "close"
    assert wire.closed()


def test_a_percent_encoded_path_is_decoded(wire: Wire) -> None:
    status, _, body = wire.exchange(_get("/v1/executions/a%20b"))
    assert status == 404
    assert b"a b" in body


def test_query_strings_reach_the_app(wire: Wire) -> None:
    status, _, body = wire.exchange(_get("/v1/executions/x/wait?timeout_ms=oops"))
    assert status == 400
    assert b"timeout_ms" in body


def test_unusual_requests_are_still_served(wire: Wire) -> None:
    """Chunked bodies, HTTP/1.0 and large bodies take gunicorn's path on a
    connection the worker has been answering."""
    parts = (b'{"worker_session', b'_id": "chunked"}')
    chunked = (
        b"POST /v1/workers/heartbeat HTTP/1.1\r\nHost: t\r\n%s"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        % AUTH
        + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)
        + b"0\r\n\r\n"
    )
    status, _, body = wire.exchange(chunked)
    assert status == 404, body
    assert orjson.loads(body)["error"]["code"] == "UNKNOWN_SESSION"
    padding = "x" * (200 * 1024)
    big = orjson.dumps({"worker_session_id": "big", "padding": padding})
    status, _, body = wire.exchange(_post("/v1/workers/heartbeat", big))
    assert status == 404, body
    status, _, _ = wire.exchange(b"GET /v1/health HTTP/1.0\r\nHost: t\r\n\r\n")
    assert status == 200
    assert wire.closed()


def test_a_bad_header_line_is_refused(wire: Wire) -> None:
    status, _, _ = wire.exchange(b"GET /v1/health HTTP/1.1\r\nHost: t\r\nno colon here\r\n\r\n")
    assert status == 400


def test_the_worker_token_is_checked_on_kept_alive_requests(wire: Wire) -> None:
    request = b"GET /v1/executions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong\r\n\r\n"
    status, _, body = wire.exchange(request)
    assert status == 401
    assert orjson.loads(body)["error"]["code"] == "UNAUTHENTICATED"


def test_a_large_body_over_the_limit_is_refused(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db", "--max-body", "1000") as proc, _warm(proc) as wire:
        status, _, _ = wire.exchange(_post("/v1/workflows", b"{" + b" " * 5000 + b"}"))
        assert status == 413


# Requests gunicorn refuses before the app sees them, with the status and the
# error code of the JSON envelope each one gets.
_REFUSED = {
    "long request line": (b"GET /v1/" + b"x" * 5000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
    "too many headers": (
        b"GET /v1/health HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n",
        431,
    ),
    "long header line": (b"GET /v1/health HTTP/1.1\r\nX-Big: " + b"y" * 9000 + b"\r\n\r\n", 431),
    "header without colon": (b"GET /v1/health HTTP/1.1\r\nHost: t\r\nno colon\r\n\r\n", 400),
    "bad request line": (b"GET /v1/health\r\nHost: t\r\n\r\n", 400),
    "folded header": (b"GET /v1/health HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", 400),
    "bare CR": (b"GET /v1/health HTTP/1.1\r\nHost: t\rX-A: a\r\n\r\n", 400),
    "two lengths": (
        b"POST /v1/workers/heartbeat HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
        400,
    ),
    "length and chunked": (
        b"POST /v1/workers/heartbeat HTTP/1.1\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    "two hosts": (b"GET /v1/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
}


@pytest.mark.parametrize("kept_alive", [False, True], ids=["first", "kept-alive"])
@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_refusals_are_plain_text_not_html(
    server: ServerProcess, case: str, kept_alive: bool
) -> None:
    """gunicorn's own refusals, on a new connection (its path) and on a
    kept-alive one (the worker's path hands them to gunicorn)."""
    request, expected = _REFUSED[case]
    wire = Wire(server.addr)
    try:
        if kept_alive:
            assert wire.exchange(_get("/v1/health"))[0] == 200
        status, headers, body = wire.exchange(request)
        assert status == expected, body
        # Chapter 67: errors of the HTTP layer have a plain-text body.
        assert headers["content-type"].startswith("text/plain")
        assert body and b"<" not in body, body
        assert headers["connection"] == "close"
        assert wire.closed()
    finally:
        wire.sock.close()
