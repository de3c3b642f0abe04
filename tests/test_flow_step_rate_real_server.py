"""A step's `rate` on a real `orbit server` (SQLite and PostgreSQL): the
second attempt of a key waits (its document and `orbit status` say so),
and after the server is killed (SIGKILL) it is still not handed out before
the bucket earns its next token: the bucket was stored with the first
dispatch, so the restart refilled nothing."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from cli_real import Orbit
from server_harness import Http, RawWorker, ServerProcess
from test_flow_real_server import doc, event_ms, take_all

from orbit_core import ir
from orbit_lang.compiler import compile_source

pytestmark = pytest.mark.timeout(180)

PERIOD_MS = 8_000
SOURCE = """
task "demo.work" {
    version "1.0.0"
    input { customer_id: String }
    output {}
}

workflow Throttled {
    version "1.0.0"
    input { customer_id: String }

    step work {
        worker "demo.work"
        with { customer_id: input.customer_id }
        rate { max: 1, per: 8s, key: input.customer_id }
    }
}
"""
WAITING = "waiting for a rate limit: customer_id `c-1` 1 per 8s"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "orbit.db")


def start(api: Http, execution_id: str, customer: str) -> None:
    reply = api.post(
        "/v1/executions",
        {"workflow": "Throttled", "input": {"customer_id": customer}, "execution_id": execution_id},
    )
    assert reply.status == 201, reply


def test_a_step_rate_holds_across_a_kill(database: str) -> None:
    result = compile_source(SOURCE)
    assert result.errors == 0, result.diagnostics
    (definition,) = result.definitions
    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        assert api.post("/v1/workflows", ir.to_json(definition)).status == 201
        for eid, customer in (("s1", "c-1"), ("s2", "c-1"), ("s3", "c-2")):
            start(api, eid, customer)
        worker = RawWorker(api, "silent", [("demo.work", "1.0.0")])
        assert worker.register().status == 200
        tasks = take_all(worker)
        assert sorted(t["execution_id"] for t in tasks) == ["s1", "s3"]
        held = doc(api, "s2")["waiting"]
        assert (held["reason"], held["step"], held["message"]) == ("rate", "work", WAITING)
        assert WAITING in Orbit(f"http://{proc.addr}").ok("status", "s2").stdout
    finally:
        proc.stop(signal.SIGKILL)

    killed_at = time.monotonic()
    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        worker = RawWorker(api, "after", [("demo.work", "1.0.0")])
        assert worker.register().status == 200
        if time.monotonic() - killed_at < PERIOD_MS / 1000 - 2:
            # Well within the period: a refilled bucket would hand s2 out now.
            assert take_all(worker) == []
            assert doc(api, "s2")["waiting"]["message"] == WAITING
        deadline = time.monotonic() + 30
        found: list[str] = []
        while not found and time.monotonic() < deadline:
            found = [t["execution_id"] for t in take_all(worker)]
        assert found == ["s2"]
        gap = event_ms(api, "s2", "StepDispatched") - event_ms(api, "s1", "StepDispatched")
        assert gap >= PERIOD_MS
    finally:
        proc.stop()
