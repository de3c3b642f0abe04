"""Rust workers end to end (chapter 36): the quick start's Hello workflow
served entirely by the orbit-worker crate's `hello` example, a real
`orbit server` and the CLI, over plain HTTP. The protocol's harder cases
(outage while a task runs, cancellation, deadline, graceful shutdown) are
the conformance suite's, which runs the crate's `conformance` example."""

from __future__ import annotations

import json
import re

import pytest
from e2e_processes import REPO, Server, Stack, Worker, rust_example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

HELLO = REPO / "orbit_cli" / "src" / "orbit_cli" / "templates" / "hello" / "hello.orbit"


def rust_worker(stack: Stack, name: str, worker_id: str, server: Server) -> Worker:
    """Builds the crate's example `name` and starts it as `worker_id`;
    returns once it registered."""
    binary = rust_example(name, stack.root / f"{worker_id}-bin")
    env = {"ORBIT_WORKER_ID": worker_id}
    worker = Worker(worker_id, [str(binary)], stack.logs, stack.root, server, env=env)
    return stack._own(worker).start()


def test_the_quick_start_served_by_a_rust_worker(stack: Stack) -> None:
    project = stack.root / "hello-rust"
    project.mkdir()
    source = HELLO.read_text()
    assert source.count("using python") == source.count("using typescript") == 1
    routed = source.replace("using python", "using rust").replace("using typescript", "using rust")
    (project / "hello.orbit").write_text(routed)
    server = stack.server()
    worker = rust_worker(stack, "hello", "hello-rust", server)
    cli = stack.cli(server, project)

    listing = cli.ok("workers", "list").stdout
    assert re.search(r"hello-rust\s+rust\s+online\s+0\s+greeting\.compose@1\.0\.0", listing), (
        listing
    )

    run = cli.ok("run", "hello.orbit", "--id", "hello-ada", "--input", '{"name": "Ada"}')
    assert json.loads(run.stdout) == {"greeting": "Hello, Ada!!!"}
    dispatched = {
        e["step"]: e["worker_id"]
        for e in server.events("hello-ada")
        if e["type"] == "StepDispatched"
    }
    assert dispatched == {"compose": "hello-rust", "decorate": "hello-rust"}
    # Context::log writes one JSON line naming the execution and step.
    line = worker.wait_for_log(r'"message":"composing a greeting for Ada"')[0]
    logged = json.loads(line[line.index("{") :])
    assert (logged["execution_id"], logged["step_id"], logged["attempt"]) == (
        "hello-ada",
        "compose",
        1,
    )

    bad = cli(
        "run", "hello.orbit", "--id", "hello-bad", "--input", '{"name": "B", "excitement": -1}'
    )
    assert bad.returncode != 0
    state = server.execution("hello-bad")
    assert state["status"] == "FAILED"
    assert state["error"]["code"] == "INVALID_EXCITEMENT"

    assert worker.stop() == 0
    assert "worker hello-rust unregistered" in worker.log()
