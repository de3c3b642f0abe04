"""The short path's HTTP/1.1 framing: reading a plain request, writing a head.

gunicorn serves every request its own way; the short path (worker.py), the
worker loop (worker_loop.py) and the front process (front.py) read plain
requests themselves, each with the one parser here (`RequestReader`), so
that all three serve exactly the same requests and give gunicorn back the
same others. worker.py's docstring says what the parser accepts and why.
"""

from __future__ import annotations

import contextlib
import io
import socket
import ssl
import sys
import time
from email.utils import formatdate
from typing import Any, NamedTuple
from urllib.parse import unquote_to_bytes

import httptools

# Requests whose head or body is larger take gunicorn's path, which enforces
# its limits and streams bodies.
MAX_HEAD = 8192
MAX_BODY = 64 * 1024
# Request headers this path does not handle; their requests go to gunicorn.
_GUNICORN_HEADERS = frozenset(
    {b"transfer-encoding", b"expect", b"upgrade", b"http2-settings", b"te", b"trailer"}
)
_METHODS = frozenset({b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS"})
# Fields gunicorn refuses to see twice.
_SINGLETONS = frozenset({"HTTP_HOST", "CONTENT_TYPE"})


def _key(raw_name: bytes) -> str:
    """What a header name (as sent) is in the environ: its variable,
    `_DROPPED` or `_GUNICORN`. Remembered per spelling, as clients send the
    same few headers on every request; the table stops growing at a bound,
    so names made up by a client cannot fill memory."""
    name = raw_name.lower()
    if name in _GUNICORN_HEADERS:
        key = _GUNICORN
    elif b"_" in name:
        # Dropped, as gunicorn does: it would read as the same variable as
        # its dashed twin.
        key = _DROPPED
    elif name == b"content-length":
        key = "CONTENT_LENGTH"
    elif name == b"content-type":
        key = "CONTENT_TYPE"
    else:
        key = "HTTP_" + name.decode("latin-1").upper().replace("-", "_")
    if len(_KEYS) < _MAX_KEYS:
        _KEYS[raw_name] = key
    return key


# Markers of `_key`, told apart by identity (no variable name is empty or
# starts with a space).
_DROPPED = " dropped"
_GUNICORN = " gunicorn"
_MAX_KEYS = 512
_KEYS: dict[bytes, str] = {}


# `OrbitWorker.parse`: more bytes are needed for the head, or for the body.
NEED_HEAD = 0
NEED_BODY = 1


class _Fallback(Exception):
    """The request needs gunicorn's path; `data` is what was read of it."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class _Head:
    """httptools' callbacks: what its parser reported of one request."""

    __slots__ = ("complete", "done", "headers", "keep_alive", "parser", "url")

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.complete = False
        self.keep_alive = False
        self.done = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.complete = True
        # llhttp forgets it once the message is complete.
        self.keep_alive = self.parser.should_keep_alive()

    def on_message_complete(self) -> None:
        self.done = True


def _parser_of(conn: Any) -> _Head:
    """The connection's parser, ready for a request. One parser serves a
    connection's requests in turn (it resets after each message), until a
    request it does not finish goes to gunicorn."""
    head: _Head | None = getattr(conn, "orbit_parser", None)
    if head is None:
        head = conn.orbit_parser = _Head()
    else:
        head.url = b""
        head.headers = []
        head.complete = head.done = False
    return head


class _Date:
    """The Date header's value, formatted once a second."""

    __slots__ = ("_second", "_value")

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def value(self) -> bytes:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._value = formatdate(now, usegmt=True).encode("latin-1")
            self._second = second
        return self._value


class RequestReader:
    """The short path's request parser and acceptance rules, given
    gunicorn's limits on a head (`OrbitWorker._set_limits`). Shared by the
    thread path, the worker loop and the front process (front.py), so that
    each serves exactly the requests the others would."""

    __slots__ = ("max_fields", "max_head", "max_line")

    def __init__(self, *, max_head: int, max_line: int, max_fields: int) -> None:
        self.max_head = max_head
        self.max_line = max_line
        self.max_fields = max_fields

    def parse(self, conn: Any, data: bytes) -> tuple[dict[str, Any], bool, int] | int:
        """The request that `data` starts: its environ, whether the
        connection closes after it and where it ends in `data`; or
        `NEED_HEAD` / `NEED_BODY` when more bytes must come first (the
        connection's parser is then dropped, and the next call parses the
        request from its start). Shared with the worker loop.

        httptools (llhttp, strict) parses the head; nothing is served that
        it refuses, and nothing that gunicorn's parser would read otherwise
        or refuse: those requests raise `_Fallback`, so gunicorn answers
        them itself. The head is fed whole (it ends at the first blank
        line, as llhttp requires CRLF line ends) and then exactly its
        Content-Length of body, so the parser never reads past the request.
        """
        end = data.find(b"\r\n\r\n")
        if end < 0:
            if len(data) > self.max_head:
                raise _Fallback(data)
            return NEED_HEAD
        start = end + 4
        if start > self.max_head:
            raise _Fallback(data)
        head = _parser_of(conn)
        parser = head.parser
        try:
            parser.feed_data(memoryview(data)[:start])
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            raise _Fallback(data) from None
        environ, length = self._environ_of(conn, head, data)
        close = not head.keep_alive
        if length > MAX_BODY or head.done != (length == 0):
            raise _Fallback(data)
        if len(data) - start < length:
            conn.orbit_parser = None
            return NEED_BODY
        if length:
            # No on_body callback: llhttp only counts the body's bytes, to
            # end the message where the head said it ends.
            try:
                parser.feed_data(memoryview(data)[start : start + length])
            except httptools.HttpParserError:
                raise _Fallback(data) from None
            if not head.done:
                raise _Fallback(data)
            environ["wsgi.input"] = io.BytesIO(data[start : start + length])
        else:
            environ["wsgi.input"] = io.BytesIO()
        return environ, close, start + length

    def _environ_of(self, conn: Any, head: _Head, data: bytes) -> tuple[dict[str, Any], int]:
        """The environ gunicorn would build for the parsed head, and its
        Content-Length; `_Fallback` where gunicorn's rules differ from
        llhttp's or the request is not for this path."""
        parser = head.parser
        method = parser.get_method()
        url = head.url
        if (
            not head.complete
            or method not in _METHODS
            or url[:1] != b"/"
            or b"#" in url
            or len(head.headers) >= self.max_fields
        ):
            raise _Fallback(data)
        # The request line as written: HTTP/1.1 (this path serves no other
        # version), and what gunicorn reads, which splits the line at single
        # spaces and skips one empty line before it (llhttp accepts runs).
        line = method + b" " + url + b" HTTP/1.1\r\n"
        if len(line) > self.max_line or not (
            data.startswith(line) or (data.startswith(b"\r\n") and data.startswith(line, 2))
        ):
            raise _Fallback(data)
        environ = self._environ(conn)
        length = 0
        for raw_name, raw_value in head.headers:
            key = _KEYS.get(raw_name) or _key(raw_name)
            if key is _DROPPED:
                continue
            if key is _GUNICORN:
                raise _Fallback(data)
            # llhttp has refused control characters, bare CR and LF, and
            # obs-fold; it keeps trailing blanks, which gunicorn strips.
            value = raw_value.strip(b" \t").decode("latin-1")
            if key == "CONTENT_LENGTH":
                # llhttp has checked the digits and refused a second one.
                length = int(value)
                environ[key] = value
            elif key in environ:
                if key in _SINGLETONS:
                    # gunicorn refuses a second Host or Content-Type.
                    raise _Fallback(data)
                environ[key] += "," + value
            else:
                environ[key] = value
        path, _, query = url.partition(b"?")
        environ["REQUEST_METHOD"] = method.decode("latin-1")
        environ["RAW_URI"] = url.decode("latin-1")
        environ["PATH_INFO"] = _unquote(path)
        environ["QUERY_STRING"] = query.decode("latin-1")
        return environ, length

    def _environ(self, conn: Any) -> dict[str, Any]:
        """A new request's environ: what is the same for every request on
        the connection, computed once."""
        base: dict[str, Any] | None = getattr(conn, "orbit_environ", None)
        if base is None:
            server, client = conn.server, conn.client
            base = {
                "wsgi.errors": sys.stderr,
                "wsgi.version": (1, 0),
                "wsgi.multithread": True,
                "wsgi.multiprocess": False,
                "wsgi.run_once": False,
                "wsgi.url_scheme": "https" if isinstance(conn.sock, ssl.SSLSocket) else "http",
                "wsgi.input_terminated": True,
                "gunicorn.socket": conn.sock,
                "SERVER_PROTOCOL": "HTTP/1.1",
                "SERVER_NAME": str(server[0]) if isinstance(server, tuple) else str(server),
                "SERVER_PORT": str(server[1]) if isinstance(server, tuple) else "",
                "REMOTE_ADDR": str(client[0]) if isinstance(client, tuple) else str(client),
                "REMOTE_PORT": str(client[1]) if isinstance(client, tuple) else "",
                "SCRIPT_NAME": "",
            }
            conn.orbit_environ = base
        return base.copy()


def _unquote(path: bytes) -> str:
    """PATH_INFO as WSGI servers give it: percent-decoded bytes as latin-1."""
    if b"%" not in path:
        return path.decode("latin-1")
    return unquote_to_bytes(path).decode("latin-1")


_JSON = b"content-type: application/json\r\n"


class Asked(NamedTuple):
    """What the loop reads of a request to make its call: the request
    line's parts, the headers its checks read, the body, and whether the
    connection closes after it. The front process (front.py) sends these."""

    method: str
    path: str
    raw_uri: str
    content_type: str | None
    authorization: str | None
    length: str | None
    body: bytes
    close: bool


def asked(environ: dict[str, Any], close: bool) -> Asked:
    """The parts of a parsed request (`RequestReader.parse`) the loop reads."""
    return Asked(
        environ["REQUEST_METHOD"],
        environ["PATH_INFO"],
        environ["RAW_URI"],
        environ.get("CONTENT_TYPE"),
        environ.get("HTTP_AUTHORIZATION"),
        environ.get("CONTENT_LENGTH"),
        environ["wsgi.input"].getvalue(),
        close,
    )


def answer_bytes(head: bytes, version: bytes, body: bytes | None) -> bytes:
    """A hot call's response: `head` (`write_head`), the API version's
    header line and the body's fields."""
    if body is None:
        return head[:-2] + version + b"\r\n"
    return head[:-2] + version + _JSON + b"content-length: %d\r\n\r\n" % len(body) + body


def write_head(status: str, server: bytes, date: bytes, close: bool) -> bytes:
    """A response head as gunicorn writes it (status line, Server, Date,
    Connection), ending with its blank line."""
    return b"".join(
        (
            b"HTTP/1.1 ",
            status.encode("latin-1"),
            b"\r\n",
            server,
            b"Date: ",
            date,
            b"\r\nConnection: close\r\n\r\n" if close else b"\r\nConnection: keep-alive\r\n\r\n",
        )
    )


# What `close_now` reads per call of what a client sent before it closes.
_DRAIN = 64 * 1024


def close_now(sock: Any) -> None:
    """Closes a connection without waiting for its client: what it sent is
    read first (as far as it has arrived), so that closing with unread bytes
    does not reset the connection under a response the client is reading.
    (Shut down for every process holding the connection: the front's and
    the worker process's copies of it.)"""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        sock.setblocking(False)
        for _ in range(16):
            if not sock.recv(_DRAIN):
                break
    with contextlib.suppress(OSError):
        sock.close()
