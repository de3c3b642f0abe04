"""A unary-only gRPC server over grpcio's core bindings, for `grpc_server`.

grpcio's own thread-pool server (`grpc.server`) spends more CPU per call
than the engine does on the call's work: for each unary call its polling
thread handles four completion events in Python (the call, the client's
close, the message, the status sent), and the pool thread that runs the
handler waits on a condition for the message the polling thread receives,
so every call crosses between the two threads three times. This server
keeps what a unary call needs and nothing else:

- one thread polls the completion queue. On a new call it asks for the
  client's close, runs the server's `admit` on the call's metadata (the
  credentials), and only for an admitted call asks for the request
  message; when the message is there it hands the call to its method's
  executor (once it has also seen the end of the client's messages: a
  unary call carrying a second message is refused, UNIMPLEMENTED, as gRPC's
  status code table has it for a wrong number of request messages, where
  grpcio's own server answers OK from the first one); the only hand-off a
  call makes. A call `admit` refuses is
  answered at once and its message is never read, so a caller without a
  credential makes the server hold no more than what grpc core buffers of
  a stream nobody reads (its flow-control window), however large the
  message it sends;
- the executor's thread runs the handler (which may block: a long poll
  parks in the engine) and starts ONE batch sending the initial metadata,
  the response (or none) and the status with its trailing metadata;
- the client's close tells whether the call was cancelled (by the client,
  its deadline, or the server stopping): `Call.is_active` is false from
  then on, and a reply to a cancelled call is not sent. A handler whose
  reply must not be lost silently (a task handed to a long poll) names
  what to do if it is, with `Call.on_undelivered`: it runs when the call
  ends cancelled, whether before or after the reply was sent.

Measured on the server's one CPU with an empty handler: about 0.12-0.15 ms
of CPU per call, against 0.22-0.25 ms for `grpc.server` (docs/grpc.md).

What grpcio's server does and this one keeps: the channel arguments
(message size limits), TLS and mutual TLS through `grpc.ServerCredentials`,
the metadata and auth context of a call, UNIMPLEMENTED for an unknown
method or a call without exactly one request message, and a stop that lets
running calls finish for a grace period, then cancels the rest. Streaming
methods, interceptors, compression settings and reflection are left out:
the worker protocol needs none of them.

`grpc._cython.cygrpc` is grpcio's own layer under its public servers, not
a public API: grpcio is pinned to the minor versions this was checked
with (orbit_server/pyproject.toml), and tests/test_server_grpc.py runs
every RPC through it, over plaintext and mutual TLS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import grpc
from grpc._cython import cygrpc

from orbit_server.logs import logger

_log = logger()
_FLAGS = 0
_REQUEST = object()
_SHUTDOWN = object()
_ONE_MESSAGE = "a unary method takes exactly one request message"


@attrs.frozen
class Reply:
    """What a handler answers: a serialized response, or none with an
    error status; `trailing` is the trailing metadata either way."""

    body: bytes | None
    code: grpc.StatusCode = grpc.StatusCode.OK
    details: str = ""
    trailing: tuple[tuple[str, str], ...] = ()


class Call:
    """One call as its handler sees it."""

    __slots__ = (
        "_call",
        "_cancelled",
        "_data",
        "_server",
        "_undelivered",
        "metadata",
        "method",
        "principal",
    )

    def __init__(self, server: UnaryServer, event: Any) -> None:
        self._server = server
        self._call: Any = event.call
        self.method: str = event.call_details.method.decode("utf-8", "replace")
        # (key, value) pairs; a binary (-bin) value is bytes.
        self.metadata: Sequence[tuple[str, str | bytes]] = event.invocation_metadata or ()
        self._cancelled = False
        self._data = b""
        self._undelivered: Callable[[], None] | None = None
        # What the server's `admit` found the caller to be, for the handler.
        self.principal: object = None

    def is_active(self) -> bool:
        """False once the call was cancelled (client, deadline, stop)."""
        return not self._cancelled

    def on_undelivered(self, callback: Callable[[], None]) -> None:
        """Has `callback` run once, on a thread of its own, if the call ends
        cancelled, so that its reply did not reach the client (or may not
        have: a cancellation that comes while the reply is being sent)."""
        with self._server._lock:
            self._undelivered = callback

    def _lost(self) -> None:
        """The reply is lost: runs the `on_undelivered` callback, if any (the
        polling thread must not block on it, nor may it run twice)."""
        with self._server._lock:
            callback, self._undelivered = self._undelivered, None
        if callback is not None:
            threading.Thread(target=callback, name="orbit-grpc-undelivered", daemon=True).start()

    def peer(self) -> str:
        """The client's address as grpc names it (`ipv4:127.0.0.1:5000`)."""
        found = self._call.peer()
        return found.decode("utf-8", "replace") if isinstance(found, bytes) else str(found)

    def auth_context(self) -> Mapping[str, Sequence[bytes]]:
        """The connection's authentication properties (x509_pem_cert,
        peer_dns, ... under TLS), as grpcio's ServicerContext has them."""
        found = cygrpc.auth_context(self._call) or {}
        return {
            (key.decode() if isinstance(key, bytes) else key): value for key, value in found.items()
        }

    # ---- completion events, on the polling thread

    def _closed(self, event: Any) -> None:
        if event.success:
            self._cancelled = bool(event.batch_operations[0].cancelled())
        else:
            self._cancelled = True
        if self._cancelled:
            self._lost()

    def _message(self, event: Any) -> None:
        data = event.batch_operations[0].message() if event.success else None
        if data is None:
            self._server._answer(self, Reply(None, grpc.StatusCode.UNIMPLEMENTED, _ONE_MESSAGE))
            return
        # The handler runs once the client's messages are known to end here.
        self._data = data
        self._server._start(self, (cygrpc.ReceiveMessageOperation(_FLAGS),), self._end)

    def _end(self, event: Any) -> None:
        if event.success and event.batch_operations[0].message() is not None:
            self._server._answer(self, Reply(None, grpc.StatusCode.UNIMPLEMENTED, _ONE_MESSAGE))
            return
        data, self._data = self._data, b""
        handler, executor = self._server._handlers[self.method]
        executor.submit(self._server._run, self, handler, data)


