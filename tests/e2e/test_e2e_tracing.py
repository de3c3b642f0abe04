"""One execution, a Python and a TypeScript worker (real processes), one
trace: the runtime's spans reach a real OTLP/HTTP receiver with the right
parent links and worker ids (tests/test_server_tracing.py checks the rest
of chapter 46's span contract in-process)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_processes import Stack
from server_harness import wait_until
from test_server_tracing import Receiver, sha

from orbit_core import ir
from orbit_lang import compile_source

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SOURCE = """
task "demo.work" {
    version "1.0.0"
    input { n: Int }
    output { n: Int }
}

workflow Polyglot {
    version "1.0.0"
    input { n: Int }
    step py {
        worker "demo.work"
        using python
        with { n: input.n }
    }
    step ts {
        worker "demo.work"
        using typescript
        after py
        with { n: py.n + 1 }
    }
}
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def test_a_polyglot_execution_is_one_trace(stack: Stack, receiver: Receiver) -> None:
    server = stack.server("--otlp-endpoint", receiver.url)
    result = compile_source(SOURCE, "polyglot.orbit")
    assert [d.message for d in result.diagnostics] == []
    for definition in result.definitions:
        assert server.api("POST", "/v1/workflows", ir.to_json(definition))[0] in (200, 201)
    workers = stack.workers_dir()
    stack.python_worker("py-1", workers / "delivery_worker.py", server, {"E2E_WORKER_ID": "py-1"})
    stack.typescript_worker(
        "ts-1", workers / "delivery_worker.ts", server, {"E2E_WORKER_ID": "ts-1"}
    )
    status, _ = server.api(
        "POST",
        "/v1/executions",
        {"workflow": "Polyglot", "input": {"n": 1}, "execution_id": "poly-1"},
    )
    assert status in (200, 201)
    wait_until(lambda: server.execution("poly-1")["status"] == "COMPLETED", 60, "completion")
    wait_until(
        lambda: any(s["name"] == "workflow Polyglot" for s in receiver.spans), 30, "root span"
    )
    spans = {s["name"]: s for s in receiver.spans}
    root, py, ts = spans["workflow Polyglot"], spans["step py"], spans["step ts"]
    assert {s["trace_id"] for s in receiver.spans} == {sha("orbit-trace:poly-1", 16)}
    assert root["span_id"] == sha("orbit-span:poly-1", 8)
    assert py["parent"] == ts["parent"] == root["span_id"]
    assert py["attributes"]["orbit.worker_id"] == "py-1"
    assert ts["attributes"]["orbit.worker_id"] == "ts-1"
    assert py["span_id"] == sha("orbit-span:poly-1/py#1", 8)
    assert ts["span_id"] == sha("orbit-span:poly-1/ts#1", 8)
    assert py["end"] <= ts["start"] and ts["end"] <= root["end"]
