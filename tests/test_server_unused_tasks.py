"""A worker that announces a task no deployed workflow calls (a typo, or a
stale contract version) is pointed out: a `warn` line when it registers,
`unused_contracts` in `GET /v1/workers`, and `(unused)` with a note in
`orbit workers list`, whose output stays chapter 66's when every task is
called."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import falcon.testing
import pytest
from cli_real import Orbit
from server_harness import ServerProcess

from orbit_core.engine import Engine
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import simulated_engine
from orbit_lang import compile_source
from orbit_server import logs
from orbit_server.app import create_app
from orbit_server.auth import SHARED_WORKER
from orbit_server.config import ServerConfig
from orbit_server.worker_calls import WorkerCalls

SOURCE = """
task "greeting.compose" {
    version "1.0.0"
    input { name: String }
    output { message: String }
}

workflow Hello {
    version "1.0.0"
    input { name: String }
    step compose {
        worker "greeting.compose"
        with { name: input.name }
    }
}
"""

GOOD = {"task_name": "greeting.compose", "contract_version": "1.0.0"}
TYPO = {"task_name": "greeting.compse", "contract_version": "1.0.0"}
STALE = {"task_name": "greeting.compose", "contract_version": "2.0.0"}


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = simulated_engine(MemoryStore())
    yield engine
    engine.close()


def deploy(engine: Engine) -> None:
    result = compile_source(SOURCE, "hello.orbit")
    assert [d.message for d in result.diagnostics] == []
    for definition in result.definitions:
        engine.deploy(definition)


def lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_registration_warns_about_tasks_nobody_calls(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = WorkerCalls(engine)
    logs.configure("json")
    try:
        capsys.readouterr()
        calls.register(SHARED_WORKER, "early", "python", [TYPO], None)
        before_deploy = lines(capsys.readouterr().err)
        deploy(engine)
        calls.register(SHARED_WORKER, "fine", "python", [GOOD], None)
        fine = lines(capsys.readouterr().err)
        calls.register(SHARED_WORKER, "py-1", "python", [GOOD, TYPO, STALE], None)
        warned = lines(capsys.readouterr().err)
    finally:
        logs.configure("text")
    # Before any deploy there is nothing to compare with: workers start first.
    assert [r["level"] for r in before_deploy] == ["INFO"]
    assert [r["level"] for r in fine] == ["INFO"]
    assert [r["fields"]["message"] for r in warned] == [
        "worker registered",
        "worker registered tasks no deployed workflow calls",
    ]
    assert warned[1]["level"] == "WARN"
    assert warned[1]["fields"]["worker_id"] == "py-1"
    assert warned[1]["fields"]["tasks"] == (
        "greeting.compse@1.0.0, greeting.compose@2.0.0 (workflows call 1.0.0)"
    )


def test_the_worker_list_marks_unused_contracts(engine: Engine) -> None:
    client = falcon.testing.TestClient(create_app(engine, ServerConfig()))
    engine.workers.register("py-1", "python", [("greeting.compose", "1.0.0")])
    engine.workers.register(
        "py-2", "python", [("greeting.compse", "1.0.0"), ("greeting.compose", "2.0.0")]
    )
    # No workflow deployed: nothing is marked.
    assert all(
        "unused_contracts" not in w for w in client.simulate_get("/v1/workers").json["workers"]
    )
    deploy(engine)
    workers = {w["worker_id"]: w for w in client.simulate_get("/v1/workers").json["workers"]}
    assert "unused_contracts" not in workers["py-1"]
    assert workers["py-2"]["unused_contracts"] == [
        {"task_name": "greeting.compse", "contract_version": "1.0.0"},
        {
            "task_name": "greeting.compose",
            "contract_version": "2.0.0",
            "deployed_versions": ["1.0.0"],
        },
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("unused") / "orbit.db") as proc:
        yield proc


def test_orbit_workers_list_marks_and_notes_them(server: ServerProcess, tmp_path: Any) -> None:
    orbit = Orbit(f"http://{server.addr}")
    source = tmp_path / "hello.orbit"
    source.write_text(SOURCE, encoding="utf-8")
    orbit.ok("deploy", str(source))
    http = server.http("")
    for worker_id, contracts in (("py-1", [GOOD]), ("py-2", [TYPO, GOOD])):
        body = {"worker_id": worker_id, "runtime": "python", "contracts": contracts}
        assert http.post("/v1/workers/register", body).status == 200
    result = orbit.ok("workers", "list")
    assert result.stdout == (
        "WORKER                       RUNTIME      STATE    INFLIGHT  TASKS\n"
        "py-1                         python       online   0  greeting.compose@1.0.0\n"
        "py-2                         python       online   0  "
        "greeting.compse@1.0.0 (unused), greeting.compose@1.0.0\n"
    )
    assert result.stderr == "note: no deployed workflow calls greeting.compse@1.0.0 (worker py-2)\n"
