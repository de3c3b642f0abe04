"""Issue 39's interface on a real `orbit server` (SQLite and PostgreSQL):
`examples/flow_control.orbit` started four times for `c-1` and once for
`c-2`, with a worker that polls but does not answer, dispatches exactly
three tasks; a waiting `c-1` execution's document and `orbit status` say it
waits for a concurrency slot; completing one `c-1` task starts the next.
Then the server is killed (SIGKILL) while executions wait: after the
restart the limit still holds and no waiting start is lost."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from cli_real import Orbit
from fixtures_orbit import DEMO_TASK, demo_source
from server_harness import Http, RawWorker, ServerProcess

from orbit_core import ir
from orbit_lang.compiler import compile_paths, compile_source

pytestmark = pytest.mark.timeout(180)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flow_control.orbit"
WAITING = "waiting for a concurrency slot: customer_id `c-1` 2/2"


def deploy(api: Http) -> None:
    result = compile_paths([EXAMPLE])
    (definition,) = result.definitions
    assert api.post("/v1/workflows", ir.to_json(definition)).status == 201


def start(api: Http, execution_id: str, customer: str) -> None:
    reply = api.post(
        "/v1/executions",
        {
            "workflow": "PerCustomer",
            "input": {"customer_id": customer},
            "execution_id": execution_id,
        },
    )
    assert reply.status in (200, 201), reply


def doc(api: Http, execution_id: str) -> dict[str, Any]:
    reply = api.get(f"/v1/executions/{execution_id}")
    assert reply.status == 200, reply
    return dict(reply.body)


def take_all(worker: RawWorker) -> list[dict[str, Any]]:
    """Polls until a poll comes back empty (a short wait: nothing more is due)."""
    tasks: list[dict[str, Any]] = []
    while True:
        reply = worker.poll(wait_ms=500)
        assert reply.status in (200, 204), reply
        if reply.status == 204 or not reply.body:
            return tasks
        tasks.append(dict(reply.body))


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "orbit.db")


def test_the_example_holds_two_per_customer_across_a_kill(database: str) -> None:
    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        deploy(api)
        for n, customer in enumerate(["c-1", "c-1", "c-1", "c-1", "c-2"], 1):
            start(api, f"e{n}", customer)
        worker = RawWorker(api, "silent", [("demo.work", "1.0.0")])
        assert worker.register().status == 200
        tasks = take_all(worker)
        assert sorted(t["execution_id"] for t in tasks) == ["e1", "e2", "e5"]
        state = doc(api, "e3")
        assert state["waiting"]["message"] == WAITING
        status = Orbit(f"http://{proc.addr}").ok("status", "e3")
        assert WAITING in status.stdout

        # One c-1 task completes: the next c-1 execution (e3) starts.
        first = next(t for t in tasks if t["execution_id"] == "e1")
        assert worker.complete(first["token"], {}).status == 200
        (third,) = take_all(worker)
        assert third["execution_id"] == "e3"
        assert "waiting" in doc(api, "e4")
    finally:
        proc.stop(signal.SIGKILL)

    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        assert doc(api, "e4")["waiting"]["message"] == WAITING
        worker = RawWorker(api, "after", [("demo.work", "1.0.0")])
        assert worker.register().status == 200
        # e2 and e3 still hold c-1's slots (their attempts are out, with the
        # killed server's worker): nothing new may start.
        assert take_all(worker) == []
        # e2's task, handed out before the kill, completes now: e4 starts.
        second = next(t for t in tasks if t["execution_id"] == "e2")
        assert worker.complete(second["token"], {}).status == 200
        assert doc(api, "e2")["status"] == "COMPLETED"
        (fourth,) = take_all(worker)
        assert fourth["execution_id"] == "e4"
        assert "waiting" not in doc(api, "e4")
    finally:
        proc.stop()


def test_an_idempotency_key_starts_once_across_a_restart(database: str) -> None:
    """POST /v1/executions with `idempotency_key`: 201 then 200 with the
    same execution, 409 IDEMPOTENCY_KEY_REUSED for another input, and the
    key still holds after the server is killed and started again."""

    def post(api: Http, customer: str) -> Any:
        return api.post(
            "/v1/executions",
            {
                "workflow": "PerCustomer",
                "input": {"customer_id": customer},
                "idempotency_key": "order-7",
            },
        )

    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        deploy(api)
        first = post(api, "c-1")
        assert first.status == 201, first
        again = post(api, "c-1")
        assert again.status == 200, again
        assert again.body == {"execution_id": first.body["execution_id"], "created": False}
        refused = post(api, "c-2")
        assert refused.status == 409, refused
        assert refused.body["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    finally:
        proc.stop(signal.SIGKILL)

    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        after = post(api, "c-1")
        assert after.status == 200, after
        assert after.body["execution_id"] == first.body["execution_id"]
        # `orbit run --idempotency-key` sends the key: it attaches.
        run = Orbit(f"http://{proc.addr}").ok(
            "run",
            "PerCustomer",
            "--input",
            '{"customer_id": "c-1"}',
            "--idempotency-key",
            "order-7",
            "--no-wait",
        )
        assert run.stdout.strip() == first.body["execution_id"]
        assert "attached to existing execution" in run.stderr
    finally:
        proc.stop()


STEP_SOURCE = demo_source("PerStep", step="concurrency { max: 1, key: input.customer_id }")


def test_a_step_limit_holds_one_attempt_per_customer_across_a_kill(tmp_path: Path) -> None:
    """A step's `concurrency`: one attempt of `work` out per customer; the
    waiting execution says so; completing the attempt dispatches the next;
    after a kill the attempt handed out before still holds its slot."""
    database = str(tmp_path / "orbit.db")
    result = compile_source(STEP_SOURCE, "step.orbit")
    (definition,) = result.definitions
    waiting = "waiting for a concurrency slot: customer_id `c-1` 1/1"
    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        assert api.post("/v1/workflows", ir.to_json(definition)).status == 201
        for n, customer in enumerate(["c-1", "c-1", "c-1", "c-2"], 1):
            reply = api.post(
                "/v1/executions",
                {
                    "workflow": "PerStep",
                    "input": {"customer_id": customer},
                    "execution_id": f"s{n}",
                },
            )
            assert reply.status == 201, reply
        worker = RawWorker(api, "silent", [("demo.work", "1.0.0")])
        assert worker.register().status == 200
        tasks = take_all(worker)
        assert sorted(t["execution_id"] for t in tasks) == ["s1", "s4"]
        assert doc(api, "s2")["waiting"]["message"] == waiting
        status = Orbit(f"http://{proc.addr}").ok("status", "s2")
        assert waiting in status.stdout
    finally:
        proc.stop(signal.SIGKILL)

    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        worker = RawWorker(api, "after", [("demo.work", "1.0.0")])
        assert worker.register().status == 200
        assert take_all(worker) == []
        first = next(t for t in tasks if t["execution_id"] == "s1")
        assert worker.complete(first["token"], {}).status == 200
        (second,) = take_all(worker)
        assert second["execution_id"] == "s2"
        assert doc(api, "s3")["waiting"]["message"] == waiting
    finally:
        proc.stop()


RATED = (
    DEMO_TASK
    + """
