"""HTTP/1.1 over a small pool of keep-alive connections, on the standard library.

A worker issues a poll and a result for every task; opening a TCP (and maybe
TLS) connection for each would cost more than the work itself. An
http.client connection serves one request at a time, so concurrent callers
each take an idle connection from the pool, or open one, and give it back.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import threading
from urllib.parse import urlsplit

# Enough for a worker's poll threads, its heartbeat and a few client calls;
# connections beyond it are closed after use instead of kept open.
MAX_IDLE_CONNECTIONS = 32

# Errors that mean the server closed an idle keep-alive connection before it
# read our request. Only then is sending the request again known to be safe.
_STALE_CONNECTION_ERRORS = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
)


class ConnectionFailure(Exception):
    """The request got no HTTP response; the argument says why."""


class Response:
    __slots__ = ("body", "content_type", "reason", "status")

    def __init__(self, status: int, reason: str, content_type: str, body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.content_type = content_type
        self.body = body


class Transport:
    """Sends requests to one server, keeping idle connections open for reuse."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | None) -> None:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"invalid ORBIT server URL {server!r}: expected http:// or https://")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._base_path = parts.path.rstrip("/")
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        # Connections a request is using now, for interrupt().
        self._busy: set[http.client.HTTPConnection] = set()
        # Those of them waiting for work (polls), for interrupt(waiting=True).
        self._waiting: set[http.client.HTTPConnection] = set()
        # Those interrupt() ended: their requests are not sent again.
        self._ended: set[http.client.HTTPConnection] = set()

    def request(
        self,
        *,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float,
        replayable: bool,
        waiting: bool = False,
    ) -> Response:
        """Sends one request; ConnectionFailure when no response arrives.

        replayable says whether the request may be sent a second time when a
        reused connection turns out to have been closed by the server;
        waiting, whether its answer waits for work (a poll), so that
        interrupt(waiting=True) ends it.
        """
        target = self._base_path + path
        conn, reused = self._acquire(timeout, waiting)
        try:
            response = self._exchange(conn, method, target, body, headers)
        except _Stale as stale:
            if not (reused and replayable) or self._was_ended(conn):
                raise ConnectionFailure(stale.reason) from None
            self._forget(conn)
            conn = self._new_connection(timeout, waiting)
            try:
                response = self._exchange(conn, method, target, body, headers)
            except _Stale as again:
                raise ConnectionFailure(again.reason) from None
        finally:
            self._forget(conn)
        self._release(conn)
        return response

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

    def _was_ended(self, conn: http.client.HTTPConnection) -> bool:
        with self._lock:
            return conn in self._ended

    def _forget(self, conn: http.client.HTTPConnection) -> None:
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

    def _acquire(self, timeout: float, waiting: bool) -> tuple[http.client.HTTPConnection, bool]:
        """An open idle connection if there is one, else a new one (not yet open)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new_connection(timeout, waiting), False
            if conn.sock is not None and not _is_dropped(conn.sock):
                conn.timeout = timeout
                conn.sock.settimeout(timeout)
                with self._lock:
                    self._busy.add(conn)
                    if waiting:
                        self._waiting.add(conn)
                return conn, True
            conn.close()

    def _release(self, conn: http.client.HTTPConnection) -> None:
        if conn.sock is None:
            return
        with self._lock:
            if len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def _new_connection(self, timeout: float, waiting: bool) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=self._ssl_context
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        with self._lock:
            self._busy.add(conn)
            if waiting:
                self._waiting.add(conn)
        return conn

    @staticmethod
    def _exchange(
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> Response:
        try:
            conn.request(method, target, body=body, headers=headers)
        except _STALE_CONNECTION_ERRORS as exc:
            conn.close()
            raise _Stale(_urlopen_reason(exc)) from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionFailure(_urlopen_reason(exc)) from None
        try:
            resp = conn.getresponse()
            data = resp.read()
        except _STALE_CONNECTION_ERRORS as exc:
            conn.close()
            raise _Stale(_reason(exc)) from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionFailure(_reason(exc)) from None
        if resp.will_close:
            conn.close()
        return Response(resp.status, resp.reason, resp.getheader("content-type", ""), data)


class _Stale(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_dropped(sock: socket.socket) -> bool:
    """True when an idle connection is readable, which means the peer closed it."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _urlopen_reason(exc: BaseException) -> str:
    # Errors before a response are worded the way urllib reports them, which is
    # what the ORBIT documentation shows in worker logs.
    return f"<urlopen error {_reason(exc)}>"
