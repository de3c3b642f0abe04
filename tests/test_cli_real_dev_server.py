"""`orbit server --dev` (issue 24 point 10), a real server process with the
real CLI: `orbit deploy` and `orbit run` replace a changed definition of the
same version and say so, an unfinished execution keeps its definition
(DEFINITION_CONFLICT naming it), the replacement survives a restart, and a
server without --dev keeps the book's conflict."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_real import Orbit, one_error_line
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(120)

SOURCE = """\
workflow Dev {
    version "1.0.0"
    input {}
    output { n: Int }
    signal go { n: Int }
    step wait { await go timeout %s }
    return { n: wait.n }
}
"""


def write(path: Path, timeout: str) -> str:
    path.write_text(SOURCE % timeout, encoding="utf-8")
    return str(path)


def test_a_dev_server_replaces_a_version_nobody_runs(tmp_path: Path) -> None:
    source = tmp_path / "dev.orbit"
    with ServerProcess(tmp_path / "orbit.db", "--dev") as server:
        assert any("development server" in line for line in server.lines), server.log()
        orbit = Orbit(f"http://{server.addr}")
        first = orbit.ok("deploy", write(source, "1d"))
        assert first.stderr.startswith("deployed Dev@1.0.0")

        replaced = orbit.ok("deploy", write(source, "2d"))
        assert replaced.stderr.startswith("replaced Dev@1.0.0 (sha256:")
        assert "no unfinished execution used" in replaced.stderr
        # The server's log is read by another thread: wait for the line.
        deadline = time.monotonic() + 10
        while not any("replaced workflow definition" in line for line in server.lines):
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.02)
        assert orbit.ok("deploy", str(source)).stderr.startswith("up to date Dev@1.0.0")

        started = orbit.ok("run", str(source), "--no-wait")
        execution = started.stdout.strip()
        conflict = one_error_line(orbit("deploy", write(source, "3d")))
        assert conflict == (
            "error: DEFINITION_CONFLICT (409): Dev@1.0.0 cannot be replaced: 1 unfinished "
            f"execution(s) use it ({execution}); let them finish or cancel them, or bump the version"
        )

        orbit.ok("signal", execution, "go", "--data", '{"n": 7}')
        assert orbit.ok("status", execution).stdout.startswith("COMPLETED")
        rerun = orbit.ok("run", str(source), "--no-wait")
        assert rerun.stderr.startswith("replaced Dev@1.0.0 (sha256:")
        latest = server.http().get("/v1/workflows/Dev/1.0.0").body["definition_hash"]
        # The finished execution still reads as it ran.
        assert 'output: {"n":7}' in orbit.ok("status", execution).stdout

    with ServerProcess(tmp_path / "orbit.db") as plain:
        orbit = Orbit(f"http://{plain.addr}")
        assert plain.http().get("/v1/workflows/Dev/1.0.0").body["definition_hash"] == latest
        refused = one_error_line(orbit("deploy", write(source, "4d")))
        assert refused.startswith(
            "error: DEFINITION_CONFLICT (409): Dev@1.0.0 is already registered with a different "
            "definition"
        )
