"""Pause and resume against a real `orbit server` (issue 38's interface,
docs/operating-executions.md): the book's hello workflow paused before a
worker took its first task hands out nothing until resumed, then runs to
completion; results arriving while paused are recorded; signals wait; cancel
works; a pause survives a restart (SQLite and PostgreSQL); the CLI prints
the pause in `orbit status` and `orbit ps`; batch jobs act on every
execution a filter selects and go on after a SIGKILL."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_real import Orbit
from server_harness import Http, RawWorker, ServerProcess, wait_until

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[1]
HELLO = REPO / "examples" / "hello.orbit"
CONTRACTS = [("greeting.compose", "1.0.0"), ("greeting.decorate", "1.0.0")]

WAITER = """\
workflow Waiter {
    version "1.0.0"
    input { n: Int = 0 }
    signal go { ok: Bool }
    step wait { await go timeout 1d }
    return { ok: wait.ok }
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("pause") / "orbit.db") as proc:
        Orbit(f"http://{proc.addr}").ok("deploy", str(HELLO))
        yield proc


@pytest.fixture
def orbit(server: ServerProcess) -> Orbit:
    return Orbit(f"http://{server.addr}")


def _worker(http: Http, name: str, runtime: str = "python") -> RawWorker:
    """A worker of both tasks; hello's `compose` runs `using python`, its
    `decorate` `using typescript`."""
    worker = RawWorker(http, name, CONTRACTS, runtime)
    assert worker.register().status == 200
    return worker


def _serve(worker: RawWorker, count: int) -> None:
    """Completes `count` tasks; the python worker's last one (compose) is
    followed by decorate, served by a typescript worker of its own."""
    for _ in range(count):
        task = worker.task()
        name = task["input"].get("name", "x")
        worker.complete(task["token"], {"message": f"Hello, {name}!"})
    decorator = _worker(worker.http, worker.worker_id + "-ts", "typescript")
    task = decorator.task()
    decorator.complete(task["token"], {"message": task["input"]["message"] + "!!!"})


def _start(http: Http, execution_id: str) -> None:
    reply = http.post(
        "/v1/executions",
        {"workflow": "Hello", "execution_id": execution_id, "input": {"name": "Ada"}},
    )
    assert reply.status == 201, reply


def test_the_interface_pause_then_resume_runs_to_completion(
    server: ServerProcess, orbit: Orbit
) -> None:
    http = server.http()
    _start(http, "p-1")
    paused = orbit.ok("pause", "p-1", "--reason", "checking the ledger")
    assert paused.stdout == "execution p-1 paused; it is RUNNING\n"
    doc = http.get("/v1/executions/p-1").body
    assert doc["status"] == "RUNNING"
    assert doc["paused"] is True and doc["pause_reason"] == "checking the ledger"
    worker = _worker(http, "w-interface")
    reply = worker.poll(wait_ms=300)
    assert reply.status == 204, reply  # no task while paused
    status = orbit.ok("status", "p-1").stdout
    assert "  paused: " in status and "(checking the ledger)" in status
    listed = orbit.ok("ps", "--workflow", "Hello").stdout.splitlines()
    assert listed[0].endswith(" PAUSED")
    assert any(line.startswith("p-1 ") and "yes (checking the ledger)" in line for line in listed)
    assert orbit.ok("resume", "p-1").stdout == "execution p-1 resumed; it is RUNNING\n"
    _serve(worker, 1)
    final = http.get("/v1/executions/p-1/wait?timeout_ms=10000").body
    assert final["status"] == "COMPLETED" and "paused" not in final
    logs = orbit.ok("logs", "p-1").stdout
    assert "WorkflowPaused" in logs and "WorkflowResumed" in logs
    assert orbit.ok("replay", "p-1").exit_code == 0


def test_errors_are_coded(server: ServerProcess, orbit: Orbit) -> None:
    http = server.http()
    _start(http, "p-err")
    not_paused = orbit("resume", "p-err")
    assert not_paused.exit_code == 1
    assert not_paused.stderr == "error: NOT_PAUSED (409): execution `p-err` is not paused\n"
    orbit.ok("pause", "p-err")
    twice = http.post("/v1/executions/p-err/pause", {})
    assert twice.status == 409 and twice.body["error"]["code"] == "ALREADY_PAUSED"
    orbit.ok("cancel", "p-err")
    finished = http.post("/v1/executions/p-err/pause", {})
    assert finished.status == 409 and finished.body["error"]["code"] == "EXECUTION_FINISHED"
    assert http.post("/v1/executions/nope/pause", {}).status == 404


