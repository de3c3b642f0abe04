"""`orbit logs --json | head -1` ends quietly when the reader goes away."""

from __future__ import annotations

import os
import subprocess
import sys

from cli_fake_runtime import FakeExecution, FakeRuntime


def test_a_closed_stdout_ends_the_command_quietly(fake: FakeRuntime) -> None:
    events = [
        {"seq": n, "timestamp_ms": 1_000 + n, "type": "SignalReceived", "name": "x" * 200}
        for n in range(1, 5001)
    ]
    state = {"id": "big", "workflow": "W", "version": "1", "status": "RUNNING"}
    fake.executions["big"] = FakeExecution(
        {"states": [state], "history": {"execution_id": "big", "events": events}}
    )
    env = {**os.environ, "ORBIT_SERVER": fake.url, "NO_COLOR": "1"}
    command = [
        sys.executable,
        "-c",
        "from orbit_cli.main import main; main()",
        "logs",
        "big",
        "--json",
    ]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read()
        process.wait(timeout=30)
    assert first.startswith(b'{"seq":1,')
    assert stderr == b""
