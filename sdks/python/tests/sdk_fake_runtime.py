"""A scripted stand-in for the ORBIT runtime's HTTP API, on http.server.

It implements the worker protocol (register, poll, heartbeat, unregister,
complete, fail) closely enough to drive the SDK, records every request, and
lets a test script answers, expire sessions, cancel attempts and go down.
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, Any]  # (status, body): dict -> JSON, str -> text, None -> empty


class Call:
    """One request the fake received."""

    def __init__(self, method: str, path: str, body: Any, headers: dict[str, str]) -> None:
        self.method = method
        self.path = path
        self.body = body
        self.headers = headers
        self.at = time.monotonic()

    def __repr__(self) -> str:
        return f"Call({self.method} {self.path} {self.body!r})"


class FakeRuntime:
    def __init__(
        self,
        heartbeat_interval_ms: int = 100,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.token = token
        self.ssl_context = ssl_context
        self.warnings: list[str] = []
        # Worker protocol extensions offered to a worker that asks; the
        # book's protocol (none) by default.
        self.extensions: list[str] = []
        self.calls: list[Call] = []
        self.connections = 0
        self.sessions: dict[str, str] = {}  # session id -> worker id
        self.results: dict[str, Call] = {}  # token -> the complete/fail call that resolved it
        self.dispatched: dict[str, dict[str, Any]] = {}
        self.routes: dict[tuple[str, str], Callable[[Call], Answer]] = {}
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._cancels: list[str] = []
        self._scripts: dict[str, collections.deque[Answer]] = {}
        self._cond = threading.Condition()
        self._sockets: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> None:
        """Listens on the same port as before (a fresh one the first time)."""
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        server.daemon_threads = True
        server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        """Goes down: refuses connections and drops the open ones."""
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None
        self.drop_connections()

    def drop_connections(self) -> None:
        """Closes every open connection, as a server does with idle keep-alives."""
        with self._cond:
            for sock in list(self._sockets):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._cond.notify_all()

    def restart(self) -> None:
        """Comes back like a restarted runtime: every session is forgotten."""
        with self._cond:
            self.sessions.clear()
        self.start()

    def close(self) -> None:
        if self._server is not None:
            self.stop()

    # -- scripting ----------------------------------------------------------

    def enqueue(self, task_name: str, input: Any = None, **fields: Any) -> str:
        """Queues a task assignment and returns its token."""
        token = str(uuid.uuid4())
        execution_id = fields.pop("execution_id", f"exec-{token[:8]}")
        step = fields.pop("step_id", "step")
        task = {
            "token": token,
            "execution_id": execution_id,
            "workflow": "Wf",
            "workflow_version": "1.0.0",
            "step_id": step,
            "task_name": task_name,
            "contract_version": "1.0.0",
            "input": input,
            "idempotency_key": f"{execution_id}/{step}",
            "attempt": 1,
            "redelivery": False,
            **fields,
        }
        with self._cond:
            self._queue.append(task)
            self._cond.notify_all()
        return token

    def script(self, path: str, *answers: Answer) -> None:
        """Answers the next requests to path with these, before normal handling."""
        with self._cond:
            self._scripts.setdefault(path, collections.deque()).extend(answers)

    def cancel(self, token: str) -> None:
        with self._cond:
            self._cancels.append(token)

    def expire_sessions(self) -> None:
        with self._cond:
            self.sessions.clear()

    # -- observing ----------------------------------------------------------

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out; calls: {self.calls}")
                self._cond.wait(min(remaining, 0.05))

    def result(self, token: str, timeout: float = 10.0) -> Call:
        self.wait_for(lambda: token in self.results, timeout)
        return self.results[token]

    def calls_to(self, path: str) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.path.split("?")[0] == path]

    # -- request handling -----------------------------------------------------

    def handle(self, call: Call) -> Answer:
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()
            script = self._scripts.get(call.path.split("?")[0])
            if script:
                return script.popleft()
        if self.token is not None and call.headers.get("authorization") != f"Bearer {self.token}":
            return 401, _error("UNAUTHENTICATED", "missing or invalid credentials")
        if call.method == "POST" and call.headers.get("content-type") != "application/json":
            return 415, ""
        route = self.routes.get((call.method, call.path.split("?")[0]))
        if route is not None:
            return route(call)
        handler = {
            "/v1/workers/register": self._register,
            "/v1/workers/poll": self._poll,
            "/v1/workers/heartbeat": self._heartbeat,
            "/v1/workers/unregister": self._unregister,
            "/v1/tasks/complete": self._result,
            "/v1/tasks/fail": self._result,
        }.get(call.path)
        if handler is None:
            return 404, _error("NOT_FOUND", f"no route for {call.path}")
        return handler(call)

    def _register(self, call: Call) -> Answer:
        session = str(uuid.uuid4())
        with self._cond:
            self.sessions[session] = call.body["worker_id"]
        answer = {
            "accepted": True,
            "worker_session_id": session,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "session_timeout_ms": self.heartbeat_interval_ms * 6,
            "warnings": self.warnings,
        }
        asked = call.body.get("extensions")
        if asked is not None:
            answer["extensions"] = [name for name in self.extensions if name in asked]
        return 200, answer

    def _poll(self, call: Call) -> Answer:
        return self._next_task(call.body)

    def _next_task(self, body: dict[str, Any]) -> Answer:
        deadline = time.monotonic() + min(body.get("wait_ms", 20000), 60000) / 1000
        with self._cond:
            while True:
                if body["worker_session_id"] not in self.sessions:
                    return 404, _unknown_session()
                if self._queue:
                    task = self._queue.popleft()
                    self.dispatched[task["token"]] = task
                    self._cond.notify_all()
                    return 200, task
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._server is None:
                    return 204, None
                self._cond.wait(remaining)

    def _heartbeat(self, call: Call) -> Answer:
        with self._cond:
            if call.body["worker_session_id"] not in self.sessions:
                return 404, _unknown_session()
            cancel, self._cancels = self._cancels, []
        return 200, {"accepted": True, "cancel": cancel}

    def _unregister(self, call: Call) -> Answer:
        with self._cond:
            if self.sessions.pop(call.body["worker_session_id"], None) is None:
                return 404, _error("UNKNOWN_SESSION", "unknown worker session")
        return 200, {"accepted": True}

    def _result(self, call: Call) -> Answer:
        status, answer = self._report(call)
        poll = call.body.get("poll")
        if "result-then-poll" not in self.extensions or poll is None or status != 200:
            return status, answer
        status, task = self._next_task(poll)
        if status == 404:
            return 200, {**answer, "poll_error": task["error"]}
        return 200, {**answer, "task": task}

    def _report(self, call: Call) -> Answer:
        token = call.body["token"]
        with self._cond:
            if token not in self.dispatched:
                return 200, {
                    "accepted": False,
                    "reason": "unknown token (execution finished or token invalid)",
                }
            if token in self.results:
                return 200, {"accepted": False, "reason": "duplicate result; step already resolved"}
            self.results[token] = call
            self._cond.notify_all()
        return 200, {"accepted": True}

    def track(self, sock: socket.socket, opened: bool) -> None:
        with self._cond:
            if opened:
                self.connections += 1
                self._sockets.add(sock)
            else:
                self._sockets.discard(sock)


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _unknown_session() -> dict[str, Any]:
    return _error("UNKNOWN_SESSION", "unknown or expired worker session; register again")


def _handler_for(fake: FakeRuntime) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the real runtime offers
        # Headers and body go out in separate writes; without this, Nagle's
        # algorithm and delayed ACKs add 40 ms to every answer.
        disable_nagle_algorithm = True

        def setup(self) -> None:
            if fake.ssl_context is not None:
                self.request = fake.ssl_context.wrap_socket(self.request, server_side=True)
            fake.track(self.request, opened=True)
            super().setup()

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                fake.track(self.request, opened=False)
                if fake.ssl_context is not None:
                    # The server closes the socket it accepted, which the
                    # TLS wrapper detached from, so close the wrapper here.
                    self.request.close()

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, answer = fake.handle(Call(self.command, self.path, body, headers))
            if answer is None:
                data, content_type = b"", None
            elif isinstance(answer, str):
                data, content_type = answer.encode(), "text/plain; charset=utf-8"
            else:
                data, content_type = json.dumps(answer).encode(), "application/json"
            self.send_response(status)
            if content_type:
                self.send_header("content-type", content_type)
            self.send_header("x-orbit-api-version", "orbit-api/1")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
