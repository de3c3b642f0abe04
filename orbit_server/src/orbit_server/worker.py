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

A request parser is where a request can be smuggled, so the short path does
not parse by hand: httptools (llhttp in its strict mode) reads each head,
and a request is served here only if gunicorn's parser would read it the
same way. Where llhttp refuses, or where gunicorn's rules are stricter than
llhttp's (duplicate Host or Content-Type, runs of spaces in the request line,
a fragment, its limits on a head), the request goes to gunicorn, which
answers or refuses it as on a connection's first request.
tests/test_server_wire_fuzz.py checks this differentially.

gunicorn's own refusals (400, 414, 431, ...) are answered with a one-line
plain-text body, as chapter 67 has the HTTP layer answer (`handle_error`),
not with gunicorn's HTML page.

A connection holds a thread only while it has a request in hand or one
is expected at once. An idle kept-alive connection waits in gunicorn's
selector, not on a thread: a new connection gets `LINGER_S` for its first
bytes (gunicorn would give it 5 s) before it is parked there, and a
connection whose requests follow each other closely gives its thread back
as soon as another connection waits for one (`_queued`), so a few hundred
busy clients cannot keep a new client, or a health probe, from being
served (issue 36; benchmarks/bench_keepalive.py). Only a long poll or
wait, parked on the engine, holds a thread for longer; those end at once
when the server stops (`Engine.drain`), and so do idle connections, which
are closed rather than given gunicorn's two seconds to send one more
request.

TLS connections take the short path too, once gunicorn has made the
handshake and served their first request. A blocking TLS socket cannot wait
with a kernel receive timeout (Python's TLS read retries a timed-out read
for ever), so on those the short path waits with `select`, counting the
bytes TLS has already decrypted (`_readable`), and never sets SO_RCVTIMEO.
"""

from __future__ import annotations

import contextlib
import io
import select
import signal
import socket
import ssl
import struct
import threading
import time
from typing import Any

from gunicorn import SERVER, util
from gunicorn.workers import gthread
from gunicorn.workers.gthread import ThreadWorker

from orbit_server import errors, logs
from orbit_server.http_short import (
    MAX_HEAD,
    NEED_HEAD,
    RequestReader,
    _Date,
    _Fallback,
    close_now,
    write_head,
)
from orbit_server.worker_loop import WorkerLoop

# How long a thread waits for a kept-alive connection's next request before
# returning the connection to gunicorn's poller (and the thread to its pool).
# A worker's poll follows its result within a millisecond.
LINGER_S = 0.05
# How long a busy connection keeps its thread while other connections wait
# for one: a waiting connection is served within about this long.
TURN_S = 0.02
_RECV = 64 * 1024
# How long the rest of a started request may take to arrive.
SLOW_S = 5.0
_NO_BODY = frozenset({204, 304})
_ERROR_500 = "500 Internal Server Error"
# Error codes for the refusals of the HTTP layer below the app (gunicorn's);
# another status gets its reason phrase as code.
# gthread's answer for "no request came yet: park the connection in the
# selector" (gunicorn 24 and later; before, a new connection's thread waited).
_DEFER: object | None = getattr(gthread, "_DEFER", None)
# Where `_respond` leaves the response's status code in the environ.
_STATUS = "orbit.status"
# `handle`'s answer for "the connection moves to the worker loop".
_TO_LOOP = object()
_REFUSALS = {
    400: "Malformed HTTP request",
    414: "Request line too long",
    431: "Request header fields too large",
}


def _refusal_text(code: int, reason: str, exc: BaseException) -> bytes:
    """One line naming what was refused, and gunicorn's detail when it has one."""
    detail = str(exc).strip().replace("\r", " ").replace("\n", " ")[:200]
    head = _REFUSALS.get(code, reason)
    return (f"{head}: {detail}" if detail else head).encode("utf-8", "replace")


