"""The worker at the other end of a long poll: whether it is still connected,
and whether the task handed to it left the server.

A worker that dies while its poll is parked leaves a closed connection
behind; a task handed to that poll would go nowhere and its attempt would
wait a whole session timeout to be redelivered. The engine asks the probe
built here before it hands a task to a parked poll (and on every tick)."""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Callable, Generator
from typing import Any

# Without MSG_DONTWAIT a peek could block the engine on a live connection.
_PEEK = socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)
_CAN_PEEK = hasattr(socket, "MSG_DONTWAIT")
# Linux reports a peer's shutdown even while unread bytes wait before it.
_RDHUP: int = getattr(select, "POLLRDHUP", 0) if hasattr(select, "poll") else 0
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL | _RDHUP if _RDHUP else 0


def connection_probe(environ: dict[str, Any]) -> Callable[[], bool] | None:
    """A cheap, non-blocking check that the client of this request has not
    hung up, or None when the server gives no socket to ask.

    The check looks at the socket's file descriptor, never through a TLS
    layer: a TLS socket cannot peek, and bytes a client sends while it waits
    (a pipelined request, an alert) are no sign that it left. On Linux the
    kernel says whether the peer shut its side down (`POLLRDHUP`), whatever
    is still unread; elsewhere a peek at the raw bytes finds the end of the
    stream when nothing precedes it."""
    sock = environ.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return None
    if _RDHUP:

        def connected() -> bool:
            fd = sock.fileno()
            if fd < 0:
                return False  # closed here
            # A poller per call: the engine's threads and the request's may
            # ask at once, and one poller refuses concurrent polls.
            poller = select.poll()
            poller.register(fd, select.POLLIN | _RDHUP)
            # One descriptor, so at most one answer (no generator: this runs
            # for every poll).
            events = poller.poll(0)
            return not (events and events[0][1] & _GONE)

        return connected
    if not _CAN_PEEK:
        return None

    def peeked() -> bool:
        fd = sock.fileno()
        if fd < 0:
            return False
        # A plain socket object over a copy of the descriptor, so that a TLS
        # socket's raw stream can be peeked at without its TLS layer.
        raw = socket.socket(sock.family, sock.type, fileno=os.dup(fd))
        try:
            # An orderly close reads as end of stream; a client that is
            # waiting for its answer has sent nothing more.
            return raw.recv(1, _PEEK) != b""
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False  # reset by the peer
        finally:
            raw.close()

    return peeked


def handed_over(
    data: bytes, connected: Callable[[], bool] | None, undelivered: Callable[[], None]
) -> Generator[bytes, None, None]:
    """The response body as a WSGI iterable that calls `undelivered` when the
    body cannot have reached the client: its connection was already closed
    when the server came to write it, or the write failed (the server then
    stops iterating and closes the iterable, as WSGI requires)."""
    reachable = connected is None or connected()
    written = False
    try:
        yield data
        written = True
    finally:
        if not (reachable and written):
            undelivered()
