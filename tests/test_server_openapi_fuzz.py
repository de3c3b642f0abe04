"""schemathesis against a live `orbit server`: for every operation of the
OpenAPI document, a bounded number of generated requests, each of which must
get no 5xx and a response the document allows (status, content type, body
schema, headers), with and without the admin credential where it matters.

The server has three workflows registered and an execution of each, and the
document given to schemathesis names them as examples of the path
parameters, so generated requests reach real executions, signals and
queries as well as unknown ones. Run by `nox -s api`; the other sessions do
not install schemathesis and skip this module.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import server_ir
from server_harness import ServerProcess

from orbit_server import openapi

ADMIN = "admin-token-for-the-fuzz-run"
# Enough to find shape and status mistakes in every operation, small enough
# for CI (about 30 operations); raise it locally with ORBIT_FUZZ_EXAMPLES.
EXAMPLES = os.environ.get("ORBIT_FUZZ_EXAMPLES", "20")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# What every response must satisfy. Left out: negative_data_rejection (the
# server accepts and caps a long wait_ms or timeout_ms rather than refusing
# it) and positive_data_acceptance (most generated ids name nothing: 404).
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "unsupported_method",
    "ignored_auth",
]
KNOWN = {
    "execution_id": ["greet-1", "review-1", "count-1"],
    "name": ["Greet", "Review", "decision", "status", "broken"],
    "version": ["1.0.0"],
    "schedule_id": ["greet-hourly"],
    "asset": ["app.js", "app.css"],
}

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis is installed by nox -s api"),
]


def _with_examples(document: dict[str, Any]) -> dict[str, Any]:
    """The document with known ids as examples, and long polls kept short:
    schemathesis reuses ids from earlier responses (a worker session from
    register), so a poll or wait it sends can be a real one, which without
    a short wait lasts its default 20 or 30 seconds."""
    fuzzed = copy.deepcopy(document)
    poll = fuzzed["components"]["schemas"]["Poll"]
    poll["required"].append("wait_ms")
    poll["properties"]["wait_ms"]["maximum"] = 100
    for item in fuzzed["paths"].values():
        for operation in item.values():
            for param in operation.get("parameters", []):
                if param["name"] == "timeout_ms":
                    param["required"] = True
                    param["schema"]["maximum"] = 100
                if param["in"] == "path":
                    param["examples"] = {value: {"value": value} for value in KNOWN[param["name"]]}
    return fuzzed


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("openapi") / "orbit.db"
    # --retention (long enough to sweep nothing) serves the archive routes too.
    archive = str(db.parent / "archive")
    with ServerProcess(db, "--token", ADMIN, "--retention", "3650d", "--archive", archive) as proc:
        api = proc.http(ADMIN)
        for document in (server_ir.greet(), server_ir.review(), server_ir.countdown()):
            assert api.post("/v1/workflows", document).status == 201
        for workflow, execution_id, payload in [
            ("Greet", "greet-1", {"name": "Ada"}),
            ("Review", "review-1", {"order_id": "o-1"}),
            ("Countdown", "count-1", {"n": 2}),
        ]:
            body = {"workflow": workflow, "execution_id": execution_id, "input": payload}
            assert api.post("/v1/executions", body).status == 201
        schedule: dict[str, Any] = {
            "schedule_id": "greet-hourly",
            "workflow": "Greet",
            "cron": "@hourly",
        }
        schedule["input"] = {"name": "Ada"}
        assert api.post("/v1/schedules", schedule).status == 201, "schedule"
        yield proc


def test_live_server_matches_the_document(server: ServerProcess, tmp_path: Path) -> None:
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(_with_examples(openapi.document())))
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            str(document),
            "--url",
            f"http://{server.addr}",
            "--header",
            f"Authorization: Bearer {ADMIN}",
            "--checks",
            ",".join(CHECKS),
            "--max-examples",
            EXAMPLES,
            "--phases",
            "examples,coverage,fuzzing",
            "--workers",
            "1",
            "--seed",
            "1",
            "--generation-database",
            "none",
            "--request-timeout",
            "10",
            "--no-color",
            "--suppress-health-check",
            "all",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    print(run.stdout[-3000:])
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]
