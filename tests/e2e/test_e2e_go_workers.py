"""Go workers end to end (chapter 35): the quick start's Hello workflow
served entirely by a Go worker, over plain HTTP and over mutual TLS as a
certificate identity of a workers file, and chapter 60's polyglot workflow
with one execution whose steps run on Python, TypeScript and Go workers
together."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_processes import HELLO, Server, Stack, Worker, hello_over_mutual_tls

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

PROJECTS = Path(__file__).resolve().parent / "projects"


def go_worker(stack: Stack, worker_id: str, source: Path, server: Server) -> Worker:
    """Builds the Go program in `source` (its go.mod points at sdks/go) and
    starts it; returns once it registered."""
    if shutil.which("go") is None:
        pytest.fail("the Go toolchain is not on PATH")
    binary = stack.root / f"{worker_id}-bin"
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=source, check=True, timeout=300)
    worker = Worker(worker_id, [str(binary)], stack.logs, stack.root, server)
    return stack._own(worker).start()


def test_the_quick_start_served_by_a_go_worker(stack: Stack) -> None:
    project = stack.root / "hello-go"
    project.mkdir()
    source = HELLO.read_text()
    assert source.count("using python") == source.count("using typescript") == 1
    routed = source.replace("using python", "using go").replace("using typescript", "using go")
    (project / "hello.orbit").write_text(routed)
    server = stack.server()
    worker = go_worker(stack, "hello-go", PROJECTS / "quickstart-go", server)
    cli = stack.cli(server, project)

    listing = cli.ok("workers", "list").stdout
    assert re.search(r"hello-go\s+go\s+online\s+0\s+greeting\.compose@1\.0\.0", listing), listing

    run = cli.ok("run", "hello.orbit", "--id", "hello-ada", "--input", '{"name": "Ada"}')
    assert json.loads(run.stdout) == {"greeting": "Hello, Ada!!!"}
    dispatched = {
        e["step"]: e["worker_id"]
        for e in server.events("hello-ada")
        if e["type"] == "StepDispatched"
    }
    assert dispatched == {"compose": "hello-go", "decorate": "hello-go"}
    worker.wait_for_log(r"composing a greeting for Ada execution=hello-ada step=compose attempt=1")

    bad = cli(
        "run", "hello.orbit", "--id", "hello-bad", "--input", '{"name": "B", "excitement": -1}'
    )
    assert bad.returncode != 0
    state = server.execution("hello-bad")
    assert state["status"] == "FAILED"
    assert state["error"]["code"] == "INVALID_EXCITEMENT"

    worker.stop()
    assert "worker hello-go unregistered" in worker.log()


def test_one_execution_runs_on_python_typescript_and_go_workers(stack: Stack) -> None:
    project = stack.root / "polyglot"
    shutil.copytree(PROJECTS / "polyglot", project, ignore=shutil.ignore_patterns("go"))
    shutil.copy(PROJECTS.parent / "workers" / "package.json", project / "package.json")
    server = stack.server()
    stack.python_worker("text-python", project / "text_worker.py", server)
    stack.typescript_worker("text-typescript", project / "text_worker.ts", server)
    go_worker(stack, "text-go", PROJECTS / "polyglot" / "go", server)
    cli = stack.cli(server, project)

    text = "The quick brown fox jumps over the lazy dog. The dog sleeps."
    run = cli.ok("run", "polyglot.orbit", "--id", "doc-1", "--input", json.dumps({"text": text}))
    assert json.loads(run.stdout) == {
        "words": 12,
        "unique": 9,
        "top_word": "the",
        "top": [
            {"word": "the", "count": 3},
            {"word": "dog", "count": 2},
            {"word": "brown", "count": 1},
        ],
    }
    dispatched = {
        e["step"]: e["worker_id"] for e in server.events("doc-1") if e["type"] == "StepDispatched"
    }
    assert dispatched == {
        "normalize": "text-python",
        "tokenize": "text-typescript",
        "frequencies": "text-go",
    }
    status = cli.ok("status", "doc-1").stdout
    assert re.search(r"frequencies\s+SUCCEEDED\s+1\s+\S+\s+worker text-go", status), status


ADMIN = "admin-token-go-0123456789abcdef"


def test_a_go_worker_serves_over_mutual_tls(stack: Stack) -> None:
    """HTTPS with a client CA and a workers file: the Go worker trusts the
    runtime through ORBIT_CA_CERT and is the identity its certificate names."""
    server, certs, tls_env = hello_over_mutual_tls(stack, ADMIN, "hello-go", "go")
    api = server.api

    binary = stack.root / "hello-go-bin"
    subprocess.run(
        ["go", "build", "-o", str(binary), "."],
        cwd=PROJECTS / "quickstart-go",
        check=True,
        timeout=300,
    )
    env = {
        **tls_env,
        "ORBIT_CLIENT_CERT": str(certs / "hello-go.pem"),
        "ORBIT_CLIENT_KEY": str(certs / "hello-go.key"),
    }
    stack._own(Worker("hello-go", [str(binary)], stack.logs, stack.root, server, env=env)).start()
    start = {"workflow": "Hello", "execution_id": "tls-ada", "input": {"name": "Ada"}}
    assert api("POST", "/v1/executions", start)[0] == 201
    status, state = api("GET", "/v1/executions/tls-ada/wait?timeout_ms=60000")
    assert status == 200
    assert state["status"] == "COMPLETED", state
    assert state["output"] == {"greeting": "Hello, Ada!!!"}
