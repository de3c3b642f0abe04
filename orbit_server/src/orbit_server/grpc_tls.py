"""The gRPC port's TLS under mutual TLS (`--tls-client-ca`), for `grpc_server`.

The HTTP port asks a client for a certificate and lets it in without one
(chapter 45: a client without a certificate authenticates with its token).
grpcio cannot do that: its server credentials either never ask for a
client certificate or refuse a handshake without one (the bool
`require_client_auth`; grpc core's "request but do not require" mode is not
reachable from Python). So under mutual TLS the gRPC server listens in
plaintext on a loopback port, and `TlsFront` owns the public port: it does
the handshake with Python's `ssl` (the HTTP port's settings: a certificate
is optional and, when given, must verify against the client CA), then
relays the bytes both ways. Without a client CA, grpc core's own TLS is
used, as before.

The verified certificate's names reach the call through the connection's
source port: each relayed connection opens its own loopback connection to
the gRPC server, and `names(peer)` looks the names up by that connection's
local port, which is the port grpc reports as the call's peer. The entry is
made before the first byte is relayed and dropped when the connection ends.
A process on this host that connects to the loopback port directly has no
entry, so it authenticates with a token, as a client without a
certificate does.

One thread (`orbit-grpc-tls`) runs every connection with a selector:
`ssl.SSLObject` over memory buffers, so that no socket call blocks and a
connection that stalls never holds up the others. What waits to be written
to either side is bounded (`BUFFER_LIMIT`): past it, the other side is not
read until it drains. A handshake not finished within `HANDSHAKE_S` ends
the connection.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from orbit_server.config import Address
from orbit_server.identities import certificate_names
from orbit_server.logs import logger

BUFFER_LIMIT = 1 << 20
HANDSHAKE_S = 10.0
_CHUNK = 1 << 16
_log = logger()


class TlsFront:
    """The public gRPC port under mutual TLS: `bind`, then `start`; `close`."""

    def __init__(self, context: ssl.SSLContext) -> None:
        context.set_alpn_protocols(["h2"])
        self._context = context
        self._inner = ("127.0.0.1", 0)
        self._selector = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._links: set[_Link] = set()
        # Local port of a relayed connection to the gRPC server -> the names
        # of the client's verified certificate (None: it presented none).
        self._names: dict[int, list[str] | None] = {}
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def bind(self, addr: Address) -> int:
        """Listens on `addr`; the port bound. OSError when it cannot."""
        family = socket.AF_INET6 if addr.family_is_v6 else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((addr.host, addr.port))
            listener.listen(1024)
        except OSError:
            listener.close()
            raise
        listener.setblocking(False)
        self._listener = listener
        port: int = listener.getsockname()[1]
        return port

    def start(self, inner_port: int) -> None:
        """Relays to the gRPC server's plaintext port on the loopback."""
        assert self._listener is not None
        self._inner = ("127.0.0.1", inner_port)
        self._selector.register(self._listener, selectors.EVENT_READ, self._accept)
        self._thread = threading.Thread(target=self._serve, name="orbit-grpc-tls", daemon=True)
        self._thread.start()

    def names(self, peer: str) -> list[str] | None:
        """The certificate names of the client whose relayed connection is
        `peer` (grpc's `ipv4:127.0.0.1:<port>`); None without a certificate."""
        port = peer.rpartition(":")[2]
        return self._names.get(int(port)) if port.isdigit() else None

    def close(self) -> None:
        """Stops accepting and ends every connection."""
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    # ---- the thread

    def _serve(self) -> None:
        try:
            while not self._closed.is_set():
                for key, events in self._selector.select(timeout=0.5):
                    callback: Callable[[int], None] = key.data
                    try:
                        callback(events)
                    except Exception as exc:  # one connection's trouble ends only it
                        _log.error("gRPC TLS relay failed", exc_info=exc)
                        owner = getattr(callback, "__self__", None)
                        if isinstance(owner, _Link):
                            owner.close()
                self._expire()
        finally:
            for link in list(self._links):
                link.close()
            if self._listener is not None:
                self._selector.unregister(self._listener)
                self._listener.close()
            self._selector.close()

    def _accept(self, events: int) -> None:
        assert self._listener is not None
        for _ in range(64):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: try again later
                _log.warning("gRPC TLS relay cannot accept", error=str(exc))
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._links.add(_Link(self, sock))

    def _expire(self) -> None:
        now = time.monotonic()
        for link in [x for x in self._links if x.inner is None]:
            if now - link.started > HANDSHAKE_S:
                link.close()

    def _connect(self, link: _Link, names: list[str] | None) -> socket.socket:
        inner = socket.create_connection(self._inner, timeout=5)
        inner.setblocking(False)
        inner.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link.port = inner.getsockname()[1]
        self._names[link.port] = names
        return inner

    def _forget(self, link: _Link) -> None:
        self._links.discard(link)
        if link.port is not None:
            self._names.pop(link.port, None)