class OrbitWorker(ThreadWorker):  # type: ignore[misc]
    def init_signals(self) -> None:
        super().init_signals()
        # Ctrl+C reaches the worker too (same process group): finish requests.
        signal.signal(signal.SIGINT, self.handle_exit)

    def handle_exit(self, sig: Any, frame: Any) -> None:
        """Stops serving, and ends the engine's long polls and waits at once
        so none holds the shutdown; on a thread, since a signal handler must
        not wait for the engine's locks."""
        super().handle_exit(sig, frame)
        if self._loop is not None:
            # Before the drain, so that the polls it ends are answered with
            # `Connection: close`.
            self._loop.stop()
        drain = getattr(self.app, "drain", None)
        if drain is not None:
            threading.Thread(target=drain, name="orbit-drain", daemon=True).start()

    def init_process(self) -> None:
        # Connections handed to the thread pool and not yet on a thread.
        self._queued = 0
        self._queued_lock = threading.Lock()
        self._date = _Date()
        self._server_header = f"Server: {SERVER}\r\n".encode("latin-1")
        self._short_path = True
        self._loop: WorkerLoop | None = None
        self._set_limits()
        super().init_process()

    def run(self) -> None:
        """gunicorn's loop, with the worker loop beside it (worker_loop.py)."""
        make = getattr(self.app, "worker_loop", None)
        if make is not None:
            self._loop = make(
                parse=self.parse,
                hand_back=self._hand_back,
                head=self._head,
                reader=self._reader,
                server_header=self._server_header,
            )
        if self._loop is not None:
            self._loop.start()
        try:
            super().run()
        finally:
            if self._loop is not None:
                self._loop.stop()
                self._loop.join(self.cfg.graceful_timeout)

    def _hand_back(self, conn: Any) -> None:
        """(the loop's thread) A connection comes back from the loop with a
        request to serve."""
        self.method_queue.defer(self._from_loop, conn)

    def _from_loop(self, conn: Any) -> None:
        self.nr_conns += 1
        conn.data_ready = True
        self.enqueue_req(conn)

    def _set_limits(self) -> None:
        """gunicorn's limits on a request head, or tighter: requests near
        them go to gunicorn, which refuses those over them."""
        cfg = self.cfg
        field = cfg.limit_request_field_size
        line = cfg.limit_request_line
        fields = cfg.limit_request_fields
        self._reader = RequestReader(
            # No line of a head is longer than the head.
            max_head=min(MAX_HEAD, field if field > 0 else MAX_HEAD),
            max_line=min(MAX_HEAD, line) if line > 0 else MAX_HEAD,
            max_fields=fields if fields > 0 else MAX_HEAD,
        )
        self.parse = self._reader.parse

    def enqueue_req(self, conn: Any) -> None:
        """(gunicorn's main thread) A connection goes to the thread pool."""
        with self._queued_lock:
            self._queued += 1
        super().enqueue_req(conn)

    def _cap_keepalive(self, deadline: float) -> None:
        """The worker stops: idle connections, kept alive or not yet used,
        are closed now instead of at `deadline`, so they do not hold the
        shutdown; requests in flight still finish."""
        self.murder_keepalived(force=True)
        pending = getattr(self, "pending_conns", None)
        while pending:
            conn = pending.popleft()
            with contextlib.suppress(OSError, KeyError, ValueError):
                self.poller.unregister(conn.sock)
            self.nr_conns -= 1
            close_now(conn.sock)

    def finish_request(self, conn: Any, fs: Any) -> None:
        """(gunicorn's main thread) While the worker stops, a connection that
        is done is closed at once: gunicorn's lingering close waits up to 2 s
        per connection for the client to close first, one after another. A
        connection that moves to the worker loop leaves gunicorn's count."""
        if not fs.cancelled() and fs.exception() is None and fs.result() is _TO_LOOP:
            self.nr_conns -= 1
            unreader = conn.parser.unreader
            unread = unreader.buf.getvalue()
            unreader.buf = io.BytesIO()
            assert self._loop is not None
            self._loop.adopt(conn, unread)
            return
        if self.alive or fs.cancelled() or fs.exception() is not None or fs.result():
            super().finish_request(conn, fs)
            return
        self.nr_conns -= 1
        close_now(conn.sock)

    def handle(self, conn: Any) -> Any:
        """Serves a connection's requests while they come quickly; gunicorn
        serves the first one and whatever the short path declines."""
        with self._queued_lock:
            self._queued -= 1
        if not conn.initialized and not conn.data_ready and _DEFER is not None:
            # A new connection that has sent nothing yet waits in the
            # selector, not on a thread.
            if not self.alive:
                return False
            if not conn.wait_for_data(0.0 if self._queued else LINGER_S):
                return _DEFER
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
            turn_ends = time.monotonic() + TURN_S
            try:
                # Once its turn is over, a connection gives its thread to
                # any that waits for one, and goes back to the selector.
                while keep is True and self.alive:
                    if getattr(conn, "orbit_hot", False) and self._loop is not None:
                        return _TO_LOOP
                    if self._queued and time.monotonic() > turn_ends:
                        break
                    keep = self._next(conn, wait=True)
            finally:
                _receive_timeout(conn.sock, 0)
        # A stopping worker closes an idle connection rather than keep it.
        return keep is not False and self.alive

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
                if isinstance(conn.sock, ssl.SSLSocket):
                    if not _readable(conn.sock, LINGER_S):
                        return None
                    data = _recv_tls(conn.sock)
                else:
                    data = conn.sock.recv(_RECV)
            except BlockingIOError:
                return None
            except OSError:
                return False
            if not data:
                return False
        try:
            return self._serve(conn, data)
        except _Fallback as fallback:
            # Where gunicorn's parser takes over, httptools' state means nothing.
            conn.orbit_parser = None
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
        request = self._read(conn, data)
        if request is None:
            return False
        environ, close = request
        close = close or not self.alive
        keep = self._respond(conn.sock, environ, close)
        # A plain connection whose worker made a hot call that succeeded
        # moves to the worker loop (`handle`).
        conn.orbit_hot = (
            environ.get(_STATUS, 500) < 300
            and self._loop is not None
            and self._loop.serves(environ["PATH_INFO"])
            and environ["REQUEST_METHOD"] == "POST"
            and not isinstance(conn.sock, ssl.SSLSocket)
        )
        return keep and not close

    def _read(self, conn: Any, data: bytes) -> tuple[dict[str, Any], bool] | None:
        """Reads the request that `data` starts: its environ and whether the
        connection closes after it, or None when the peer hung up before it
        was whole. What follows it goes back to gunicorn's unreader."""
        sock = conn.sock
        while True:
            parsed = self.parse(conn, data)
            if not isinstance(parsed, int):
                break
            chunk = _recv(sock)
            if not chunk:
                if parsed == NEED_HEAD and data:
                    raise _Fallback(data)
                return None
            data += chunk
        environ, close, end = parsed
        rest = data[end:]
        if rest:
            conn.parser.unreader.unread(rest)
        return environ, close

    def _respond(self, sock: Any, environ: dict[str, Any], close: bool) -> bool:
        """Runs the app and writes its response; False when the connection
        must close. The head goes out with the body's first chunk, and a
        chunk is written before the next is asked for, so a body iterable
        learns from being resumed that what it yielded was sent (and from
        being closed early that it was not). The status code is left in
        the environ (`_STATUS`)."""
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
        except Exception as exc:
            _close(result)
            result = ()
            logs.logger().exception("unexpected error serving a request")
            status, first, chunks = _ERROR_500, _internal_error(exc), iter(())
            headers = [("Content-Type", "application/json"), ("Content-Length", str(len(first)))]
            close = True
            code = 500
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
            environ[_STATUS] = code
        return not close

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """gunicorn's refusals (a malformed request, a request line or head
        over its limits) answered as chapter 67 answers errors of the HTTP
        layer: a short plain-text body, never gunicorn's HTML page; an app
        failure on its path is the API's JSON `INTERNAL` envelope. gunicorn
        still chooses the status and logs; its page is caught and rewritten."""
        page = _Page()
        super().handle_error(req, page, addr, exc)
        status, _, reason = page.status_line().partition(" ")
        if not status.isdigit() or not status.isascii():
            return
        code = int(status)
        if code >= 500:
            body, kind = _internal_error(exc), b"application/json"
        else:
            body, kind = _refusal_text(code, reason, exc), b"text/plain; charset=utf-8"
        response = (
            b"HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: %s\r\n"
            b"Content-Length: %d\r\n\r\n%s"
            % (code, reason.encode("latin-1"), kind, len(body), body)
        )
        try:
            util.write_nonblock(client, response)
        except Exception:
            self.log.debug("Failed to send error message.")

    def _head(self, status: str, headers: list[tuple[str, str]], close: bool) -> bytes:
        head = write_head(status, self._server_header, self._date.value(), close)
        if not headers:
            return head
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
        return head[:-2] + extra.encode("latin-1") + b"\r\n"


