"""Java workers end to end (chapter 37): the quick start's Hello workflow
served entirely by a Java worker against a real `orbit server`, stopped by
SIGTERM through the JVM's shutdown hook as the chapter shows; and chapter
60's polyglot workflow with a Rust and a Java step added, one execution on
Python, TypeScript, Go, Rust and Java workers. Chapter 37's example worker runs
in the SDK's own tests (sdks/java ExamplesTest); the runtime outage,
cancellation, deadline and shutdown scenarios are the conformance suite's
(tests/sdk_conformance, program `java`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_processes import HELLO, Server, Stack, Worker, java_classpath
from test_e2e_rust_workers import fnv1a, rust_worker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PROJECTS = Path(__file__).resolve().parent / "projects"


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


def test_one_execution_runs_on_python_typescript_go_rust_and_java_workers(stack: Stack) -> None:
    """The polyglot workflow of tests/e2e/projects/polyglot with two more
    steps: Rust fingerprints the normalized text (the crate's text_worker
    example) and Java takes the tokens' initials (polyglot/java)."""
    if shutil.which("go") is None:
        pytest.fail("the Go toolchain is not on PATH")
    project = stack.root / "polyglot"
    shutil.copytree(PROJECTS / "polyglot", project, ignore=shutil.ignore_patterns("go", "java"))
    shutil.copy(PROJECTS.parent / "workers" / "package.json", project / "package.json")
    source = (project / "polyglot.orbit").read_text()
    contracts = (
        'task "text.fingerprint" { version "1.0.0" input { text: String }'
        " output { hash: String, bytes: Int } }\n"
        'task "text.initials" { version "1.0.0" input { tokens: List<String> }'
        " output { initials: String } }\n\n"
    )
    steps = (
        '    step fingerprint { worker "text.fingerprint" using rust'
        " with { text: normalize.text } timeout 5s }\n"
        '    step initials { worker "text.initials" using java'
        " with { tokens: tokenize.tokens } timeout 5s }\n\n"
    )
    replacements = {
        "workflow DocumentInsights {": contracts + "workflow DocumentInsights {",
        "        top: List<WordCount>\n    }": "        top: List<WordCount>\n"
        "        hash: String\n        initials: String\n    }",
        "    return {": steps + "    return {",
        "        top: frequencies.top\n": "        top: frequencies.top\n"
        "        hash: fingerprint.hash\n        initials: initials.initials\n",
    }
    for old, new in replacements.items():
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    (project / "polyglot.orbit").write_text(source)

    server = stack.server()
    stack.python_worker("text-python", project / "text_worker.py", server)
    stack.typescript_worker("text-typescript", project / "text_worker.ts", server)
    go_binary = stack.root / "text-go-bin"
    subprocess.run(
        ["go", "build", "-o", str(go_binary), "."],
        cwd=PROJECTS / "polyglot" / "go",
        check=True,
        timeout=300,
    )
    stack._own(Worker("text-go", [str(go_binary)], stack.logs, stack.root, server)).start()
    rust_worker(stack, "text_worker", "text-rust", server)
    java_worker(stack, "text-java", PROJECTS / "polyglot" / "java" / "TextJava.java", server)
    cli = stack.cli(server, project)

    text = "The quick brown fox jumps over the lazy dog. The dog sleeps."
    run = cli.ok("run", "polyglot.orbit", "--id", "doc-5", "--input", json.dumps({"text": text}))
    output = json.loads(run.stdout)
    normalized = "the quick brown fox jumps over the lazy dog the dog sleeps"
    assert output.pop("hash") == f"{fnv1a(normalized.encode()):016x}"
    assert output.pop("initials") == "TQBFJOTLDTDS"
    assert output["words"] == 12 and output["top_word"] == "the", output
    dispatched = {
        e["step"]: e["worker_id"] for e in server.events("doc-5") if e["type"] == "StepDispatched"
    }
    assert dispatched == {
        "normalize": "text-python",
        "tokenize": "text-typescript",
        "frequencies": "text-go",
        "fingerprint": "text-rust",
        "initials": "text-java",
    }
