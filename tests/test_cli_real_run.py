"""`orbit run` against a real `orbit server`, where a first day goes wrong:
following an execution again after a newer version was deployed, and an
input with several mistakes, which is checked before anything is deployed
and reported whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_real import Orbit
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(120)

WAITER = """\
workflow Waiter {{
    version "{version}"
    input {{ order_id: String, amount: Float, currency: String = "USD" }}
    signal go {{ ok: Bool }}
    step wait {{ await go timeout 1d }}
    return {{ ok: wait.ok }}
}}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("run") / "orbit.db") as proc:
        yield proc


@pytest.fixture
def orbit(server: ServerProcess) -> Orbit:
    return Orbit(f"http://{server.addr}")


def waiter(directory: Path, version: str) -> str:
    path = directory / f"waiter-{version}.orbit"
    path.write_text(WAITER.format(version=version), encoding="utf-8")
    return str(path)


GOOD = json.dumps({"order_id": "A-1", "amount": 12.5})


def test_following_again_after_a_newer_version_is_deployed(orbit: Orbit, tmp_path: Path) -> None:
    orbit.ok("run", waiter(tmp_path, "1.0.0"), "--id", "r-1", "-i", GOOD, "--no-wait")
    orbit.ok("deploy", waiter(tmp_path, "2.0.0"))
    # By name, the id's own version is followed, not the highest registered.
    again = orbit.ok("run", "Waiter", "--id", "r-1", "--no-wait")
    assert again.stderr == "attached to existing execution r-1\n"
    assert again.stdout == "r-1\n"
    # Naming another version is refused, with the way to follow it.
    refused = orbit("run", "Waiter", "--version", "2.0.0", "--id", "r-1", "--no-wait")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "error: EXECUTION_EXISTS (409): execution `r-1` already exists for Waiter@1.0.0, "
        "a different version\n"
        "  hint: it runs Waiter@1.0.0; follow it with `orbit run Waiter --id r-1` "
        "(or add --version 1.0.0)\n"
    )


def test_every_input_problem_is_reported_before_deploying(
    orbit: Orbit, server: ServerProcess, tmp_path: Path
) -> None:
    source = waiter(tmp_path, "3.0.0")
    bad = json.dumps({"order_id": "A-1", "amount": "12", "currancy": "EUR"})
    result = orbit("run", source, "--input", bad)
    assert result.exit_code == 1
    assert result.stdout == ""
    # The first line is the runtime's own answer (chapter 11); the others follow it.
    assert result.stderr == (
        "error: INVALID_INPUT (400): workflow input is invalid at $.amount: "
        "expected Float, found a string\n"
        "  and at $.currancy: unknown field `currancy`\n"
    )
    # Nothing was deployed.
    assert server.http("").get("/v1/workflows/Waiter/3.0.0").status == 404


def test_every_input_problem_by_workflow_name(orbit: Orbit, tmp_path: Path) -> None:
    orbit.ok("deploy", waiter(tmp_path, "4.0.0"))
    result = orbit("run", "Waiter", "--version", "4.0.0", "--input", '{"amount": true}')
    assert result.exit_code == 1
    assert result.stderr == (
        "error: INVALID_INPUT (400): workflow input is invalid at $.amount: "
        "expected Float, found a boolean\n"
        "  and at $.order_id: missing required field `order_id` of type String\n"
    )
