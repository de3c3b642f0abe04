"""The front process: the worker loop's HTTP on the second core.

With the worker loop (worker_loop.py) a server's hot calls cost about a
third HTTP (receiving, parsing, writing answers) and two thirds engine, all
on one thread of one process, which the GIL holds to one core. With
`ORBIT_WORKER_LOOP=front` the HTTP third runs here, in a process of its
own started by the server's worker process (`FrontedLoop`, front_link.py),
and the engine's thread keeps only the engine's work: ARCHITECTURE.md, "The
second core", has the measurements behind the split.

What crosses between the two is small and batched: each turn of this
process sends the engine ONE frame with every request it read whole
(`Asked`: the request line's parts, the headers the checks read, the body),
and each turn of the engine sends back one frame with every answer it has
(status, body, close) — one `send` and one `recv` a turn on each side,
however many calls the turn holds. Frames are length-prefixed pickles of
lists of tuples (`Channel`); both ends are this package, over a socket pair
nothing else holds.

Sockets. A connection moves here the way it moves to the worker loop: the
server's thread path serves its first hot call, then hands it over. Its
descriptor comes over a second socket pair (`SCM_RIGHTS`, one datagram per
connection), and the server KEEPS its own copy: the engine still asks the
kernel whether a worker hung up before giving it a task (`connection_probe`),
and a connection the engine cannot serve (any request but a hot call, or
one its checks refuse) goes back to the thread path with its unread bytes
without the descriptor travelling again (`GIVEN`). Only this process reads,
writes and shuts connections down; the server closes its copy once told the
connection is gone.

Tasks are never lost on the way: an answer that hands a task carries a
sequence number; this process reports the numbers whose bytes it wrote
(`DELIVERED`) and those it could not (`GONE`), and the engine reports the
latter undelivered, as the thread path does for a worker that left.

This process ignores SIGINT and SIGTERM (the server's shutdown drives it:
`STOP`, then the end of the channel) and exits when the server's end of the
channel closes, whatever the reason, closing every connection it holds.
"""

from __future__ import annotations

import collections
import contextlib
import os
import pickle
import selectors
import signal
import socket
import struct
import sys
from typing import Any

from orbit_server.http_short import (
    RequestReader,
    _Date,
    answer_bytes,
    asked,
    close_now,
    write_head,
)

# Messages, server to front: ("answer", link, status, body, close, seq),
# ("return", link), ("close", link), ("stop",).
ANSWER = 1
RETURN = 2
CLOSE = 3
STOP = 4
# Front to server: ("call", link, Asked), ("given", link, unread),
# ("eof", link), ("gone", link, [seq...]), ("delivered", [seq...]).
CALL = 11
GIVEN = 12
EOF = 13
GONE = 14
DELIVERED = 15

_RECV = 64 * 1024
_CHANNEL_RECV = 1024 * 1024
# A connection's frame is its unread bytes (at most what the short path
# reads ahead) and two addresses.
_FDS_RECV = 64 * 1024
_MAX_IN = 256 * 1024
_LEN = struct.Struct("!I")
# Room in the kernel for a turn's frame: the engine's turn writes once.
_CHANNEL_BUFFER = 4 * 1024 * 1024


class Channel:
    """Frames over a non-blocking Unix stream socket: `put` queues a list of
    messages, `flush` writes what the kernel takes, `read` returns the
    messages of every whole frame received so far."""

    __slots__ = ("_view", "eof", "inbuf", "out", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, option, _CHANNEL_BUFFER)
        self.inbuf = bytearray()
        self.out = bytearray()
        self.eof = False
        self._view = memoryview(bytearray(_CHANNEL_RECV))

    def put(self, messages: list[tuple[Any, ...]]) -> None:
        frame = pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)
        self.out += _LEN.pack(len(frame))
        self.out += frame

    def flush(self) -> bool:
        """Writes what it can; True when nothing is left to write."""
        out = self.out
        while out:
            try:
                sent = self.sock.send(out)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                self.eof = True
                out.clear()
                return True
            del out[:sent]
        return True

    def read(self) -> list[tuple[Any, ...]]:
        # Into one buffer kept for the purpose: `recv(n)` would allocate n
        # bytes for every call.
        view = self._view
        while True:
            try:
                size = self.sock.recv_into(view)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                size = 0
            if not size:
                self.eof = True
                break
            self.inbuf += view[:size]
        messages: list[tuple[Any, ...]] = []
        buf = self.inbuf
        at = 0
        while len(buf) - at >= 4:
            (size,) = _LEN.unpack_from(buf, at)
            if len(buf) - at - 4 < size:
                break
            messages.extend(pickle.loads(buf[at + 4 : at + 4 + size]))
            at += 4 + size
        if at:
            del buf[:at]
        return messages


