"""SIGKILL `orbit server` while tasks are in flight, restart it on the same
database and port: every execution completes and every step succeeds once."""

from __future__ import annotations

import http.client
import random
import re
import signal
import threading
import time
from pathlib import Path

import server_ir
from server_harness import Http, ServerProcess

EXECUTIONS = 30
STEPS = 3


class ResilientWorker(threading.Thread):
    """A raw-protocol worker that rides out a server crash: it re-registers on
    UNKNOWN_SESSION and retries a result until the server answers it."""

    def __init__(self, addr: str, name: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.addr = addr
        self.name = name
        self.halt = stop
        self.session = ""
        self.http = Http(addr, timeout=10)
        self.completed = 0

    def call(self, path: str, body: object) -> tuple[int, object]:
        while not self.halt.is_set():
            try:
                reply = self.http.post(path, body)
            except (OSError, http.client.HTTPException):
                self.http.close()
                time.sleep(0.05)
                continue
            if reply.status >= 500:
                time.sleep(0.05)
                continue
            return reply.status, reply.body
        return 0, None

    def register(self) -> None:
        status, body = self.call(
            "/v1/workers/register",
            {
                "worker_id": self.name,
                "runtime": "python",
                "contracts": [{"task_name": "bench.step", "contract_version": "1.0.0"}],
            },
        )
        if status == 200:
            assert isinstance(body, dict)
            self.session = body["worker_session_id"]

    def run(self) -> None:
        self.register()
        while not self.halt.is_set():
            status, task = self.call(
                "/v1/workers/poll", {"worker_session_id": self.session, "wait_ms": 300}
            )
            if status == 404:
                self.register()
                continue
            if status != 200 or not isinstance(task, dict):
                continue
            time.sleep(random.uniform(0, 0.01))
            status, _ = self.call(
                "/v1/tasks/complete",
                {"token": task["token"], "output": {"i": task["input"]["i"] + 1}},
            )
            if status == 200:
                self.completed += 1
        self.http.close()


def test_sigkill_loses_nothing(tmp_path: Path) -> None:
    proc = ServerProcess(tmp_path / "orbit.db", "--session-timeout", "1").start()
    addr = proc.addr
    proc.args += ["--addr", addr]
    api = proc.http()
    assert api.post("/v1/workflows", server_ir.chain(STEPS)).status == 201
    for i in range(EXECUTIONS):
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": f"c-{i}"}).status
    halt = threading.Event()
    workers = [ResilientWorker(addr, f"w-{i}", halt) for i in range(4)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 30
    while sum(w.completed for w in workers) < EXECUTIONS and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.stop(signal.SIGKILL) == -signal.SIGKILL
    time.sleep(0.2)
    proc.start()
    try:
        api = proc.http()
        for i in range(EXECUTIONS):
            state = api.get(f"/v1/executions/c-{i}/wait?timeout_ms=30000").body
            assert state["status"] == "COMPLETED", state
            events = api.get(f"/v1/executions/c-{i}/history").body["events"]
            succeeded = [e["step"] for e in events if e["type"] == "StepSucceeded"]
            assert sorted(succeeded) == [f"s{n}" for n in range(STEPS)]
            assert state["units"][f"s{STEPS - 1}"]["output"] == {"i": STEPS}
    finally:
        halt.set()
        for worker in workers:
            worker.join(10)
        proc.stop()
    runs = re.findall(r"recovered active executions from history executions=(\d+)", proc.log())
    assert len(runs) == 2
    assert int(runs[1]) > 0
