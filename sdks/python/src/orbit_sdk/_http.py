"""HTTP/1.1 over a small pool of keep-alive connections, on plain sockets.

A worker issues a request (or two) for every task; opening a TCP (and maybe
TLS) connection for each would cost more than the work itself, so each
connection serves one request at a time and goes back to an idle pool;
concurrent callers each take an idle connection, or open one.

Why not http.client: a worker's requests are tiny, so the fixed cost per
request is what counts, and http.client's is large: a file object made on
the socket for every response, the headers run through the email package's
parser, every header name and value checked on the way out. Measured in the
benchmark worker (benchmarks/bench_http.py --worker-kind sdk), that was
about half of the worker's CPU per step. The part of HTTP/1.1 the SDK needs
is small and written here: a request is one buffer (head and body) sent in
one call; a response is read into a per-connection buffer, its head split on
CRLF and only the framing headers looked at; its body is framed by
Content-Length, by chunked transfer coding, or by the end of the connection.
Usually the whole response arrives in one recv().

On Linux a plain (not TLS) connection's socket is blocking, timed out by the
kernel (SO_RCVTIMEO, SO_SNDTIMEO) rather than by Python, whose time-outs call
poll() before every send and recv: a request is then two system calls, not
four, and two fewer points where a poll thread lets go of the GIL and must
win it back from the others (_set_kernel_timeouts).

What the callers rely on is kept from the http.client version: errors before
a response are worded the way urllib words them ("<urlopen error ...>"),
the server closing a connection without answering reads "Remote end closed
connection without response", a socket time-out reads "timed out", and a
connection the server closed while it sat idle is found before reuse
(_is_dropped) or, for a replayable request, replaced once.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import ssl
import struct
import sys
import threading
from urllib.parse import urlsplit

# Enough for a worker's poll threads, its heartbeat and a few client calls;
# connections beyond it are closed after use instead of kept open.
MAX_IDLE_CONNECTIONS = 32
# A response head longer than this is not from an ORBIT runtime (http.client's limit).
MAX_HEAD_BYTES = 65536
RECV_BYTES = 65536
# Request heads kept for reuse: a worker's few paths, and the first of a
# client's (its paths name executions, so most are sent once).
MAX_KEPT_STARTS = 64
_BODYLESS_STATUSES = frozenset({204, 304})
_METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
# The response headers the SDK reads: framing, and the body's type.
_READ_HEADERS = frozenset({"connection", "content-length", "content-type", "transfer-encoding"})
# What http.client refuses in a request target.
_BAD_TARGET_CHAR = re.compile(r"[\x00-\x20\x7f]").search
# Where the kernel can time out a blocking socket's calls itself: Linux with
# a 64-bit `struct timeval` (two longs). Elsewhere Python's own time-outs,
# which poll() before every send and recv, are used.
_KERNEL_TIMEOUTS = sys.platform.startswith("linux") and struct.calcsize("l") == 8


class _RemoteClosed(ConnectionResetError):
    """The server closed the connection before the first byte of a response."""


# Errors that mean the server closed an idle keep-alive connection before it
# read our request. Only then is sending the request again known to be safe.
_STALE_CONNECTION_ERRORS = (
    _RemoteClosed,
    ConnectionResetError,
    BrokenPipeError,
)


class ConnectionFailure(Exception):
    """The request got no HTTP response; the argument says why."""


class _BadResponse(Exception):
    """The bytes received are not an HTTP/1.x response we can frame."""


class Response:
    __slots__ = ("body", "content_type", "reason", "status")

    def __init__(self, status: int, reason: str, content_type: str, body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.content_type = content_type
        self.body = body


class _Connection:
    """One connection to the server: its socket once opened (None before
    and after) and the bytes received beyond the response last read."""

    __slots__ = ("_buffer", "_kernel_timeout", "_poller", "sock", "timeout")

    def __init__(self, timeout: float) -> None:
        self.sock: socket.socket | None = None
        self.timeout = timeout
        self._buffer = bytearray()
        self._poller: select.poll | None = None
        # Whether the socket blocks and the kernel times its calls out
        # (SO_RCVTIMEO, SO_SNDTIMEO) instead of Python (_set_kernel_timeouts).
        self._kernel_timeout = False

    def open(self, address: tuple[str, int], tls: ssl.SSLContext | None, host: str) -> None:
        sock = socket.create_connection(address, self.timeout)
        try:
            # Requests go out in one send; do not hold them back for an ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=host)
            elif _KERNEL_TIMEOUTS and self.timeout > 0:
                _set_kernel_timeouts(sock, self.timeout)
                self._kernel_timeout = True
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        if hasattr(select, "poll"):
            self._poller = select.poll()
            self._poller.register(sock, select.POLLIN)

    def set_timeout(self, timeout: float) -> None:
        if timeout != self.timeout:
            self.timeout = timeout
            sock = self.sock
            if sock is None:
                return
            if self._kernel_timeout and timeout > 0:
                _set_kernel_timeouts(sock, timeout)
            else:
                self._kernel_timeout = False
                sock.settimeout(timeout)

    def readable(self) -> bool:
        """Whether an idle connection has something to read, which means the
        peer closed it (or broke the protocol): either way it is not reusable."""
        sock = self.sock
        if sock is None:
            return True
        if self._buffer:
            return True
        if self._poller is not None:
            return bool(self._poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._poller = None
        self._kernel_timeout = False
        self._buffer.clear()
        if sock is not None:
            sock.close()

    def read_response(self, method: str) -> tuple[Response, bool]:
        """The next response, and whether the server closes the connection after it."""
        while True:
            status, reason, version, headers = self._read_head()
            # Interim answers (100 Continue and the like) precede the real one.
            if not (100 <= status < 200) or status == 101:
                break
        connection = headers.get("connection", "").lower()
        if version == "HTTP/1.0":
            will_close = "keep-alive" not in connection
        else:
            will_close = "close" in connection
        if method == "HEAD" or status in _BODYLESS_STATUSES or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._read_chunked()
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise _BadResponse("invalid Content-Length") from None
            if length < 0:
                raise _BadResponse("invalid Content-Length")
            body = self._read_exactly(length)
        else:
            body = self._read_to_end()
            will_close = True
        content_type = headers.get("content-type", "")
        return Response(status, reason, content_type, body), will_close

    def send(self, data: bytes) -> None:
        assert self.sock is not None
        try:
            self.sock.sendall(data)
        except BlockingIOError:
            # Only SO_SNDTIMEO expiring makes a blocking send give EAGAIN.
            raise socket.timeout("timed out") from None

    def _recv(self) -> bytes:
        assert self.sock is not None
        try:
            return self.sock.recv(RECV_BYTES)
        except BlockingIOError:
            # Only SO_RCVTIMEO expiring makes a blocking recv give EAGAIN;
            # it reads as Python's own time-out did.
            raise socket.timeout("timed out") from None

    def _read_head(self) -> tuple[int, str, str, dict[str, str]]:
        buffer = self._buffer
        start = 0
        while True:
            end = buffer.find(b"\r\n\r\n", start)
            if end >= 0:
                head = bytes(buffer[:end])
                del buffer[: end + 4]
                break
            if len(buffer) > MAX_HEAD_BYTES:
                raise _BadResponse(f"got more than {MAX_HEAD_BYTES} bytes when reading headers")
            start = max(0, len(buffer) - 3)
            chunk = self._recv()
            if not chunk:
                if not buffer:
                    raise _RemoteClosed("Remote end closed connection without response")
                raise _BadResponse("the connection closed within a response's headers")
            buffer += chunk
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or len(code) != 3 or not code.isdigit():
            raise _BadResponse(f"not an HTTP response: {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                key = name.strip().lower()
                # Only the headers read_response looks at are kept.
                if key not in _READ_HEADERS:
                    continue
                value = value.strip()
                # Repeated headers are joined, as RFC 9110 allows for lists.
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return int(code), reason.strip(), version, headers

    def _read_exactly(self, length: int) -> bytes:
        buffer = self._buffer
        while len(buffer) < length:
            chunk = self._recv()
            if not chunk:
                raise _BadResponse(
                    f"IncompleteRead({len(buffer)} bytes read, {length - len(buffer)} more expected)"
                )
            buffer += chunk
        data = bytes(buffer[:length])
        del buffer[:length]
        return data

    def _read_line(self) -> bytes:
        buffer = self._buffer
        while True:
            end = buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 2]
                return line
            if len(buffer) > MAX_HEAD_BYTES:
                raise _BadResponse("a chunk line is too long")
            chunk = self._recv()
            if not chunk:
                raise _BadResponse("the connection closed within a chunked body")
            buffer += chunk

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_field = self._read_line().split(b";", 1)[0].strip()
            try:
                size = int(size_field, 16)
            except ValueError:
                raise _BadResponse("invalid chunk size") from None
            if size == 0:
                break
            parts.append(self._read_exactly(size))
            if self._read_exactly(2) != b"\r\n":
                raise _BadResponse("a chunk does not end with CRLF")
        # Trailer fields, up to the empty line.
        while self._read_line():
            pass
        return b"".join(parts)

    def _read_to_end(self) -> bytes:
        buffer = self._buffer
        while True:
            chunk = self._recv()
            if not chunk:
                data = bytes(buffer)
                buffer.clear()
                return data
            buffer += chunk


class Transport:
    """Sends requests to one server, keeping idle connections open for reuse."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | None) -> None:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"invalid ORBIT server URL {server!r}: expected http:// or https://")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        default_port = 443 if self._https else 80
        port = parts.port or default_port
        self._address = (self._host, port)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if port == default_port else f"{host}:{port}"
        self._base_path = parts.path.rstrip("/")
        self._ssl_context = (ssl_context or ssl.create_default_context()) if self._https else None
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        # Connections a request is using now, for interrupt().
        self._busy: set[_Connection] = set()
        # Those of them waiting for work (polls), for interrupt(waiting=True).
        self._waiting: set[_Connection] = set()
        # Those interrupt() ended: their requests are not sent again.
        self._ended: set[_Connection] = set()
        # Request heads made so far, by method, path and header lines (_start).
        self._starts: dict[tuple[str, str, str], bytes] = {}

    def request(
        self,
        *,
        method: str,
        path: str,
        body: bytes | None,
        headers: str,
        timeout: float,
        replayable: bool,
        waiting: bool = False,
    ) -> Response:
        """Sends one request; ConnectionFailure when no response arrives.

        headers are the request's own header lines, each ending in CRLF
        (Host and Content-Length are added here); replayable says whether
        the request may be sent a second time when a reused connection turns
        out to have been closed by the server; waiting, whether its answer
        waits for work (a poll), so that interrupt(waiting=True) ends it.
        """
        start = self._starts.get((method, path, headers))
        if start is None:
            start = self._start(method, path, headers)
        if body is not None:
            data = b"%sContent-Length: %d\r\n\r\n%s" % (start, len(body), body)
        elif method in _METHODS_WITH_BODY:
            data = start + b"Content-Length: 0\r\n\r\n"
        else:
            data = start + b"\r\n"
        # A replayable request skips the check that an idle connection is
        # still open (a system call, and a GIL hand-off, per request): if the
        # server did close it, the request is sent again on a new connection.
        conn, reused = self._acquire(timeout, waiting, check=not replayable)
        try:
            response = self._exchange(conn, method, data)
        except _Stale as stale:
            if not (reused and replayable) or self._was_ended(conn):
                self._forget(conn)
                raise ConnectionFailure(stale.reason) from None
            self._forget(conn)
            conn = self._new_connection(timeout, waiting)
            try:
                response = self._exchange(conn, method, data)
            except BaseException as again:
                self._forget(conn)
                if isinstance(again, _Stale):
                    raise ConnectionFailure(again.reason) from None
                raise
        except BaseException:
            self._forget(conn)
            raise
        self._release(conn)
        return response

    def _start(self, method: str, path: str, headers: str) -> bytes:
        """A request's head up to its Content-Length, kept for the next
        request of the same method, path and headers (a worker sends the
        same few), as long as there are few of them."""
        target = self._base_path + path
        bad = _BAD_TARGET_CHAR(target)
        if bad is not None:
            reason = f"URL can't contain control characters. {target!r} (found at least {bad[0]!r})"
            raise ConnectionFailure(f"<urlopen error {reason}>")
        start = f"{method} {target} HTTP/1.1\r\nHost: {self._host_header}\r\n{headers}"
        encoded = start.encode("latin-1")
        if len(self._starts) < MAX_KEPT_STARTS:
            self._starts[method, path, headers] = encoded
        return encoded

    def interrupt(self, waiting: bool = False) -> None:
        """Ends the requests in progress (a worker's open long polls at
        shutdown), or only those waiting for work: their sockets are shut
        down, so each fails at once with ConnectionFailure in its own
        thread, which closes it."""
        with self._lock:
            busy = list(self._waiting if waiting else self._busy)
            self._ended.update(busy)
        for conn in busy:
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):  # already closed by its thread
                    sock.shutdown(socket.SHUT_RDWR)

    def _was_ended(self, conn: _Connection) -> bool:
        with self._lock:
            return conn in self._ended

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            self._busy.discard(conn)
            self._waiting.discard(conn)
            self._ended.discard(conn)

    def close(self) -> None:
        """Closes every idle connection; a later request opens a new one."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _acquire(
        self, timeout: float, waiting: bool, check: bool = True
    ) -> tuple[_Connection, bool]:
        """An open idle connection if there is one (checked to be still open,
        unless told not to), else a new one (not yet open); either counts as
        in use (busy) from here on.

        The lock is taken once per request here and once in _release: the
        pool is touched by every request of every poll thread."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
                if conn is not None:
                    self._busy.add(conn)
                    if waiting:
                        self._waiting.add(conn)
            if conn is None:
                return self._new_connection(timeout, waiting), False
            # Bytes left over from the last answer (a broken server) always
            # disqualify a connection: they would be read as the next one.
            if conn.sock is not None and not (conn._buffer or (check and _is_dropped(conn))):
                conn.set_timeout(timeout)
                return conn, True
            self._forget(conn)
            conn.close()

    def _release(self, conn: _Connection) -> None:
        """Ends a request's use of conn (see _forget), keeping it for the next."""
        with self._lock:
            self._busy.discard(conn)
            self._waiting.discard(conn)
            self._ended.discard(conn)
            if conn.sock is not None and len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def _new_connection(self, timeout: float, waiting: bool) -> _Connection:
        conn = _Connection(timeout)
        with self._lock:
            self._busy.add(conn)
            if waiting:
                self._waiting.add(conn)
        return conn

    def _exchange(self, conn: _Connection, method: str, data: bytes) -> Response:
        try:
            if conn.sock is None:
                conn.open(self._address, self._ssl_context, self._host)
            conn.send(data)
        except _STALE_CONNECTION_ERRORS as exc:
            conn.close()
            raise _Stale(_urlopen_reason(exc)) from None
        except OSError as exc:
            conn.close()
            raise ConnectionFailure(_urlopen_reason(exc)) from None
        try:
            response, will_close = conn.read_response(method)
        except _STALE_CONNECTION_ERRORS as exc:
            conn.close()
            raise _Stale(_reason(exc)) from None
        except (OSError, _BadResponse) as exc:
            conn.close()
            raise ConnectionFailure(_reason(exc)) from None
        if will_close:
            conn.close()
        return response


class _Stale(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _set_kernel_timeouts(sock: socket.socket, timeout: float) -> None:
    """Makes sock blocking, with its sends and receives timed out by the
    kernel after timeout seconds (timeout > 0).

    A Python socket with a time-out is non-blocking and calls poll() before
    every send and recv: two more system calls per request, each a release
    and re-acquisition of the GIL, which the worker's poll threads then
    contend for. Python applies its time-out to a whole sendall() and the
    kernel to each send(); a worker's requests go out in one send."""
    seconds = int(timeout)
    micros = int((timeout - seconds) * 1_000_000)
    if seconds == 0 and micros == 0:
        micros = 1  # zero would mean no time-out at all
    value = struct.pack("ll", seconds, micros)
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


def _is_dropped(conn: _Connection) -> bool:
    """True when an idle connection is readable, which means the peer closed it."""
    return conn.readable()


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _urlopen_reason(exc: BaseException) -> str:
    # Errors before a response are worded the way urllib reports them, which is
    # what the ORBIT documentation shows in worker logs.
    return f"<urlopen error {_reason(exc)}>"
