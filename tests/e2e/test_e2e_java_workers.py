"""Java workers end to end (chapter 37): the quick start's Hello workflow
served entirely by a Java worker against a real `orbit server`, stopped by
SIGTERM through the JVM's shutdown hook as the chapter shows. Chapter 37's example worker runs
in the SDK's own tests (sdks/java ExamplesTest); the runtime outage,
cancellation, deadline and shutdown scenarios are the conformance suite's
(tests/sdk_conformance, program `java`)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from e2e_processes import REPO, Server, Stack, Worker, java_classpath

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PROJECTS = Path(__file__).resolve().parent / "projects"
HELLO = REPO / "orbit_cli" / "src" / "orbit_cli" / "templates" / "hello" / "hello.orbit"


def java_worker(stack: Stack, worker_id: str, source: Path, server: Server) -> Worker:
    """Runs the single-file Java program `source` with the SDK on its class
    path; returns once it registered."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.fail("a JDK 17+ and Maven must be on PATH")
    argv = ["java", "-cp", java_classpath(stack.root), str(source)]
    worker = Worker(worker_id, argv, stack.logs, stack.root, server)
    return stack._own(worker).start(timeout=180)


def routed_to_java(project: Path) -> Path:
    source = HELLO.read_text()
    assert source.count("using python") == source.count("using typescript") == 1
    hello = project / "hello.orbit"
    hello.write_text(
        source.replace("using python", "using java").replace("using typescript", "using java")
    )
    return hello


def test_the_quick_start_served_by_a_java_worker(stack: Stack) -> None:
    project = stack.root / "hello-java"
    project.mkdir()
    routed_to_java(project)
    server = stack.server()
    worker = java_worker(
        stack, "hello-java", PROJECTS / "quickstart-java" / "HelloJava.java", server
    )
    cli = stack.cli(server, project)

    listing = cli.ok("workers", "list").stdout
    assert re.search(r"hello-java\s+java\s+online\s+0\s+greeting\.compose@1\.0\.0", listing), (
        listing
    )

    run = cli.ok("run", "hello.orbit", "--id", "hello-ada", "--input", '{"name": "Ada"}')
    assert json.loads(run.stdout) == {"greeting": "Hello, Ada!!!"}
    dispatched = {
        e["step"]: e["worker_id"]
        for e in server.events("hello-ada")
        if e["type"] == "StepDispatched"
    }
    assert dispatched == {"compose": "hello-java", "decorate": "hello-java"}
    worker.wait_for_log(r"composing a greeting for Ada execution=hello-ada step=compose attempt=1")

    bad = cli(
        "run", "hello.orbit", "--id", "hello-bad", "--input", '{"name": "B", "excitement": -1}'
    )
    assert bad.returncode != 0
    state = server.execution("hello-bad")
    assert state["status"] == "FAILED"
    assert state["error"]["code"] == "INVALID_EXCITEMENT"

    # The hook drains and unregisters; the JVM then exits 143, as after any
    # SIGTERM. Its own log lines may be lost (java.util.logging's hook closes
    # the handlers), so the runtime's log is checked.
    assert worker.stop() == 143
    server.wait_for_log(r"worker unregistered.*hello-java", 10)