workflow Paced {
    version "1.0.0"
    input { customer_id: String }
    rate { max: 1, per: 4s, key: input.customer_id }
    step work { worker "demo.work" with { customer_id: input.customer_id } }
}

workflow Dropped {
    version "1.0.0"
    input { customer_id: String }
    rate { max: 1, per: 1h, key: input.customer_id, on_exceed: drop }
    step work { worker "demo.work" with { customer_id: input.customer_id } }
}

workflow Quiet {
    version "1.0.0"
    input { customer_id: String, n: Int }
    debounce { period: 1h, key: input.customer_id }
    step work { worker "demo.work" with { customer_id: input.customer_id } }
}
"""
)


def event_ms(api: Http, execution_id: str, kind: str) -> int:
    reply = api.get(f"/v1/executions/{execution_id}/history")
    assert reply.status == 200, reply
    (found,) = [e["timestamp_ms"] for e in reply.body["events"] if e["type"] == kind]
    return int(found)


def test_rates_and_debounce_hold_across_a_kill(database: str) -> None:
    """A start over `Paced`'s rate waits (document and `orbit status` say
    so) and starts 4 s after the first even though the server was killed
    meanwhile; `Dropped` refuses the second start with 429 RATE_LIMITED (and
    `orbit run` exits 1), also after the restart, since the bucket is
    stored; a second `Quiet` start is folded into the pending execution,
    before and after the restart."""
    result = compile_source(RATED)
    assert result.errors == 0, result.diagnostics
    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        for definition in result.definitions:
            assert api.post("/v1/workflows", ir.to_json(definition)).status == 201
        for eid in ("p1", "p2"):
            reply = api.post(
                "/v1/executions",
                {"workflow": "Paced", "input": {"customer_id": "c-1"}, "execution_id": eid},
            )
            assert reply.status == 201, reply
        paced = "waiting for a rate limit: customer_id `c-1` 1 per 4s"
        assert doc(api, "p2")["waiting"]["message"] == paced
        assert paced in Orbit(f"http://{proc.addr}").ok("status", "p2").stdout

        def drop() -> Any:
            return api.post(
                "/v1/executions", {"workflow": "Dropped", "input": {"customer_id": "c-1"}}
            )

        assert drop().status == 201
        refused = drop()
        assert refused.status == 429, refused
        assert refused.body["error"]["code"] == "RATE_LIMITED"
        assert (
            "rate limit for customer_id `c-1` (1 per 1h) is reached"
            in (refused.body["error"]["message"])
        )
        run = Orbit(f"http://{proc.addr}")(
            "run", "Dropped", "--input", '{"customer_id": "c-1"}', "--no-wait"
        )
        assert run.exit_code == 1, run.output
        assert "RATE_LIMITED" in run.stderr and "is reached" in run.stderr

        def quiet(n: int) -> Any:
            return api.post(
                "/v1/executions", {"workflow": "Quiet", "input": {"customer_id": "q", "n": n}}
            )

        first = quiet(1)
        assert first.status == 201
        pending = first.body["execution_id"]
        assert quiet(2).body == {"execution_id": pending, "created": False}
        metrics = api.get("/v1/metrics").text
        assert 'orbit_executions_rate_limited_total{outcome="delayed"} 1.0' in metrics
        assert 'orbit_executions_rate_limited_total{outcome="dropped"} 2.0' in metrics
        assert "orbit_executions_debounced_total 1.0" in metrics
    finally:
        proc.stop(signal.SIGKILL)

    proc = ServerProcess(database).start()
    try:
        api = proc.http()
        assert drop().status == 429
        assert quiet(3).body == {"execution_id": pending, "created": False}
        assert doc(api, pending)["input"] == {"customer_id": "q", "n": 3}
        # p2 starts once the bucket has its next token, 4 s after p1's start.
        for _ in range(200):
            if "waiting" not in doc(api, "p2"):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("p2 never started")
        gap = event_ms(api, "p2", "WorkflowStarted") - event_ms(api, "p1", "WorkflowStarted")
        assert gap >= 4000
    finally:
        proc.stop()
