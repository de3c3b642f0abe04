"""The worker loop with its HTTP in the front process (front.py).

`FrontedLoop` is the worker loop (worker_loop.py) whose connections are
read and written by the front process: its thread makes the calls, runs
them as one group, parks polls and expires them, exactly as the loop does,
and exchanges one frame a turn with the front instead of touching sockets.
The server keeps its copy of every connection's descriptor, for the hang-up
probe before a task is handed over and to give a connection back to the
thread path; the front reads, writes and shuts connections down.

If the front process dies, the loop closes every connection it holds (their
tasks are redelivered, their parked polls end) and gives every connection
offered afterwards back to the thread path, which serves them as a server
without the loop would: the server keeps running on one core.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import sys
import time
from typing import Any

from orbit_server.front import (
    ANSWER,
    CALL,
    CLOSE,
    DELIVERED,
    EOF,
    GIVEN,
    GONE,
    RETURN,
    STOP,
    Channel,
    adopt_frame,
)
from orbit_server.http_short import Asked, RequestReader, close_now
from orbit_server.logs import logger
from orbit_server.worker_loop import _VERSION, WorkerLoop, _Call, _Link

_log = logger()
# How long sending a connection to the front may block before the front is
# taken for dead (its buffer holds thousands of them).
_SEND_FD_S = 5.0


class _Remote(_Link):
    """A connection the front holds: the loop's link without its bytes (the
    front has them), numbered instead of keyed by its descriptor, with this
    process's copy of the socket (for the hang-up probe and to give the
    connection back)."""

    __slots__ = ("returning",)

    def __init__(self, number: int, tconn: Any) -> None:
        super().__init__(tconn, b"")
        self.fd = number
        # The loop asked the front to give it back.
        self.returning = False


class FrontedLoop(WorkerLoop):
    """The worker loop, its HTTP in the front process (module docstring)."""

    def __init__(
        self, *args: Any, reader: RequestReader, server_header: bytes, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._settings = {
            "max_head": reader.max_head,
            "max_line": reader.max_line,
            "max_fields": reader.max_fields,
            "server_header": server_header,
            "version": _VERSION,
            "cpus": _other_cpus(),
        }
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: Channel | None = None
        self._fds: socket.socket | None = None
        self._out: list[tuple[Any, ...]] = []
        self._tasks: dict[int, Any] = {}
        self._task_seq = 0
        self._link_seq = 0
        self._stop_sent = False
        self._lost = False
        self._channel_events = 0

    def serves(self, path: str) -> bool:
        return not self._lost and super().serves(path)

    def start(self) -> None:
        """Starts the front process, then the loop's thread."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fds_ours, fds_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "orbit_server.front",
                    str(theirs.fileno()),
                    str(fds_theirs.fileno()),
                ],
                pass_fds=(theirs.fileno(), fds_theirs.fileno()),
                stdin=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
            fds_theirs.close()
        self._channel = Channel(ours)
        self._channel.put([(0, self._settings)])
        # Now, not at the loop's first turn: that may wait for a connection.
        self._channel.flush()
        self._fds = fds_ours
        fds_ours.settimeout(_SEND_FD_S)
        self._selector.register(ours, selectors.EVENT_READ, "channel")
        self._channel_events = selectors.EVENT_READ
        _log.debug("front process started", pid=self._process.pid)
        super().start()

    # ---- the loop

    def _release(self) -> None:
        self._lose_front()
        if self._process is not None:
            try:
                self._process.wait(5.0)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def _turn(self) -> None:
        timeout: float | None = None
        if self._adopted or self._woken:
            timeout = 0.0
        elif self._timers:
            timeout = max(0.0, self._timers[0][0] - time.monotonic())
        elif self._stopping:
            timeout = 0.1
        channel = self._channel
        batch: list[_Call] = []
        for key, mask in self._selector.select(timeout):
            if key.data is None:
                with contextlib.suppress(BlockingIOError, OSError):
                    while os.read(self._wake_r, 4096):
                        pass
            elif channel is not None:
                if mask & selectors.EVENT_WRITE:
                    channel.flush()
                if mask & selectors.EVENT_READ:
                    for message in channel.read():
                        self._on(message, batch)
        if channel is not None and channel.eof and not self._lost:
            _log.error("the front process ended; the worker loop's connections are closed")
            self._lose_front()
        while self._adopted:
            self._take(*self._adopted.popleft())
        if batch:
            self._run_calls(batch)
        if self._stopping and not self._stop_sent:
            self._out.append((STOP,))
            self._stop_sent = True
        self._answer_woken()
        self._expire_due()
        self._send()

    def _send(self) -> None:
        channel = self._channel
        if channel is None or self._lost:
            self._out = []
            return
        if self._out:
            channel.put(self._out)
            self._out = []
        events = selectors.EVENT_READ
        if not channel.flush():
            events |= selectors.EVENT_WRITE
        if events != self._channel_events:
            self._selector.modify(channel.sock, events, "channel")
            self._channel_events = events

    def _on(self, message: tuple[Any, ...], batch: list[_Call]) -> None:
        kind = message[0]
        if kind == CALL:
            call = self._request_of(message[1], message[2])
            if call is not None:
                batch.append(call)
        elif kind == DELIVERED:
            tasks = self._tasks
            for seq in message[1]:
                tasks.pop(seq, None)
        elif kind == GIVEN:
            self._given(message[1], message[2])
        elif kind == EOF:
            link = self._links.get(message[1])
            if link is not None:
                link.eof = True
                self._end_wait(link)
        elif kind == GONE:
            for seq in message[2]:
                task = self._tasks.pop(seq, None)
                if task is not None:
                    self._calls.undelivered(task)
            link = self._links.get(message[1])
            if link is not None:
                self._drop(link)

    def _request_of(self, number: int, request: Asked) -> _Call | None:
        link = self._links.get(number)
        if not isinstance(link, _Remote) or link.returning or link.call is not None:
            return None
        if self._stopping and not request.close:
            request = request._replace(close=True)
        try:
            call = self._call_of(link, request)
        except Exception:  # refused before the engine: the thread path refuses it
            call = None
        if call is None:
            link.returning = True
            self._out.append((RETURN, number))
            return None
        link.call = call
        return call

    # ---- connections

    def _take(self, tconn: Any, unread: bytes) -> None:
        if self._stopping or self._lost or self._fds is None:
            self._to_threads(tconn, unread)
            return
        self._link_seq += 1
        link = _Remote(self._link_seq, tconn)
        frame = adopt_frame(link.fd, unread, tconn.server, tconn.client)
        try:
            socket.send_fds(self._fds, [frame], [link.sock.fileno()])
        except OSError:
            _log.error("the front process does not take connections; the worker loop stops")
            self._lose_front()
            self._to_threads(tconn, unread)
            return
        _log.debug("worker connection on the worker loop (front process)")
        self._links[link.fd] = link

    def _given(self, number: int, data: bytes) -> None:
        """The front gave a connection back (asked to, or for a request the
        short path leaves to gunicorn): the thread path serves `data`."""
        link = self._links.get(number)
        if link is None:
            return
        self._forget(link)
        self._to_threads(link.tconn, data)

    def _to_threads(self, tconn: Any, data: bytes) -> None:
        with contextlib.suppress(OSError):
            tconn.sock.setblocking(True)
        tconn.orbit_parser = None
        if data:
            tconn.parser.unreader.unread(data)
        _log.debug("worker connection back on the thread path")
        self._hand_back(tconn)

    def _deliver(self, link: Any, status: str, body: bytes | None, task: Any, close: bool) -> None:
        seq = 0
        if task is not None:
            self._task_seq += 1
            seq = self._task_seq
            self._tasks[seq] = task
        self._out.append((ANSWER, link.fd, status, body, close, seq))

    def _close(self, link: Any) -> None:
        """Closes a connection: the front shuts it down (and reports its
        unwritten tasks); this process lets its copy go."""
        if not self._open(link):
            return
        self._out.append((CLOSE, link.fd))
        self._drop(link)

    def _drop(self, link: Any, *, last: bool = False) -> None:
        """Forgets a connection and ends its parked poll; this process's
        copy of it closes (shut down first when it is the `last` copy:
        the front is gone)."""
        self._forget(link)
        self._end_wait(link)
        if last:
            close_now(link.sock)
        else:
            with contextlib.suppress(OSError):
                link.sock.close()

    def _lose_front(self) -> None:
        """The front is gone (or the loop ends): every connection closes
        here, its parked poll ended, and the tasks whose answers the front
        has not reported written are redelivered (none once a shutdown has
        closed every connection in order)."""
        self._lost = True
        for link in list(self._links.values()):
            self._drop(link, last=True)
        tasks, self._tasks = self._tasks, {}
        for task in tasks.values():
            self._calls.undelivered(task)
        if self._channel is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(self._channel.sock)
            with contextlib.suppress(OSError):
                self._channel.sock.close()
            self._channel = None
        if self._fds is not None:
            with contextlib.suppress(OSError):
                self._fds.close()
            self._fds = None


def _other_cpus() -> list[int]:
    """The CPUs the front runs on: all but the one the server's process is
    pinned to (runner._pin_to_one_cpu), or any when there is just one."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    ours = os.sched_getaffinity(0)
    every = set(range(os.cpu_count() or 1))
    return sorted(every - ours) if len(ours) == 1 else []
