"""The server's gunicorn worker: gthread, with a short path for plain requests.

Workers and clients call the runtime over a few long-lived keep-alive
connections, one request at a time, and most requests are small POSTs with a
JSON body. gunicorn's generic path (its parser and response objects, a trip
through the poller and the thread pool between two requests) costs more CPU
than the engine's work per call, on a runtime whose single process shares its
cores with the workers it serves.

So a connection stays on its thread while its requests follow each other
closely (`LINGER_S`), and a request that is plain HTTP/1.1 (no chunked body,
no `Expect`, no upgrade, a small `Content-Length` body) is read, handed to the
WSGI app and answered here: one `recv` for the request in the common case,
one `sendall` for the whole response. Anything else, and the first request of
every connection (where gunicorn would negotiate HTTP/2), goes through
gunicorn unchanged, with whatever was read already handed back to its parser.
Responses carry the headers gunicorn would write (Server, Date, Connection).
"""

from __future__ import annotations

import io
import select
import signal
import socket
import struct
import sys
import time
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote_to_bytes

from gunicorn import SERVER
from gunicorn.workers.gthread import ThreadWorker

from orbit_server import logs

# How long a thread waits for a kept-alive connection's next request before
# returning the connection to gunicorn's poller (and the thread to its pool).
# A worker's poll follows its result within a millisecond.
LINGER_S = 0.05
# Requests whose head or body is larger take gunicorn's path, which enforces
# its limits and streams bodies.
MAX_HEAD = 8192
MAX_BODY = 64 * 1024
_RECV = 64 * 1024
# How long the rest of a started request may take to arrive.
SLOW_S = 5.0
# Request headers this path does not handle; their requests go to gunicorn.
_GUNICORN_HEADERS = frozenset(
    {b"transfer-encoding", b"expect", b"upgrade", b"http2-settings", b"te", b"trailer"}
)
_METHODS = frozenset({b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS"})
_NO_BODY = frozenset({204, 304})
_ERROR_500 = "500 Internal Server Error"


class _Fallback(Exception):
    """The request needs gunicorn's path; `data` is what was read of it."""

    def __init__(self, data: bytes) -> None:
        self.data = data


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


class OrbitWorker(ThreadWorker):  # type: ignore[misc]
    def init_signals(self) -> None:
        super().init_signals()
        # Ctrl+C reaches the worker too (same process group): finish requests.
        signal.signal(signal.SIGINT, self.handle_exit)

    def init_process(self) -> None:
        self._date = _Date()
        self._server_header = f"Server: {SERVER}\r\n".encode("latin-1")
        # TLS sockets report "no data yet" differently: gunicorn serves them.
        self._short_path = not self.cfg.is_ssl
        super().init_process()

    def handle(self, conn: Any) -> Any:
        """Serves a connection's requests while they come quickly; gunicorn
        serves the first one and whatever the short path declines."""
        if not self._short_path:
            return super().handle(conn)
        if conn.initialized and not conn.is_http2:
            # Back from the poller, which found it readable (maybe at EOF).
            conn.sock.setblocking(True)
            keep = self._next(conn, wait=False)
        else:
            keep = super().handle(conn)
        if keep is True and self.alive and not conn.is_http2:
            # A receive timeout instead of a select() before each request:
            # one system call less per request.
            _receive_timeout(conn.sock, LINGER_S)
            try:
                while keep is True and self.alive:
                    keep = self._next(conn, wait=True)
            finally:
                _receive_timeout(conn.sock, 0)
        return keep is not False

    def _next(self, conn: Any, *, wait: bool) -> bool | None:
        """Serves the connection's next request; None when none came within
        the receive timeout (the connection stays open), else whether it
        stays open."""
        unreader = conn.parser.unreader
        data = unreader.buf.getvalue()
        if data:
            unreader.buf = io.BytesIO()
        elif wait:
            try:
                data = conn.sock.recv(_RECV)
            except BlockingIOError:
                return None
            if not data:
                return False
        try:
            return self._serve(conn, data)
        except _Fallback as fallback:
            unreader.unread(fallback.data)
            _receive_timeout(conn.sock, 0)
            try:
                return bool(super().handle(conn))
            finally:
                _receive_timeout(conn.sock, LINGER_S)
        except OSError:
            return False

    def _serve(self, conn: Any, data: bytes) -> bool:
        """Answers one plain request; True to keep the connection open."""
        sock = conn.sock
        end = data.find(b"\r\n\r\n")
        while end < 0:
            if len(data) > MAX_HEAD:
                raise _Fallback(data)
            chunk = _recv(sock)
            if not chunk:
                if data:
                    raise _Fallback(data)
                return False
            data += chunk
            end = data.find(b"\r\n\r\n")
        lines = data[:end].split(b"\r\n")
        request_line = lines[0].split(b" ")
        if len(request_line) != 3 or request_line[2] != b"HTTP/1.1":
            raise _Fallback(data)
        method, target = request_line[0], request_line[1]
        if method not in _METHODS or not target.startswith(b"/"):
            raise _Fallback(data)
        environ = self._environ(conn)
        length = 0
        close = False
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            name = name.lower()
            if not colon or not name or name.strip(b" \t") != name or name in _GUNICORN_HEADERS:
                raise _Fallback(data)
            if b"_" in name:
                # Dropped, as gunicorn does: it would read as the same
                # variable as its dashed twin.
                continue
            value = value.strip(b" \t")
            if name == b"content-length":
                if not value.isdigit() or "CONTENT_LENGTH" in environ:
                    raise _Fallback(data)
                length = int(value)
                environ["CONTENT_LENGTH"] = value.decode("latin-1")
                continue
            if name == b"connection":
                close = b"close" in value.lower()
            key = (
                "CONTENT_TYPE"
                if name == b"content-type"
                else "HTTP_" + name.decode("latin-1").upper().replace("-", "_")
            )
            text = value.decode("latin-1")
            if key in environ and key != "CONTENT_TYPE":
                environ[key] += "," + text
            else:
                environ[key] = text
        if length > MAX_BODY:
            raise _Fallback(data)
        start = end + 4
        while len(data) - start < length:
            chunk = _recv(sock)
            if not chunk:
                return False
            data += chunk
        body = data[start : start + length]
        rest = data[start + length :]
        if rest:
            conn.parser.unreader.unread(rest)
        path, _, query = target.partition(b"?")
        environ["REQUEST_METHOD"] = method.decode("latin-1")
        environ["RAW_URI"] = target.decode("latin-1")
        environ["PATH_INFO"] = _unquote(path)
        environ["QUERY_STRING"] = query.decode("latin-1")
        environ["wsgi.input"] = io.BytesIO(body)
        close = close or not self.alive
        return self._respond(sock, environ, close) and not close

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
                "wsgi.url_scheme": "http",
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

    def _respond(self, sock: Any, environ: dict[str, Any], close: bool) -> bool:
        """Runs the app and writes its response; False when the connection
        must close. The head goes out with the body's first chunk, and a
        chunk is written before the next is asked for, so a body iterable
        learns from being resumed that what it yielded was sent (and from
        being closed early that it was not)."""
        started: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Any:
            if exc_info is not None and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [status, headers]
            return _no_write

        result: Any = ()
        try:
            result = self.wsgi(environ, start_response)
            chunks = iter(result)
            first = next(chunks, b"")
            status, headers = started
            code = int(status[:3])
            has_length = any(name.lower() == "content-length" for name, _ in headers)
            if code in _NO_BODY or code < 200:
                first, chunks = b"", iter(())
            elif not has_length:
                # Unknown length: the whole body, to count it.
                first += b"".join(chunks)
                headers = [*headers, ("Content-Length", str(len(first)))]
        except Exception:
            _close(result)
            result = ()
            logs.logger().exception("unexpected error serving a request")
            status, headers, first, chunks = _ERROR_500, [("Content-Length", "0")], b"", iter(())
            close = True
        try:
            sock.sendall(self._head(status, headers, close) + first)
            for chunk in chunks:
                if chunk:
                    sock.sendall(chunk)
        except OSError:
            raise
        except Exception:
            # The head is out: all that can be done is to end the connection.
            logs.logger().exception("unexpected error writing a response body")
            return False
        finally:
            _close(result)
        return not close

    def _head(self, status: str, headers: list[tuple[str, str]], close: bool) -> bytes:
        out = [
            b"HTTP/1.1 ",
            status.encode("latin-1"),
            b"\r\n",
            self._server_header,
            b"Date: ",
            self._date.value(),
            b"\r\nConnection: close\r\n" if close else b"\r\nConnection: keep-alive\r\n",
        ]
        out.extend(f"{name}: {value}\r\n".encode("latin-1") for name, value in headers)
        out.append(b"\r\n")
        return b"".join(out)


def _close(result: Any) -> None:
    closing = getattr(result, "close", None)
    if closing is not None:
        closing()


def _recv(sock: Any) -> bytes:
    """The rest of a request that is arriving, however slowly (within
    `SLOW_S`): the socket's receive timeout is only for the next request."""
    try:
        return bytes(sock.recv(_RECV))
    except BlockingIOError:
        if not select.select([sock], [], [], SLOW_S)[0]:
            raise TimeoutError("the request did not arrive in time") from None
        return bytes(sock.recv(_RECV))


def _receive_timeout(sock: Any, seconds: float) -> None:
    """SO_RCVTIMEO: a blocking receive gives up after `seconds` (0: never)."""
    whole = int(seconds)
    sock.setsockopt(
        socket.SOL_SOCKET,
        socket.SO_RCVTIMEO,
        struct.pack("ll", whole, int((seconds - whole) * 1_000_000)),
    )


def _no_write(data: bytes) -> None:
    raise NotImplementedError("write() is not supported: return the body instead")


def _unquote(path: bytes) -> str:
    """PATH_INFO as WSGI servers give it: percent-decoded bytes as latin-1."""
    if b"%" not in path:
        return path.decode("latin-1")
    return unquote_to_bytes(path).decode("latin-1")
