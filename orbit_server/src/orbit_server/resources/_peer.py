"""The worker at the other end of a long poll: whether it is still connected,
and whether the task handed to it left the server.

A worker that dies while its poll is parked leaves a closed connection
behind; a task handed to that poll would go nowhere and its attempt would
wait a whole session timeout to be redelivered. The engine asks the probe
built here before it hands a task to a parked poll (and on every tick)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Generator
from typing import Any

# Without MSG_DONTWAIT a peek could block the engine on a live connection.
_PEEK = socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)
_CAN_PEEK = hasattr(socket, "MSG_DONTWAIT")


def connection_probe(environ: dict[str, Any]) -> Callable[[], bool] | None:
    """A cheap, non-blocking check that the client of this request has not
    hung up, or None when the server gives no socket to ask."""
    sock = environ.get("gunicorn.socket")
    if not _CAN_PEEK or not isinstance(sock, socket.socket) or isinstance(sock, ssl.SSLSocket):
        # A TLS socket refuses flags on recv; such polls are taken as connected.
        return None

    def connected() -> bool:
        try:
            # An orderly close reads as end of stream; a client that is
            # waiting for its answer has sent nothing more.
            return sock.recv(1, _PEEK) != b""
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False  # reset by the peer, or already closed here

    return connected


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