class _Conn:
    """A connection held here: the parser's connection (`server`, `client`,
    `sock`, the parser's state), its bytes in and out, its call in flight."""

    __slots__ = (
        "client",
        "close_after",
        "eof",
        "events",
        "id",
        "inflight",
        "orbit_environ",
        "orbit_parser",
        "out",
        "request",
        "server",
        "sock",
        "tasks",
        "unread",
        "writing",
    )

    def __init__(self, link: int, sock: socket.socket, unread: bytes, server: Any, client: Any):
        self.id = link
        self.sock = sock
        self.server = server
        self.client = client
        self.unread = bytearray(unread)
        self.out = bytearray()
        # (end of its answer in `out`, sequence number) of tasks not yet written.
        self.tasks: list[tuple[int, int]] = []
        # The bytes of the request in flight, kept until it is answered: the
        # engine may give the connection back to the thread path instead.
        self.request = b""
        self.inflight = False
        self.close_after = False
        self.eof = False
        self.writing = False
        self.events = 0
        self.orbit_parser: Any = None
        self.orbit_environ: Any = None


class Front:
    """The front process's loop (module docstring)."""

    def __init__(
        self,
        channel: Channel,
        fds: socket.socket,
        reader: RequestReader,
        server_header: bytes,
        version: bytes,
    ) -> None:
        self._channel = channel
        self._fds = fds
        self._reader = reader
        self._server_header = server_header
        self._version = version
        self._date = _Date()
        self._selector = selectors.DefaultSelector()
        self._selector.register(channel.sock, selectors.EVENT_READ, "channel")
        self._selector.register(fds, selectors.EVENT_READ, "fds")
        self._channel_events = selectors.EVENT_READ
        self._conns: dict[int, _Conn] = {}
        self._ready: dict[int, _Conn] = {}
        self._messages: list[tuple[Any, ...]] = []
        self._delivered: list[int] = []
        self._stopping = False
        self._fds_buf = bytearray()
        self._fds_in: collections.deque[int] = collections.deque()

    def run(self, first: list[tuple[Any, ...]]) -> None:
        for message in first:
            self._on(message)
        try:
            while not self._channel.eof:
                self._turn()
        finally:
            for conn in list(self._conns.values()):
                self._close(conn, report=False)

    def _turn(self) -> None:
        timeout: float | None = None
        if self._ready:
            timeout = 0.0
        elif self._stopping:
            timeout = 0.1
        channel_read = False
        for key, mask in self._selector.select(timeout):
            data = key.data
            if data == "channel":
                if mask & selectors.EVENT_WRITE:
                    self._channel.flush()
                if mask & selectors.EVENT_READ:
                    channel_read = True
            elif data == "fds":
                self._adopt()
            else:
                if mask & selectors.EVENT_WRITE:
                    self._flush(data)
                if mask & selectors.EVENT_READ and self._open(data):
                    self._receive(data)
        if channel_read:
            # After the turn's new connections (the selector's order is
            # not ours), though every message names a connection the front
            # has already sent a call for.
            for message in self._channel.read():
                self._on(message)
        self._requests()
        if self._stopping:
            for conn in list(self._conns.values()):
                if not conn.inflight and not conn.out:
                    self._close(conn)
        self._send()

    def _send(self) -> None:
        """Sends the turn's messages as one frame."""
        if self._delivered:
            self._messages.append((DELIVERED, self._delivered))
            self._delivered = []
        if self._messages:
            self._channel.put(self._messages)
            self._messages = []
        events = selectors.EVENT_READ
        if not self._channel.flush():
            events |= selectors.EVENT_WRITE
        if events != self._channel_events:
            self._selector.modify(self._channel.sock, events, "channel")
            self._channel_events = events

    # ---- from the server

    def _adopt(self) -> None:
        """Takes the connections the server sent: one frame and one
        descriptor each, in order, over the stream of `fds`."""
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self._fds, _FDS_RECV, 64)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data, fds = b"", []
            self._fds_in.extend(fds)
            if not data:
                self._channel.eof = True
                break
            self._fds_buf += data
        buf = self._fds_buf
        at = 0
        while len(buf) - at >= 4 and self._fds_in:
            (size,) = _LEN.unpack_from(buf, at)
            if len(buf) - at - 4 < size:
                break
            link, unread, server, client = pickle.loads(buf[at + 4 : at + 4 + size])
            at += 4 + size
            sock = socket.socket(fileno=self._fds_in.popleft())
            sock.setblocking(False)
            conn = _Conn(link, sock, unread, server, client)
            self._conns[link] = conn
            self._modify(conn)
            if conn.unread:
                self._ready[link] = conn
        if at:
            del buf[:at]

    def _on(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == ANSWER:
            _, link, status, body, close, seq = message
            conn = self._conns.get(link)
            if conn is None:
                if seq:
                    self._messages.append((GONE, link, [seq]))
                return
            self._answer(conn, status, body, close, seq)
        elif kind == RETURN:
            conn = self._conns.get(message[1])
            if conn is not None:
                self._give_back(conn, conn.request + bytes(conn.unread))
        elif kind == CLOSE:
            conn = self._conns.get(message[1])
            if conn is not None:
                self._close(conn)
        elif kind == STOP:
            self._stopping = True

    def _answer(self, conn: _Conn, status: str, body: bytes | None, close: bool, seq: int) -> None:
        conn.inflight = False
        conn.request = b""
        head = write_head(status, self._server_header, self._date.value(), close)
        conn.out += answer_bytes(head, self._version, body)
        if seq:
            conn.tasks.append((len(conn.out), seq))
        conn.close_after = close
        self._flush(conn)
        if self._open(conn) and conn.unread:
            self._ready[conn.id] = conn

    # ---- connections

    def _receive(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            conn.eof = True
            self._modify(conn)
            if conn.inflight:
                self._messages.append((EOF, conn.id))
            elif not conn.unread:
                self._close(conn)
            return
        conn.unread += data
        if not conn.inflight:
            self._ready[conn.id] = conn
        if len(conn.unread) >= _MAX_IN:
            self._modify(conn)

    def _requests(self) -> None:
        ready, self._ready = self._ready, {}
        for conn in ready.values():
            if conn.inflight or not self._open(conn):
                continue
            data = bytes(conn.unread)
            try:
                parsed = self._reader.parse(conn, data)
            except Exception:  # the short path's fallback: gunicorn reads it
                self._give_back(conn, data)
                continue
            if isinstance(parsed, int):
                if conn.eof:
                    self._close(conn)
                continue
            environ, close, end = parsed
            conn.request = data[:end]
            del conn.unread[:end]
            conn.inflight = True
            self._messages.append((CALL, conn.id, asked(environ, close or self._stopping)))

    def _flush(self, conn: _Conn) -> None:
        out = conn.out
        while out:
            try:
                sent = conn.sock.send(out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(conn)
                return
            del out[:sent]
            if conn.tasks:
                kept = []
                for end, seq in conn.tasks:
                    if end > sent:
                        kept.append((end - sent, seq))
                    else:
                        self._delivered.append(seq)
                conn.tasks = kept
        writing = bool(out)
        if writing != conn.writing:
            conn.writing = writing
            self._modify(conn)
        if not out and (conn.close_after or (conn.eof and not conn.inflight and not conn.unread)):
            self._close(conn)

    def _modify(self, conn: _Conn) -> None:
        events = 0
        if not conn.eof and len(conn.unread) < _MAX_IN:
            events |= selectors.EVENT_READ
        if conn.writing:
            events |= selectors.EVENT_WRITE
        if events == conn.events or not self._open(conn):
            return
        if not events:
            self._selector.unregister(conn.sock)
        elif conn.events:
            self._selector.modify(conn.sock, events, conn)
        else:
            self._selector.register(conn.sock, events, conn)
        conn.events = events

    def _open(self, conn: _Conn) -> bool:
        return self._conns.get(conn.id) is conn

    def _forget(self, conn: _Conn) -> None:
        del self._conns[conn.id]
        self._ready.pop(conn.id, None)
        if conn.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(conn.sock)
            conn.events = 0

    def _give_back(self, conn: _Conn, data: bytes) -> None:
        """Hands the connection back to the server's thread path with `data`,
        once what it was sent is out. The server's copy of the descriptor
        stays open; this one closes without shutting the connection down."""
        if not self._open(conn):
            return
        self._forget(conn)
        lost: list[int] = []
        try:
            conn.sock.setblocking(True)
            if conn.out:
                conn.sock.sendall(conn.out)
        except OSError:
            lost = [seq for _, seq in conn.tasks]
            self._messages.append((GONE, conn.id, lost))
            close_now(conn.sock)
            return
        self._delivered.extend(seq for _, seq in conn.tasks)
        with contextlib.suppress(OSError):
            conn.sock.close()
        self._messages.append((GIVEN, conn.id, data))

    def _close(self, conn: _Conn, *, report: bool = True) -> None:
        if not self._open(conn):
            return
        self._forget(conn)
        close_now(conn.sock)
        if report:
            self._messages.append((GONE, conn.id, [seq for _, seq in conn.tasks]))


def adopt_frame(link: int, unread: bytes, server: Any, client: Any) -> bytes:
    """The frame that goes with a connection's descriptor over `fds`."""
    frame = pickle.dumps((link, unread, server, client), protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(frame)) + frame


def main(argv: list[str]) -> int:
    """`python -m orbit_server.front CHANNEL_FD FDS_FD`: the channel's first
    frame is the settings (the parser's limits, the Server header, the API
    version's header line, the CPUs to run on)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    channel = Channel(socket.socket(fileno=int(argv[1])))
    fds = socket.socket(fileno=int(argv[2]))
    fds.setblocking(False)
    messages: list[tuple[Any, ...]] = []
    selector = selectors.DefaultSelector()
    selector.register(channel.sock, selectors.EVENT_READ)
    while not messages and not channel.eof:
        selector.select()
        messages = channel.read()
    selector.close()
    if not messages:
        return 0
    settings: dict[str, Any] = messages[0][1]
    cpus = settings.get("cpus")
    if cpus and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, cpus)
    reader = RequestReader(
        max_head=settings["max_head"],
        max_line=settings["max_line"],
        max_fields=settings["max_fields"],
    )
    front = Front(channel, fds, reader, settings["server_header"], settings["version"])
    # What came with the settings (a shutdown that followed at once).
    front.run(messages[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