class _Link:
    """One client connection and its relayed connection to the gRPC server."""

    def __init__(self, front: TlsFront, outer: socket.socket) -> None:
        self.front = front
        self.outer = outer
        self.inner: socket.socket | None = None
        self.port: int | None = None
        self.started = time.monotonic()
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = front._context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._to_inner = bytearray()
        self._to_outer = bytearray()
        self._wanted: dict[socket.socket, int] = {}
        self._closed = False
        self._want(outer, selectors.EVENT_READ, self._on_outer)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # The relayed connection is closed first, from this side: its port
        # then waits in TIME_WAIT and is not handed to another client's
        # connection while the gRPC server may still see calls from it.
        for sock in (self.inner, self.outer):
            if sock is None:
                continue
            if sock in self._wanted:
                self.front._selector.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()
        self._wanted.clear()
        self.front._forget(self)

    def _want(self, sock: socket.socket, events: int, callback: Callable[[int], None]) -> None:
        selector = self.front._selector
        before = self._wanted.get(sock, 0)
        if events == before:
            return
        if not events:
            selector.unregister(sock)
            del self._wanted[sock]
        elif not before:
            selector.register(sock, events, callback)
            self._wanted[sock] = events
        else:
            selector.modify(sock, events, callback)
            self._wanted[sock] = events

    # ---- events

    def _on_outer(self, events: int) -> None:
        if self._closed:
            return
        if events & selectors.EVENT_READ:
            try:
                data = self.outer.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self.close()
                return
            if data:
                self._incoming.write(data)
                if not self._decrypt():
                    return
        self._flush()

    def _on_inner(self, events: int) -> None:
        if self._closed:
            return
        assert self.inner is not None
        if events & selectors.EVENT_READ:
            try:
                data = self.inner.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self.close()
                return
            if data:
                self._tls.write(data)
        self._flush()

    def _decrypt(self) -> bool:
        """Runs the handshake, then moves what the client sent to the gRPC
        server's buffer; False once the connection is over."""
        try:
            if self.inner is None:
                self._tls.do_handshake()
                self._handshaken()
            while True:
                data = self._tls.read(_CHUNK)
                if not data:
                    self.close()  # the client's close_notify
                    return False
                self._to_inner += data
        except ssl.SSLWantReadError:
            return True
        except ssl.SSLZeroReturnError:
            self.close()
            return False
        except (ssl.SSLError, OSError) as exc:
            _log.debug("gRPC TLS handshake failed", error=str(exc))
            # Let the alert reach the client before the connection ends.
            with contextlib.suppress(OSError):
                self.outer.send(self._outgoing.read())
            self.close()
            return False

    def _handshaken(self) -> None:
        peer: Any = self._tls.getpeercert()
        names = certificate_names(peer) if peer else None
        self.inner = self.front._connect(self, names)

    def _flush(self) -> None:
        pending = self._outgoing.read()
        if pending:
            self._to_outer += pending
        if not _send(self.outer, self._to_outer) or (
            self.inner is not None and not _send(self.inner, self._to_inner)
        ):
            self.close()
            return
        read = selectors.EVENT_READ
        write = selectors.EVENT_WRITE
        # Backpressure: a side is read only while what waits for the other
        # side is under the limit.
        outer = (read if len(self._to_inner) < BUFFER_LIMIT else 0) | (
            write if self._to_outer else 0
        )
        self._want(self.outer, outer, self._on_outer)
        if self.inner is not None:
            inner = (read if len(self._to_outer) < BUFFER_LIMIT else 0) | (
                write if self._to_inner else 0
            )
            self._want(self.inner, inner, self._on_inner)


def _send(sock: socket.socket, buffer: bytearray) -> bool:
    """Writes what the socket takes now; False when the connection is gone."""
    while buffer:
        try:
            sent = sock.send(buffer)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        del buffer[:sent]
    return True