Handler = Callable[[Call, bytes], Reply]
# Runs on the polling thread before a call's message is read: a refusal,
# or None to read the message and run the handler. It must not block.
Admit = Callable[[Call], Reply | None]


class Runs(Protocol):
    """Where a method's handler runs (`call_threads.CallThreads`, or any
    `concurrent.futures.Executor`)."""

    def submit(self, fn: Callable[..., object], /, *args: Any) -> object: ...


class UnaryServer:
    """The server: `add_port`, then `start`; `stop` to end it. `handlers`
    maps a method's path to its handler and the executor it runs on."""

    def __init__(
        self,
        handlers: Mapping[str, tuple[Handler, Runs]],
        options: Sequence[tuple[str, Any]] = (),
        admit: Admit | None = None,
    ) -> None:
        self._handlers = dict(handlers)
        self._admit = admit
        self._queue = cygrpc.CompletionQueue()
        self._server = cygrpc.Server(tuple(options), False)
        self._server.register_completion_queue(self._queue)
        self._lock = threading.Lock()
        # Operations started and not yet completed (the call request, each
        # batch, the shutdown): the core is given up only when none is left.
        self._due = 0
        self._stopping = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def add_port(self, target: str, credentials: grpc.ServerCredentials | None = None) -> int:
        """Binds `target`; the port bound (0 when it could not be)."""
        address = target.encode()
        if credentials is None:
            port: int = self._server.add_http2_port(address)
        else:
            port = self._server.add_http2_port(address, credentials._credentials)
        return port

    def start(self) -> None:
        self._server.start()
        with self._lock:
            self._request()
        self._thread = threading.Thread(target=self._serve, name="orbit-grpc-poll", daemon=True)
        self._thread.start()

    def stop(self, grace: float) -> threading.Event:
        """Takes no new calls; those running get `grace` seconds, then are
        cancelled. The event is set once the server is gone."""
        with self._lock:
            if self._thread is None:
                self._stopped.set()
                return self._stopped
            if not self._stopping:
                self._stopping = True
                self._due += 1
                self._server.shutdown(self._queue, _SHUTDOWN)
                threading.Thread(
                    target=self._cancel_after, args=(grace,), name="orbit-grpc-grace", daemon=True
                ).start()
        return self._stopped

    def _cancel_after(self, grace: float) -> None:
        if not self._stopped.wait(grace):
            with self._lock:
                if not self._stopped.is_set():
                    self._server.cancel_all_calls()

    # ---- the polling thread

    def _serve(self) -> None:
        queue = self._queue
        while True:
            event = queue.poll()
            tag = event.tag
            try:
                if tag is _REQUEST:
                    self._arrived(event)
                elif tag is not _SHUTDOWN:
                    tag(event)
            except Exception as exc:  # one call's trouble never stops the server
                _log.error("gRPC call event failed", exc_info=exc)
            with self._lock:
                self._due -= 1
                if self._stopping and self._due == 0:
                    self._server.destroy()
                    self._stopped.set()
                    return
            # The event holds the call: let it go before waiting again.
            event = tag = None

    def _request(self) -> None:
        """Asks the core for the next call (under the lock)."""
        self._due += 1
        self._server.request_call(self._queue, self._queue, _REQUEST)

    def _arrived(self, event: Any) -> None:
        with self._lock:
            if not self._stopping:
                self._request()
        if not event.success:  # the request ended by the shutdown
            return
        call = Call(self, event)
        self._start(call, (cygrpc.ReceiveCloseOnServerOperation(_FLAGS),), call._closed)
        if call.method not in self._handlers:
            self._answer(call, Reply(None, grpc.StatusCode.UNIMPLEMENTED, "Method not found!"))
            return
        refusal = self._admitted(call)
        if refusal is not None:
            self._answer(call, refusal)
            return
        self._start(call, (cygrpc.ReceiveMessageOperation(_FLAGS),), call._message)

    def _admitted(self, call: Call) -> Reply | None:
        if self._admit is None:
            return None
        try:
            return self._admit(call)
        except Exception as exc:  # a fault of the server's, not the caller's
            _log.error("gRPC admission failed", method=call.method, exc_info=exc)
            return Reply(None, grpc.StatusCode.UNKNOWN, "Exception calling application")

    def _start(self, call: Call, operations: tuple[Any, ...], tag: Callable[[Any], None]) -> bool:
        with self._lock:
            if self._stopped.is_set():
                return False
            self._due += 1
            error = call._call.start_server_batch(operations, tag)
            if error:
                self._due -= 1
                return False
            return True

    # ---- the executor's threads

    def _run(self, call: Call, handler: Handler, data: bytes) -> None:
        try:
            reply = handler(call, data)
        except Exception as exc:  # a handler answers its own errors; this is a fault
            _log.error("gRPC handler failed", method=call.method, exc_info=exc)
            reply = Reply(None, grpc.StatusCode.UNKNOWN, "Exception calling application")
        self._answer(call, reply)

    def _answer(self, call: Call, reply: Reply) -> None:
        """Sends the reply in one batch, unless the call is already over."""
        if call._cancelled:
            call._lost()  # the close came first: nothing will be sent
            return
        operations: list[Any] = [cygrpc.SendInitialMetadataOperation((), _FLAGS)]
        if reply.body is not None:
            operations.append(cygrpc.SendMessageOperation(reply.body, _FLAGS))
        operations.append(
            cygrpc.SendStatusFromServerOperation(
                reply.trailing, reply.code.value[0], reply.details.encode("utf-8"), _FLAGS
            )
        )
        self._start(call, tuple(operations), _sent)


def _sent(event: Any) -> None:
    """The reply went out (or the call ended first): nothing left to do."""
