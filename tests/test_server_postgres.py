"""`orbit server --db postgres://...` as a process, on real PostgreSQL
servers: refusals of bad URLs and credentials, passwords kept out of the log,
a run through restart and recovery, and a database that disappears while the
server runs and comes back."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

import pgkit
import pytest
import server_ir
from server_harness import RawWorker, ServerProcess, run_orbit, wait_until

pytestmark = pytest.mark.postgres


def _assert_no_password(text: str) -> None:
    for secret in (pgkit.PASSWORD, "secret"):
        assert secret not in text
    assert "p%40ss" not in text  # nor its encoded form


@pytest.mark.parametrize(
    ("make_url", "detail"),
    [
        (
            lambda s: pgkit.url("127.0.0.1", s.port, "postgres", password="secret"),
            'password authentication failed for user "orbit"',
        ),
        (
            lambda s: pgkit.url("127.0.0.1", pgkit.free_port(), "orbit", password="secret"),
            "Connection refused",
        ),
        (lambda s: s.url("postgres", nonsense="1"), 'invalid URI query parameter: "nonsense"'),
        (lambda s: s.url("postgres", sslmode="allow"), "sslmode=allow is not supported"),
        (lambda s: s.url("no_such_database"), 'database "no_such_database" does not exist'),
    ],
    ids=["wrong-password", "refused", "bad-parameter", "bad-sslmode", "no-database"],
)
def test_a_database_the_server_cannot_use_stops_it_with_one_line(
    pg_server: pgkit.Cluster, make_url: Callable[[pgkit.Cluster], str], detail: str
) -> None:
    url = make_url(pg_server)
    result = run_orbit("server", "--db", url, "--addr", "127.0.0.1:0")
    assert result.returncode == 1, result.stderr
    _assert_no_password(result.stderr)
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    redacted = re.escape(url.split("@", 1)[1])
    assert re.search(
        rf'ERROR orbit: cannot open the database db=postgres://orbit:\*\*\*@{redacted} error=".*'
        + re.escape(detail.replace('"', '\\"')),  # quoted inside the field
        errors[0],
    ), errors[0]


def _run_to_completion(proc: ServerProcess, ids: list[str]) -> None:
    """A worker runs every task until the executions `ids` have completed."""
    api = proc.http()
    worker = RawWorker(api, "w-1", [("bench.step", "1.0.0")])
    assert worker.register().status == 200

    def done() -> bool:
        reply = worker.poll(wait_ms=200)
        if reply.status == 200:
            task = reply.body
            assert worker.complete(task["token"], {"i": task["input"]["i"] + 1}).status == 200
            return False
        return all(api.get(f"/v1/executions/{eid}").body["status"] == "COMPLETED" for eid in ids)

    wait_until(done, 30, f"{ids} to complete")


def test_a_server_on_postgres_runs_restarts_and_recovers(pg_url: str) -> None:
    proc = ServerProcess(pg_url, "--session-timeout", "1").start()
    try:
        log = proc.log()
        assert re.search(
            r"INFO orbit: starting ORBIT runtime db=postgres://orbit:\*\*\*@127\.0\.0\.1:\d+/\S+ "
            r'backend="postgres"',
            log,
        ), log
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.chain(2)).status == 201
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "p-1"}).status
        _run_to_completion(proc, ["p-1"])
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "p-2"}).status
        held = RawWorker(api, "w-2", [("bench.step", "1.0.0")])
        assert held.register().status == 200
        token = held.task()["token"]
        # A crash: memory is lost, PostgreSQL keeps what was committed.
        assert proc.stop(signal.SIGKILL) == -signal.SIGKILL
        proc.start()
        assert "recovered active executions from history executions=1 in_flight=1" in proc.log()
        api = proc.http()
        late = RawWorker(api, "w-2", [("bench.step", "1.0.0")])
        assert late.complete(token, {"i": 1}).status == 200  # the old token is honoured
        _run_to_completion(proc, ["p-2"])
        for eid in ("p-1", "p-2"):
            events = api.get(f"/v1/executions/{eid}/history").body["events"]
            assert [e["step"] for e in events if e["type"] == "StepSucceeded"] == ["s0", "s1"]
    finally:
        proc.stop()
    _assert_no_password(proc.log())


def test_a_database_that_disappears_and_returns(pg_cluster: pgkit.Cluster) -> None:
    url = pg_cluster.url(pg_cluster.create_database())
    proc = ServerProcess(url).start()
    try:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.chain(1)).status == 201
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "d-1"}).status
        pg_cluster.stop()
        down = api.post("/v1/executions", {"workflow": "Chain", "execution_id": "d-2"})
        assert down.status >= 500, down
        assert down.body["error"]["code"] == "STORAGE_ERROR"
        message = down.body["error"]["message"]
        assert message.startswith("cannot connect to PostgreSQL at postgres://orbit:***@"), message
        unnamed = api.post("/v1/executions", {"workflow": "Chain"})  # straight to a commit
        assert unnamed.body["error"]["code"] == "STORAGE_ERROR", unnamed
        assert api.get("/v1/ready").status == 503
        pg_cluster.start()
        wait_until(lambda: api.get("/v1/ready").status == 200, 15, "/v1/ready to answer 200")
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "d-2"}).status
        _run_to_completion(proc, ["d-1", "d-2"])  # nothing committed was lost
        assert api.get("/v1/executions/d-1").body["status"] == "COMPLETED"
    finally:
        proc.stop()
    log = proc.log()
    assert re.search(r"ERROR orbit: storage error op=commit db=postgres://orbit:\*\*\*@", log), log
    assert re.search(r"WARN orbit: reconnected to PostgreSQL db=postgres://orbit:\*\*\*@", log), log
    _assert_no_password(log)
