"""OrbitWorker's short path writing a WSGI response to a socket, and its
rewriting of gunicorn's error pages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from gunicorn.http.errors import (
    InvalidHeader,
    InvalidRequestLine,
    LimitRequestHeaders,
    LimitRequestLine,
)

from orbit_server.http_short import _Date
from orbit_server.worker import OrbitWorker


class FakeSocket:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[bytes] = []
        self.fail = fail

    def sendall(self, data: bytes) -> None:
        if self.fail:
            raise BrokenPipeError("gone")
        self.sent.append(data)


def _worker(app: Callable[..., Any]) -> OrbitWorker:
    # Only what _respond uses: no gunicorn arbiter or sockets behind it.
    worker = OrbitWorker.__new__(OrbitWorker)
    worker.wsgi = app
    worker._date = _Date()
    worker._server_header = b"Server: gunicorn\r\n"
    return worker


def _streaming(log: list[str], headers: list[tuple[str, str]]) -> Callable[..., Any]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        start_response("200 OK", headers)

        def body() -> Iterator[bytes]:
            written = False
            try:
                yield b"hello"
                written = True
            finally:
                log.append("written" if written else "not written")

        return body()

    return app


def test_a_chunk_is_sent_before_the_body_is_resumed() -> None:
    log: list[str] = []
    sock = FakeSocket()
    worker = _worker(_streaming(log, [("Content-Length", "5")]))
    assert worker._respond(sock, {}, close=False) is True
    assert log == ["written"]
    head, _, body = b"".join(sock.sent).partition(b"\r\n\r\n")
    assert body == b"hello"
    assert head.startswith(b"HTTP/1.1 200 OK\r\nServer: gunicorn\r\nDate: ")
    assert b"\r\nConnection: keep-alive\r\nContent-Length: 5" in head


def test_a_failed_write_closes_the_body_without_resuming_it() -> None:
    log: list[str] = []
    worker = _worker(_streaming(log, [("Content-Length", "5")]))
    with pytest.raises(BrokenPipeError):
        worker._respond(FakeSocket(fail=True), {}, close=False)
    assert log == ["not written"]


def test_a_body_of_unknown_length_is_counted() -> None:
    log: list[str] = []
    sock = FakeSocket()
    worker = _worker(_streaming(log, []))
    assert worker._respond(sock, {}, close=True) is False
    head, _, body = sock.sent[0].partition(b"\r\n\r\n")
    assert body == b"hello"
    assert b"\r\nConnection: close\r\nContent-Length: 5" in head


def test_an_app_that_raises_gets_a_500_and_the_connection_closes() -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        raise RuntimeError("boom")

    sock = FakeSocket()
    assert _worker(app)._respond(sock, {}, close=False) is False
    head, _, body = sock.sent[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert b"Connection: close\r\nContent-Type: application/json\r\n" in head
    assert b"\r\nContent-Length: %d" % len(body) in head
    assert orjson.loads(body) == {
        "error": {"code": "INTERNAL", "message": "internal error: RuntimeError"}
    }


class ErrorSocket(FakeSocket):
    """What gunicorn's error writing asks of a socket."""

    def gettimeout(self) -> float:
        return 1.0

    def setblocking(self, flag: bool) -> None:
        pass


class QuietLog:
    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (LimitRequestLine(5000, 4094), b"414 URI Too Long", "Request line too long"),
        (
            LimitRequestHeaders("limit request headers fields"),
            b"431 Request Header Fields Too Large",
            "Request header fields too large",
        ),
        (InvalidRequestLine("GET"), b"400 Bad Request", "Malformed HTTP request"),
        (InvalidHeader("CONTENT-LENGTH"), b"400 Bad Request", "Malformed HTTP request"),
        (RuntimeError("boom"), b"500 Internal Server Error", "INTERNAL"),
    ],
)
def test_gunicorn_refusals_are_plain_text_and_failures_json(
    exc: Exception, status: bytes, code: str
) -> None:
    worker = _worker(lambda environ, start_response: [])
    worker.log = QuietLog()
    sock = ErrorSocket()
    worker.handle_error(None, sock, ("127.0.0.1", 1), exc)
    head, _, body = b"".join(sock.sent).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 " + status + b"\r\n")
    assert b"\r\nConnection: close\r\n" in head
    assert b"\r\nContent-Length: %d" % len(body) in head
    if code != "INTERNAL":
        # Chapter 67: the HTTP layer's own errors are plain text.
        assert b"\r\nContent-Type: text/plain; charset=utf-8\r\n" in head
        assert body.startswith(code.encode())
        return
    assert b"\r\nContent-Type: application/json\r\n" in head
    error = orjson.loads(body)["error"]
    assert error["code"] == code
    assert "boom" not in error["message"]


def test_header_names_made_up_by_clients_do_not_fill_the_name_table() -> None:
    from orbit_server import http_short as short_path

    for i in range(2 * short_path._MAX_KEYS):
        assert short_path._key(b"X-Made-Up-%d" % i) == f"HTTP_X_MADE_UP_{i}"
    assert len(short_path._KEYS) <= short_path._MAX_KEYS
    assert short_path._key(b"Content-Length") == "CONTENT_LENGTH"
    assert short_path._key(b"x_forwarded") is short_path._DROPPED
    assert short_path._key(b"Transfer-Encoding") is short_path._GUNICORN
