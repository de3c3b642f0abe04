"""A real `orbit server` process on loopback, and a raw HTTP client for it.

`ServerProcess` starts `orbit server --addr 127.0.0.1:0` (the server picks a
free port and logs it), collects its stderr, and stops it with a signal.
`Http` is a keep-alive http.client connection that returns (status, headers,
body) with the body parsed when it is JSON: the tests see exactly what a
client on the wire sees.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pgkit

ORBIT = str(Path(sys.executable).with_name("orbit"))
_LISTENING = re.compile(r'ORBIT runtime listening(?: addr=|",\s*"addr":\s*")([0-9.:\[\]]+)')


class Response:
    __slots__ = ("body", "headers", "raw", "status")

    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw
        kind = headers.get("content-type", "")
        self.body: Any = json.loads(raw) if raw and kind.startswith("application/json") else raw

    @property
    def text(self) -> str:
        return self.raw.decode()

    def __repr__(self) -> str:
        return f"<{self.status} {self.raw[:300]!r}>"


class Http:
    """One keep-alive connection; `token` is sent as a bearer credential."""

    def __init__(self, addr: str, token: str | None = None, timeout: float = 90.0) -> None:
        host, port = addr.rsplit(":", 1)
        self.addr = addr
        self.token = token
        self._conn = http.client.HTTPConnection(host, int(port), timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = None,
    ) -> Response:
        sent = dict(headers or {})
        credential = token if token is not None else self.token
        if credential:
            sent.setdefault("authorization", f"Bearer {credential}")
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("content-type", "application/json")
        for attempt in range(2):
            try:
                self._conn.request(method, path, body=data, headers=sent)
                reply = self._conn.getresponse()
                payload = reply.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._conn.close()
                if attempt:
                    raise
        found = {k.lower(): v for k, v in reply.getheaders()}
        return Response(reply.status, found, payload)

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("POST", path, body, **kw)

    def close(self) -> None:
        self._conn.close()


class ServerProcess:
    """`orbit server` on a database file (a PostgreSQL database of its own
    with ORBIT_TEST_DB=postgres: `pgkit.db_for`), with extra flags and
    environment."""

    def __init__(self, db: Path | str, *args: str, env: dict[str, str] | None = None) -> None:
        self.db = db
        self.args = list(args)
        self.env = env or {}
        self.addr = ""
        self.lines: list[str] = []
        # Notified for each line read, for `wait_for_log`.
        self._new_line = threading.Condition()
        self.proc: subprocess.Popen[str] | None = None
        self._listening = threading.Event()
        self._clients: list[Http] = []

    def start(self, timeout: float = 30.0) -> ServerProcess:
        self.addr = ""
        self._listening.clear()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
        env.update(self.env)
        self.proc = subprocess.Popen(
            [ORBIT, "server", "--db", pgkit.db_for(self.db), "--addr", "127.0.0.1:0", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError("orbit server did not start:\n" + self.log())
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with self._new_line:
                self.lines.append(line.rstrip("\n"))
                self._new_line.notify_all()
            match = _LISTENING.search(line)
            if match:
                self.addr = match[1]
                self._listening.set()

    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_for_log(self, text: str, timeout: float = 10.0) -> str:
        """The log once it holds `text`: stderr is read on a thread of its
        own, so a line the server wrote may not be here yet."""
        with self._new_line:
            self._new_line.wait_for(lambda: text in self.log(), timeout)
        return self.log()

    def http(self, token: str | None = None) -> Http:
        """A client, closed when the server stops."""
        client = Http(self.addr, token)
        self._clients.append(client)
        return client

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Sends `sig` and waits; returns the exit status."""
        for client in self._clients:
            client.close()
        self._clients.clear()
        proc = self.proc
        if proc is None:
            return 0
        children = [p for p in _pids() if _parent_of(p) == proc.pid]
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        _wait_gone(children)
        self._reader.join(10)
        if proc.stderr is not None:
            proc.stderr.close()
        self.proc = None
        return code

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _parent_of(pid: int) -> int | None:
    stat = _stat(pid)
    return int(stat[1]) if stat else None


def _wait_gone(pids: list[int]) -> None:
    """The worker dies with the arbiter (even on SIGKILL); wait until it has."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = [p for p in pids if (stat := _stat(p)) is not None and stat[0] != "Z"]
        if not alive:
            return
        time.sleep(0.02)
    raise RuntimeError(f"server processes {pids} outlived the server")


def run_orbit(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> Any:
    """Runs `orbit ...` to completion (for the configuration refusals)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
    clean.update(env or {})
    return subprocess.run(
        [ORBIT, *args],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=clean,
        timeout=timeout,
    )


class RawWorker:
    """A worker speaking the HTTP/JSON protocol by hand, one call at a time."""

    def __init__(
        self,
        http: Http,
        worker_id: str,
        contracts: list[tuple[str, str]],
        runtime: str = "python",
    ) -> None:
        self.http = http
        self.worker_id = worker_id
        self.contracts = contracts
        self.runtime = runtime
        self.session = ""

    def register(self) -> Response:
        reply = self.http.post(
            "/v1/workers/register",
            {
                "worker_id": self.worker_id,
                "runtime": self.runtime,
                "sdk": "raw-test",
                "contracts": [
                    {"task_name": name, "contract_version": version}
                    for name, version in self.contracts
                ],
            },
        )
        if reply.status == 200:
            self.session = reply.body["worker_session_id"]
        return reply

    def poll(self, wait_ms: int = 5000) -> Response:
        return self.http.post(
            "/v1/workers/poll", {"worker_session_id": self.session, "wait_ms": wait_ms}
        )

    def task(self, wait_ms: int = 5000) -> dict[str, Any]:
        reply = self.poll(wait_ms)
        assert reply.status == 200, reply
        return dict(reply.body)

    def heartbeat(self) -> Response:
        return self.http.post("/v1/workers/heartbeat", {"worker_session_id": self.session})

    def unregister(self) -> Response:
        return self.http.post("/v1/workers/unregister", {"worker_session_id": self.session})

    def complete(self, token: str, output: Any = None) -> Response:
        return self.http.post("/v1/tasks/complete", {"token": token, "output": output})

    def fail(self, token: str, code: str, **fields: Any) -> Response:
        return self.http.post("/v1/tasks/fail", {"token": token, "error_code": code, **fields})


def wait_until(
    check: Callable[[], Any],
    timeout: float,
    what: str,
    *logs: ServerProcess,
    every: float = 0.05,
) -> Any:
    """`check()`'s first true value, polled every `every` seconds for at most
    `timeout` seconds (for state only visible through another process); a
    timeout shows the logs of `logs`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            shown = "\n".join(p.log() for p in logs)
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{shown}")
        time.sleep(every)