class _Page:
    """Stands in for the client socket while gunicorn writes an error page."""

    def __init__(self) -> None:
        self._data = bytearray()

    def gettimeout(self) -> float:
        return 0.0

    def setblocking(self, flag: bool) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        self._data += data

    def send(self, data: bytes) -> int:
        self._data += data
        return len(data)

    def status_line(self) -> str:
        """`431 Request Header Fields Too Large`, or "" if nothing came."""
        first = bytes(self._data).partition(b"\r\n")[0].decode("latin-1")
        return first.partition(" ")[2]


def _internal_error(exc: BaseException) -> bytes:
    return errors.error_json("INTERNAL", f"internal error: {type(exc).__name__}")


def _close(result: Any) -> None:
    closing = getattr(result, "close", None)
    if closing is not None:
        closing()


def _recv(sock: Any) -> bytes:
    """The rest of a request that is arriving, however slowly (within
    `SLOW_S`): the socket's receive timeout is only for the next request."""
    if isinstance(sock, ssl.SSLSocket):
        if not _readable(sock, SLOW_S):
            raise TimeoutError("the request did not arrive in time")
        return _recv_tls(sock)
    try:
        return bytes(sock.recv(_RECV))
    except BlockingIOError:
        if not select.select([sock], [], [], SLOW_S)[0]:
            raise TimeoutError("the request did not arrive in time") from None
        return bytes(sock.recv(_RECV))