def test_a_result_arriving_while_paused_is_recorded(server: ServerProcess, orbit: Orbit) -> None:
    http = server.http()
    _start(http, "p-run")
    worker = _worker(http, "w-result")
    task = worker.task()
    orbit.ok("pause", "p-run")
    assert worker.complete(task["token"], {"message": "Hello, Ada!"}).status == 200
    doc = http.get("/v1/executions/p-run").body
    assert doc["units"]["compose"]["status"] == "SUCCEEDED"
    assert "decorate" not in doc["units"]
    assert worker.poll(wait_ms=200).status == 204
    orbit.ok("resume", "p-run")
    _serve(worker, 0)
    assert http.get("/v1/executions/p-run/wait?timeout_ms=10000").body["status"] == "COMPLETED"


def test_signals_wait_and_cancel_works_while_paused(
    server: ServerProcess, orbit: Orbit, tmp_path: Path
) -> None:
    source = tmp_path / "waiter.orbit"
    source.write_text(WAITER, encoding="utf-8")
    orbit.ok("deploy", str(source))
    http = server.http()
    for eid in ("sig-1", "sig-2"):
        assert http.post("/v1/executions", {"workflow": "Waiter", "execution_id": eid}).status
        orbit.ok("pause", eid)
    orbit.ok("signal", "sig-1", "go", "--data", json.dumps({"ok": True}))
    doc = http.get("/v1/executions/sig-1").body
    assert doc["units"]["wait"]["status"] == "WAITING" and doc["signals"]
    orbit.ok("resume", "sig-1")
    assert http.get("/v1/executions/sig-1/wait?timeout_ms=10000").body["status"] == "COMPLETED"
    cancelled = orbit.ok("cancel", "sig-2")
    assert cancelled.stdout == "cancellation requested; execution is CANCELLED\n"


def test_untouched_listing_prints_as_the_book(server: ServerProcess, orbit: Orbit) -> None:
    listed = orbit.ok("ps", "--workflow", "NoSuchWorkflow").stdout
    assert listed == (
        "EXECUTION                              WORKFLOW                 VERSION    "
        "STATUS        AGE\n"
    )


def _restart_keeps_the_pause(db: str) -> None:
    proc = ServerProcess(db).start()
    try:
        orbit = Orbit(f"http://{proc.addr}")
        orbit.ok("deploy", str(HELLO))
        _start(proc.http(), "r-1")
        orbit.ok("pause", "r-1", "--reason", "held over a restart")
    finally:
        proc.stop(signal.SIGKILL)
    proc = ServerProcess(db).start()
    try:
        orbit = Orbit(f"http://{proc.addr}")
        http = proc.http()
        doc = http.get("/v1/executions/r-1").body
        assert doc["paused"] is True and doc["pause_reason"] == "held over a restart"
        worker = _worker(http, "w-restart")
        assert worker.poll(wait_ms=300).status == 204
        orbit.ok("resume", "r-1")
        _serve(worker, 1)
        done = http.get("/v1/executions/r-1/wait?timeout_ms=10000").body
        assert done["status"] == "COMPLETED"
    finally:
        proc.stop()


def test_a_pause_survives_a_restart_on_sqlite(tmp_path: Path) -> None:
    _restart_keeps_the_pause(str(tmp_path / "orbit.db"))


def test_a_pause_survives_a_restart_on_postgres(pg_url: str) -> None:
    _restart_keeps_the_pause(pg_url)


def test_pause_metrics_count(server: ServerProcess, orbit: Orbit) -> None:
    http = server.http()

    def count(family: str) -> float:
        for line in http.get("/v1/metrics").text.splitlines():
            if line.startswith(family + " "):
                return float(line.split()[1])
        return 0.0

    before = count("orbit_executions_resumed_total")
    _start(http, "p-metric")
    orbit.ok("pause", "p-metric")
    orbit.ok("resume", "p-metric")
    wait_until(lambda: count("orbit_executions_resumed_total") == before + 1, 10, "metrics", server)
    assert count("orbit_executions_paused_total") >= 1
