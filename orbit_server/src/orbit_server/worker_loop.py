"""The worker loop: the worker protocol's hot calls served from one thread.

A worker's step is one request (a result carrying the next poll,
`result-then-poll`) or two (a result, then a poll). On the thread path each
request wakes a pool thread, which submits one command to the group commit
and sleeps until the group's leader wakes it again: at a few thousand steps
a second the server spends more CPU handing work between threads (kernel
scheduling, futex wake-ups, the GIL changing hands) than the engine spends
on the steps. The loop serves those calls with no hand-off at all.

One loop per server process, started by the gunicorn worker
(`worker.OrbitWorker`): a thread with a selector and a wake-up pipe. A
plain-HTTP (not TLS) kept-alive connection moves to it once the thread path
has answered one of its hot calls (`worker.OrbitWorker.handle`); gunicorn
forgets the connection then (its count, poller and keep-alive list). Each
turn of the loop:

1. `select`, and `recv` what every readable connection sent;
2. parse each connection's next request with the short path's own parser
   and acceptance rules (`OrbitWorker.parse`); a request the short path
   would give gunicorn, any request but a hot call, and a hot call that
   would be refused before it reaches the engine (credentials, content
   type, JSON, fields, limits) send the connection back to the thread pool
   with its unread bytes, where the request is answered as before;
3. make all the turn's hot calls (`WorkerCalls.*_call`, the same checks
   and commands as the blocking calls) and run them as ONE group in this
   thread (`WorkerDesk.run_calls`);
4. answer every call that has its answer, with the bytes the thread path
   writes for it (status line, Server, Date, Connection, the API version,
   Content-Type, Content-Length, body); a poll that parked is watched
   (`WorkerDesk.watch`): the group that hands it a task, or its expiry, or
   a shutdown's drain, writes to the wake-up pipe, and the loop answers it
   then; its `wait_ms` is the loop's timer (`WorkerDesk.expire`).

A client's start (`POST /v1/executions` by the admin token, on a server
without `--retention`) is served the same way once one of its connection's
starts has succeeded: the start's command (`WorkerDesk.start_call`, the one
`Engine.start` runs) joins the turn's group, and its answer is the route's
`201`/`200` or error envelope. A client identity's start, whose permission
the route checks, stays on the thread path.

Writes are non-blocking, with a buffer per connection. A task whose answer
cannot have reached its worker (the connection was gone when the answer was
ready, or writing it failed) is reported `undelivered`, as the thread path
does (resources/_peer.py). At most one request per connection is in
flight: a pipelined one waits for its predecessor's answer.

Shutdown (`stop`): new calls no longer park (the engine drains), idle
connections close at once, and those with a call in flight close once it
is answered, with `Connection: close`.

On a machine with a second CPU the loop's sockets are the front
process's (front.py, front_link.py): it receives, parses and writes, and
this loop keeps the engine's part. `ORBIT_WORKER_LOOP` chooses (`mode`):
`front`, `on` (everything on this thread, the default on one CPU) or `off`
(every connection on the thread path, an escape hatch;
docs/design/server.md).
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import falcon
import orjson

from orbit_core.api import Started, StartRequest
from orbit_core.engine.commands import Command
from orbit_core.engine.worker_desk import DeskCall, WorkerDesk
from orbit_core.errors import OrbitError
from orbit_server import errors
from orbit_server.auth import ANYONE, API_VERSION, Caller, Credentials, Kind
from orbit_server.body import Fields, _is_json
from orbit_server.http_short import Asked, answer_bytes, asked, close_now
from orbit_server.logs import logger
from orbit_server.resources._json import encode
from orbit_server.resources._peer import connection_probe
from orbit_server.resources.workers import (
    complete_fields,
    fail_fields,
    poll_fields,
    then_polled,
)
from orbit_server.worker_calls import WorkerCalls

_log = logger()
POLL = "/v1/workers/poll"
COMPLETE = "/v1/tasks/complete"
FAIL = "/v1/tasks/fail"
HOT = frozenset({POLL, COMPLETE, FAIL})
# A client's start, served when the loop is given the engine's starts.
STARTS = "/v1/executions"
_RECV = 64 * 1024
# A connection whose unread bytes reach this stops being read until its
# requests are answered.
_MAX_IN = 256 * 1024
_VERSION = f"x-orbit-api-version: {API_VERSION}\r\n".encode("latin-1")


def mode() -> str:
    """How hot calls are served (`ORBIT_WORKER_LOOP`): "off" (the thread
    path), "front" (the loop, its HTTP in the front process: front.py) or
    "on" (the loop on its thread). Unset: "front" on a machine with a
    second CPU, else "on" (docs/performance.md has the measurements)."""
    value = os.environ.get("ORBIT_WORKER_LOOP", "").strip().lower()
    if value in ("off", "0", "no"):
        return "off"
    if value == "on" or not hasattr(socket, "send_fds"):
        return "on"
    if value == "front":
        return "front"
    # The machine's CPUs, not the process's: the server's process is
    # pinned to one by then (runner._pin_to_one_cpu).
    return "front" if (os.cpu_count() or 1) > 1 else "on"


class _Link:
    """A connection on the loop: the gunicorn connection it came from, its
    bytes in and out, and the call it waits for."""

    __slots__ = (
        "call",
        "close_after",
        "eof",
        "events",
        "fd",
        "out",
        "probe",
        "sock",
        "tasks",
        "tconn",
        "unread",
        "writing",
    )

    def __init__(self, tconn: Any, unread: bytes) -> None:
        self.tconn = tconn
        self.sock: socket.socket = tconn.sock
        self.fd = self.sock.fileno()
        self.unread = bytearray(unread)
        self.out = bytearray()
        # (end of its answer in `out`, task): tasks whose answers are not out yet.
        self.tasks: list[tuple[int, Any]] = []
        self.call: _Call | None = None
        self.close_after = False
        self.eof = False
        self.writing = False
        # What the selector watches for.
        self.events = 0
        self.probe = connection_probe({"gunicorn.socket": self.sock})


class _Call:
    """A hot call in flight: its connection, its desk call, and what the
    answer looks like."""

    __slots__ = ("answered", "close", "deadline", "desk", "link", "path")

    def __init__(self, link: _Link, path: str, desk: DeskCall, close: bool) -> None:
        self.link = link
        self.path = path
        self.desk = desk
        self.close = close
        self.answered = False
        self.deadline = 0.0


class WorkerLoop:
    """The loop (module docstring). `parse` is the short path's request
    parser, `hand_back` gives a connection back to the thread pool (any
    thread), `head` writes a response head as the short path does, and
    `alive` tells whether the worker still serves."""

    def __init__(
        self,
        calls: WorkerCalls,
        desk: WorkerDesk,
        credentials: Credentials,
        max_body: int,
        *,
        parse: Callable[[Any, bytes], tuple[dict[str, Any], bool, int] | int],
        hand_back: Callable[[Any], None],
        head: Callable[[str, list[tuple[str, str]], bool], bytes],
        start: Callable[[StartRequest], DeskCall] | None = None,
    ) -> None:
        self._calls = calls
        self._start = start
        self._desk = desk
        self._credentials = credentials
        self._max_body = max_body
        self._parse = parse
        self._hand_back = hand_back
        self._head = head
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._adopted: collections.deque[tuple[Any, bytes]] = collections.deque()
        self._woken: collections.deque[_Call] = collections.deque()
        self._links: dict[int, _Link] = {}
        # Links with bytes to parse and no call in flight.
        self._ready: dict[int, _Link] = {}
        self._timers: list[tuple[float, int, _Call]] = []
        self._seq = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="orbit-worker-loop", daemon=True)

    # ---- other threads

    def start(self) -> None:
        self._thread.start()

    def adopt(self, tconn: Any, unread: bytes) -> None:
        """Takes a kept-alive connection over (any thread)."""
        self._adopted.append((tconn, unread))
        self._wake()

    def stop(self) -> None:
        """Closes idle connections now and the others once answered."""
        self._stopping = True
        self._wake()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def serves(self, path: str) -> bool:
        """Whether the loop answers POSTs to `path` (a connection that made
        one successfully moves to the loop)."""
        return path in HOT or (path == STARTS and self._start is not None)

    @property
    def connections(self) -> int:
        return len(self._links)

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"\0")

    # ---- the loop

    def _run(self) -> None:
        try:
            while not (self._stopping and not self._links and not self._adopted):
                self._turn()
        except BaseException:
            _log.exception("the worker loop failed; its connections are closed")
            raise
        finally:
            self._release()
            self._selector.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _release(self) -> None:
        """(the loop's end) Lets go of every connection still held."""
        for link in list(self._links.values()):
            self._close(link)

    def _turn(self) -> None:
        timeout: float | None = None
        if self._ready or self._adopted or self._woken:
            timeout = 0.0
        elif self._timers:
            timeout = max(0.0, self._timers[0][0] - time.monotonic())
        elif self._stopping:
            timeout = 0.1
        for key, mask in self._selector.select(timeout):
            link = key.data
            if link is None:
                with contextlib.suppress(BlockingIOError, OSError):
                    while os.read(self._wake_r, 4096):
                        pass
                continue
            if mask & selectors.EVENT_WRITE:
                self._flush(link)
            if mask & selectors.EVENT_READ and self._open(link):
                self._receive(link)
        while self._adopted:
            self._take(*self._adopted.popleft())
        batch = self._requests()
        if batch:
            self._run_calls(batch)
        if self._stopping:
            # What came whole is answered (with Connection: close); the rest closes.
            for link in list(self._links.values()):
                if link.call is None and not link.out:
                    self._close(link)
        self._answer_woken()
        self._expire_due()

    def _take(self, tconn: Any, unread: bytes) -> None:
        link = _Link(tconn, unread)
        if self._stopping:
            self._hand_back_link(link, bytes(link.unread))
            return
        _log.debug("worker connection on the worker loop")
        link.sock.setblocking(False)
        self._links[link.fd] = link
        self._modify(link)
        if link.unread:
            self._ready[link.fd] = link

    def _receive(self, link: _Link) -> None:
        try:
            data = link.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            link.eof = True
            self._modify(link)
            call = link.call
            if call is None:
                if not link.unread:
                    self._close(link)
                return
            self._end_wait(link)
            return
        link.unread += data
        if link.call is None:
            self._ready[link.fd] = link
        if len(link.unread) >= _MAX_IN:
            self._modify(link)

    def _modify(self, link: _Link) -> None:
        """Registers what the link waits for: bytes in (unless at EOF or
        full) and room for bytes out."""
        events = 0
        if not link.eof and len(link.unread) < _MAX_IN:
            events |= selectors.EVENT_READ
        if link.writing:
            events |= selectors.EVENT_WRITE
        if events == link.events or not self._open(link):
            return
        if not events:
            self._selector.unregister(link.sock)
        elif link.events:
            self._selector.modify(link.sock, events, link)
        else:
            self._selector.register(link.sock, events, link)
        link.events = events

    def _open(self, link: _Link) -> bool:
        """Whether the link is still on the loop (a closed link's descriptor
        may be another's by now)."""
        return self._links.get(link.fd) is link

    # ---- requests

    def _requests(self) -> list[_Call]:
        """The turn's hot calls, one per ready connection."""
        batch: list[_Call] = []
        ready, self._ready = self._ready, {}
        for link in ready.values():
            if link.call is not None or not self._open(link):
                continue
            call = self._request(link)
            if call is not None:
                batch.append(call)
        return batch

    def _request(self, link: _Link) -> _Call | None:
        data = bytes(link.unread)
        try:
            parsed = self._parse(link.tconn, data)
        except Exception:  # the short path's fallback: gunicorn reads it
            self._hand_back_link(link, data)
            return None
        if isinstance(parsed, int):
            if link.eof:
                self._close(link)
            return None  # more bytes to come
        environ, close, end = parsed
        try:
            call = self._call_of(link, asked(environ, close or self._stopping))
        except Exception:  # refused before the engine: the thread path refuses it
            call = None
        if call is None:
            # The thread path answers it (and any refusal) as before.
            link.tconn.orbit_parser = None
            self._hand_back_link(link, data)
            return None
        del link.unread[:end]
        link.call = call
        return call

    def _call_of(self, link: Any, request: Asked) -> _Call | None:
        """The hot call a request makes, or None when the request is not
        one the loop answers: the gate's and the route's checks, in their
        order, any refusal going back to the thread path."""
        path = request.path
        close = request.close
        if (
            not self.serves(path)
            or request.method != "POST"
            or request.raw_uri != path
            or not _is_json(request.content_type)
        ):
            return None
        who = self._caller(request.authorization)
        if who is None:
            return None
        length = request.length
        if not length or int(length) > self._max_body:
            return None
        body = Fields(orjson.loads(request.body))
        if path == STARTS:
            return self._start_call(link, who, body, close)
        calls = self._calls
        probe = link.probe
        desk: DeskCall
        if path == POLL:
            session, wait_ms = poll_fields(body)
            desk = calls.poll_call(who, session, wait_ms, probe)
        elif path == COMPLETE:
            token, output, poll = complete_fields(body, calls.result_then_poll)
            if poll is None:
                desk = calls.complete_call(who, token, output)
            else:
                desk = calls.complete_then_poll_call(who, token, output, poll, probe)
        else:
            failed = fail_fields(body, calls.result_then_poll)
            fields = {
                "error_code": failed.error_code,
                "error_message": failed.error_message,
                "retryable": failed.retryable,
                "details": failed.details,
            }
            if failed.poll is None:
                desk = calls.fail_call(who, failed.token, **fields)
            else:
                desk = calls.fail_then_poll_call(
                    who, failed.token, poll=failed.poll, connected=probe, **fields
                )
        return _Call(link, path, desk, close)

    def _start_call(self, link: Any, who: Caller, body: Fields, close: bool) -> _Call | None:
        """A start by the admin (or by anyone, without credentials), read as
        the route reads it. A worker's start, refused by the gate, and a
        client identity's, whose permission the route checks against the
        workflow, stay the thread path's, as does any start the route would
        refuse before the engine."""
        if who.kind is not Kind.ADMIN or self._start is None:
            return None
        request = StartRequest(
            body.required_string("workflow"),
            version=body.string("version"),
            input=body.any("input"),
            execution_id=body.string("execution_id"),
            idempotency_key=body.string("idempotency_key"),
        )
        # Raises for what is refused before any command (the input's size).
        return _Call(link, STARTS, self._start(request), close)

    def _caller(self, authorization: str | None) -> Caller | None:
        """The gate's caller for a worker route; None when it refuses."""
        credentials = self._credentials
        if not credentials.required:
            return ANYONE
        try:
            who = credentials.caller(authorization)
        except OrbitError:
            return None
        return None if who.kind is Kind.CLIENT else who

    # ---- the engine

    def _run_calls(self, batch: list[_Call]) -> None:
        try:
            self._desk.run_calls([call.desk for call in batch])
        except Exception as exc:
            # The engine is closed or broken: each call has its error, or this one.
            for call in batch:
                cmd = call.desk.cmd
                if not cmd.done:
                    cmd.error = exc
                    cmd.done = True
        for call in batch:
            if call.desk.waiting:
                self._park(call)
            else:
                self._answer(call)

    def _park(self, call: _Call) -> None:
        call.deadline = time.monotonic() + call.desk.wait / 1000.0
        self._seq += 1
        heapq.heappush(self._timers, (call.deadline, self._seq, call))
        woken = self._woken

        def changed() -> None:
            woken.append(call)
            self._wake()

        self._desk.watch(call.desk, changed)
        if call.link.eof:
            self._desk.expire(call.desk)

    def _answer_woken(self) -> None:
        while self._woken:
            call = self._woken.popleft()
            if not call.answered and not call.desk.waiting:
                self._answer(call)

    def _expire_due(self) -> None:
        now = time.monotonic()
        timers = self._timers
        while timers and (timers[0][2].answered or timers[0][0] <= now):
            call = heapq.heappop(timers)[2]
            if call.answered:
                continue
            if self._desk.expire(call.desk) and not call.desk.cmd.done:
                self._answer(call)
            # else claimed: its task comes through `watch`

    # ---- answers

    def _answer(self, call: _Call) -> None:
        call.answered = True
        link = call.link
        link.call = None
        close = call.close or self._stopping
        task: Any = None
        body: bytes | None
        if call.desk.kind == DeskCall.START:
            status, body = _started(call.desk.cmd)
        else:
            status, body, task = self._reported(call)
        if not self._open(link):
            if task is not None:
                self._calls.undelivered(task)
            return
        if task is not None and (link.eof or (link.probe is not None and not link.probe())):
            # As on the thread path: a task for a worker that left is redelivered now.
            self._calls.undelivered(task)
            self._close(link)
            return
        self._deliver(link, status, body, task, close)

    def _deliver(self, link: Any, status: str, body: bytes | None, task: Any, close: bool) -> None:
        """Writes an answer to its connection."""
        link.out += answer_bytes(self._head(status, [], close), _VERSION, body)
        if task is not None:
            link.tasks.append((len(link.out), task))
        link.close_after = close
        self._flush(link)
        if self._open(link) and link.unread:
            self._ready[link.fd] = link

    def _reported(self, call: _Call) -> tuple[str, bytes | None, Any]:
        """A worker call's status, body and the task it hands over."""
        try:
            ack, found = self._calls.found(call.desk)
        except OrbitError as exc:
            return (*_refused(exc), None)
        except Exception as exc:
            _log.error("request failed", method="POST", path=call.path, exc_info=exc)
            return (*_internal(exc), None)
        if call.desk.kind == DeskCall.POLL:
            task = found.task
            if task is None:
                return "204 No Content", None, None
            return "200 OK", encode(task), task
        if call.desk.kind == DeskCall.RESULT:
            return "200 OK", encode(ack), None
        task = found.task
        return "200 OK", encode(then_polled(ack, found)), task

    def _flush(self, link: _Link) -> None:
        out = link.out
        while out:
            try:
                sent = link.sock.send(out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(link)
                return
            del out[:sent]
            if link.tasks:
                link.tasks = [(end - sent, task) for end, task in link.tasks if end > sent]
        writing = bool(out)
        if writing != link.writing:
            link.writing = writing
            self._modify(link)
        if not out and (link.close_after or (link.eof and link.call is None and not link.unread)):
            self._close(link)

    # ---- leaving the loop

    def _hand_back_link(self, link: _Link, data: bytes) -> None:
        """Gives the connection back to the thread pool with `data` (its
        unread bytes) once what it was sent is out."""
        self._forget(link)
        sock = link.sock
        try:
            sock.setblocking(True)
            if link.out:
                sock.sendall(link.out)
        except OSError:
            self._undelivered(link)
            close_now(sock)
            return
        link.out.clear()
        link.tasks = []
        tconn = link.tconn
        tconn.orbit_parser = None
        if data:
            tconn.parser.unreader.unread(data)
        _log.debug("worker connection back on the thread path")
        self._hand_back(tconn)

    def _close(self, link: _Link) -> None:
        if not self._open(link):
            return
        self._forget(link)
        self._undelivered(link)
        self._end_wait(link)
        close_now(link.sock)

    def _end_wait(self, link: _Link) -> None:
        """Ends the link's parked poll, if it has one: its worker left."""
        call = link.call
        if call is not None and call.desk.waiting:
            self._desk.expire(call.desk)

    def _undelivered(self, link: _Link) -> None:
        tasks, link.tasks = link.tasks, []
        for _, task in tasks:
            self._calls.undelivered(task)

    def _forget(self, link: _Link) -> None:
        if not self._open(link):
            return
        del self._links[link.fd]
        self._ready.pop(link.fd, None)
        if link.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(link.sock)
            link.events = 0


def _started(cmd: Command) -> tuple[str, bytes]:
    """A start's status and body, as the route and its error handlers
    write them."""
    error = cmd.error
    if error is None:
        answer = cast(Started, cmd.result)
        return falcon.code_to_http_status(201 if answer["created"] else 200), encode(answer)
    if isinstance(error, OrbitError):
        return _refused(error)
    _log.error("request failed", method="POST", path=STARTS, exc_info=error)
    return _internal(error)


def _refused(exc: OrbitError) -> tuple[str, bytes]:
    return falcon.code_to_http_status(errors.STATUS.get(exc.code, 500)), errors.error_json(
        exc.code, exc.message
    )


def _internal(exc: BaseException) -> tuple[str, bytes]:
    return falcon.code_to_http_status(500), errors.error_json(
        "INTERNAL", f"internal error: {type(exc).__name__}"
    )
