"""`orbit server` as a process: the refusals of chapter 39, its log lines,
environment variables and a graceful stop."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import server_ir
from server_harness import Http, RawWorker, ServerProcess, run_orbit, wait_until


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--addr", "0.0.0.0:7233"],
            {},
            "refusing to listen on 0.0.0.0:7233 without authentication; "
            "pass --token (or ORBIT_TOKEN), or --insecure for trusted networks",
        ),
        (
            ["--addr", "0.0.0.0:7233"],
            {"ORBIT_TOKEN": ""},
            "refusing to listen on 0.0.0.0:7233 without authentication",
        ),
        (
            ["--worker-token", "w"],
            {},
            "--worker-token requires --token: without an admin token every endpoint would be open",
        ),
        (
            ["--token", "same", "--worker-token", "same"],
            {},
            "--worker-token must differ from --token",
        ),
        (
            ["--workers-file", "workers.toml"],
            {},
            "--workers-file requires --token: without an admin token administrative endpoints "
            "would be open",
        ),
        (
            ["--cluster"],
            {},
            "--cluster requires a PostgreSQL database (--db postgres://...): "
            "the servers share it for leader election and history",
        ),
        (["--cluster-mode", "shared"], {}, "--cluster-mode shared requires --cluster"),
        (
            ["--grpc-addr", "0.0.0.0:7234"],
            {},
            "refusing to serve gRPC on 0.0.0.0:7234 without authentication; "
            "pass --token (or ORBIT_TOKEN), or --insecure for trusted networks",
        ),
        (
            ["--cluster", "--cluster-mode", "shared", "--db", "orbit.db"],
            {},
            "--cluster requires a PostgreSQL database (--db postgres://...): "
            "the servers share it for leader election and history",
        ),
        (
            ["--cluster-mode", "shared", "--db", "postgres://u:p@h/db"],
            {},
            "--cluster-mode shared requires --cluster",
        ),
        (["--node-id", "a"], {}, "--node-id requires --cluster"),
        (
            ["--advertise-addr", "http://10.0.0.1:7233"],
            {},
            "--advertise-addr requires --cluster",
        ),
        (
            ["--cluster", "--db", "postgres://u:p@h/db", "--node-id", "a b"],
            {},
            "--node-id `a b` must be 1 to 63 letters, digits, '.', '_' or '-'",
        ),
    ],
)
def test_refused_configurations_exit_1(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    result = run_orbit("server", "--db", str(tmp_path / "x.db"), *args, env=env)
    assert result.returncode == 1
    assert f"error: {message}" in result.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "server.pem"], "--tls-cert requires --tls-key"),
        (["--tls-key", "server.key"], "--tls-key requires --tls-cert"),
        (["--tls-client-ca", "ca.pem"], "--tls-client-ca requires --tls-cert and --tls-key"),
    ],
)
def test_a_tls_flag_without_its_partner_is_invalid_usage(
    tmp_path: Path, args: list[str], message: str
) -> None:
    # Chapter 66: a flag that requires another is invalid usage, exit 2.
    result = run_orbit("server", "--db", str(tmp_path / "x.db"), *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {message}")
    assert not (tmp_path / "x.db").exists()


def test_addresses_must_be_ip_and_port(tmp_path: Path) -> None:
    result = run_orbit("server", "--db", str(tmp_path / "x.db"), "--addr", "localhost:7233")
    assert result.returncode == 2
    assert "is not an IP address" in result.stderr
    # A newcomer who wrote `localhost` meant this machine, not every interface.
    assert "use 127.0.0.1:7233 to listen on this machine only" in result.stderr


def test_address_errors_suggest_the_loopback_for_localhost() -> None:
    from orbit_server.config import Address

    with pytest.raises(ValueError) as local:
        Address.parse("localhost:8080")
    assert str(local.value) == (
        "`localhost:8080` is not an ip:port address: `localhost` is not an IP address "
        "(use 127.0.0.1:8080 to listen on this machine only, or 0.0.0.0:8080 for all interfaces)"
    )
    with pytest.raises(ValueError) as named:
        Address.parse("orbit.example:7233")
    assert "(use 0.0.0.0:7233 or [::]:7233 for all interfaces)" in str(named.value)


def test_a_busy_port_is_reported(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_orbit("server", "--db", str(tmp_path / "x.db"), "--addr", f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr


def test_an_unopenable_database_is_reported(tmp_path: Path) -> None:
    result = run_orbit(
        "server", "--db", str(tmp_path / "missing" / "x.db"), "--addr", "127.0.0.1:0"
    )
    assert result.returncode == 1
    assert "cannot open the database" in result.stderr


def test_startup_lines_and_a_graceful_sigint(tmp_path: Path) -> None:
    proc = ServerProcess(tmp_path / "orbit.db", "--no-ui").start()
    log = proc.log()
    assert (
        f'INFO orbit: starting ORBIT runtime db={tmp_path / "orbit.db"} backend="sqlite" '
        "http_adapter=false auth=false ui=false"
    ) in log
    assert "INFO orbit: recovered active executions from history executions=0 in_flight=0" in log
    assert f"INFO orbit: ORBIT runtime listening addr={proc.addr} tls=false ui=false" in log
    assert proc.http().get("/ui/").status == 404
    assert proc.http().get("/", headers={"accept": "text/html"}).status == 404
    assert proc.stop(signal.SIGINT) == 0
    assert proc.lines[-1].endswith("INFO orbit: shutting down")


def test_json_logs_and_environment(tmp_path: Path) -> None:
    env = {"ORBIT_TOKEN": "t0k", "ORBIT_MAX_ACTIVE_EXECUTIONS": "1", "ORBIT_NO_UI": "yes"}
    with ServerProcess(tmp_path / "orbit.db", "--log-format", "json", env=env) as proc:
        first = json.loads(proc.lines[0])
        assert first["level"] == "INFO"
        assert first["target"] == "orbit"
        assert first["fields"] == {
            "message": "starting ORBIT runtime",
            "db": str(tmp_path / "orbit.db"),
            "backend": "sqlite",
            "http_adapter": False,
            "auth": True,
            "ui": False,
        }
        assert first["timestamp"].endswith("Z")
        assert proc.http().get("/v1/executions").status == 401
        api = proc.http("t0k")
        assert api.post("/v1/workflows", server_ir.review()).status == 201
        for eid, status in (("r1", 201), ("r2", 429)):
            body = {"workflow": "Review", "execution_id": eid, "input": {"order_id": eid}}
            assert api.post("/v1/executions", body).status == status


def test_shutdown_ends_long_polls_and_waits_at_once(tmp_path: Path) -> None:
    """Ctrl-C does not wait out a worker's 60 s poll or a client's 300 s wait
    (issue 24; the book only bounds the wait): both are answered at once, the
    poll with 204 and the wait with the state as it is, and the server exits."""
    proc = ServerProcess(tmp_path / "orbit.db").start()
    api = proc.http()
    assert api.post("/v1/workflows", server_ir.review()).status == 201
    body = {"workflow": "Review", "execution_id": "r1", "input": {"order_id": "1"}}
    assert api.post("/v1/executions", body).status == 201
    worker = RawWorker(proc.http(), "w", [("a.b", "1.0.0")])
    worker.register()
    waiter = proc.http()
    answers: dict[str, Any] = {}
    threads = [
        threading.Thread(target=lambda: answers.update(poll=worker.poll(wait_ms=60_000).status)),
        threading.Thread(
            target=lambda: answers.update(
                wait=waiter.get("/v1/executions/r1/wait?timeout_ms=300000")
            )
        ),
    ]
    for thread in threads:
        thread.start()
    # Give both time to park (if they have not, they must not park later).
    time.sleep(0.3)
    began = time.monotonic()
    assert proc.stop(signal.SIGINT) == 0
    took = time.monotonic() - began
    for thread in threads:
        thread.join(10)
    assert answers["poll"] == 204
    assert answers["wait"].status == 200 and answers["wait"].body["status"] == "RUNNING"
    # Far below the poll's 60 s; the figure itself is scripts/measure-shutdown's.
    assert took < 15, took
    assert proc.lines[-1].endswith("INFO orbit: shutting down")


def test_an_idle_server_stops_without_waiting_out_a_grace_period(tmp_path: Path) -> None:
    """Not gunicorn's 30 s graceful timeout: the bound leaves room for a
    loaded machine; scripts/measure-shutdown measures the real figure."""
    proc = ServerProcess(tmp_path / "orbit.db").start()
    assert proc.http().get("/v1/health").status == 200
    began = time.monotonic()
    assert proc.stop(signal.SIGINT) == 0
    assert time.monotonic() - began < 10


def _exit_time_after_sigint(proc: ServerProcess) -> tuple[int, float]:
    """SIGINT, then the exit status and the seconds the process took to exit."""
    assert proc.proc is not None
    began = time.monotonic()
    proc.proc.send_signal(signal.SIGINT)
    try:
        code = proc.proc.wait(10)
    except Exception:
        proc.stop(signal.SIGKILL)
        raise
    took = time.monotonic() - began
    proc.stop()
    return code, took


def test_a_departed_workers_open_poll_does_not_hold_the_shutdown(tmp_path: Path) -> None:
    """Issue 36: a worker that unregistered while its long poll was parked
    (an SDK stopping with a poll open) left the poll waiting out its
    wait_ms, unseen by the drain; Ctrl-C then took until it ended. The
    poll ends when its session does, and the server stops within 2 s."""
    proc = ServerProcess(tmp_path / "orbit.db").start()
    admin = Http(proc.addr)
    worker = RawWorker(Http(proc.addr), "w", [("a.b", "1.0.0")])
    assert worker.register().status == 200
    registered = admin.get("/v1/workers").body["workers"][0]["last_seen_ms"]
    answers: list[int] = []
    poller = threading.Thread(target=lambda: answers.append(worker.poll(wait_ms=60_000).status))
    poller.start()
    # A parked poll keeps its session seen: the engine's tick moves last_seen.
    wait_until(
        lambda: admin.get("/v1/workers").body["workers"][0]["last_seen_ms"] > registered + 100,
        10,
        "the poll to park",
        proc,
    )
    other = RawWorker(admin, "w", [])
    other.session = worker.session
    assert other.unregister().status == 200
    # The session's end answers its poll (within a tick or two).
    poller.join(2)
    admin.close()
    code, took = _exit_time_after_sigint(proc)
    poller.join(10)
    worker.http.close()
    assert code == 0
    assert answers == [204]
    assert took < 2.0, took


def test_idle_keep_alive_connections_do_not_hold_the_shutdown(tmp_path: Path) -> None:
    """Issue 36: kept-alive connections with no request in flight, and one
    never used, are closed at once on Ctrl-C (gunicorn gave each 2 s, one
    after another, and a new connection 5 s to send its request)."""
    proc = ServerProcess(tmp_path / "orbit.db").start()
    host, port = proc.addr.rsplit(":", 1)
    clients = [http.client.HTTPConnection(host, int(port), timeout=10) for _ in range(5)]
    unused = socket.create_connection((host, int(port)), timeout=10)
    try:
        for client in clients:
            client.request("GET", "/v1/health")
            reply = client.getresponse()
            reply.read()
            assert reply.status == 200
        code, took = _exit_time_after_sigint(proc)
        assert code == 0
        assert took < 2.0, took
        for client in clients:
            assert client.sock is not None and client.sock.recv(1) == b""
        assert unused.recv(1) == b""
    finally:
        for client in clients:
            client.close()
        unused.close()