def _recv_tls(sock: ssl.SSLSocket) -> bytes:
    """What a readable TLS socket has. Readable means some bytes of a record
    came, not the whole record, and a blocking read waits for the rest for
    ever: a peer that sends half a record would hold this thread. So the
    read waits at most `SLOW_S` (TimeoutError, an OSError, after that). The
    timeout is set for the read only, because a response to a slow reader
    may take longer than that to send."""
    sock.settimeout(SLOW_S)
    try:
        return bytes(sock.recv(_RECV))
    finally:
        sock.settimeout(None)


def _readable(sock: ssl.SSLSocket, seconds: float) -> bool:
    """Whether a TLS socket has something to read within `seconds`: bytes
    TLS has already decrypted, or bytes on the connection."""
    return sock.pending() > 0 or bool(select.select([sock], [], [], seconds)[0])


def _receive_timeout(sock: Any, seconds: float) -> None:
    """SO_RCVTIMEO: a blocking receive gives up after `seconds` (0: never).
    Not on TLS sockets, which wait with `_readable` instead."""
    if isinstance(sock, ssl.SSLSocket):
        return
    whole = int(seconds)
    sock.setsockopt(
        socket.SOL_SOCKET,
        socket.SO_RCVTIMEO,
        struct.pack("ll", whole, int((seconds - whole) * 1_000_000)),
    )


def _no_write(data: bytes) -> None:
    raise NotImplementedError("write() is not supported: return the body instead")
