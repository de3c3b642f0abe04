"""Rust workers end to end (chapter 36): the quick start's Hello workflow
served entirely by the orbit-worker crate's `hello` example, a real
`orbit server` and the CLI, over plain HTTP and over mutual TLS as a
certificate identity of a workers file; and chapter 60's polyglot workflow
with its Rust step, one execution on Python, TypeScript, Go and Rust workers. The protocol's harder cases
(outage while a task runs, cancellation, deadline, graceful shutdown) are
the conformance suite's, which runs the crate's `conformance` example."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_processes import HELLO, Server, Stack, Worker, hello_over_mutual_tls, rust_example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PROJECTS = Path(__file__).resolve().parent / "projects"


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


ADMIN = "admin-token-rust-0123456789abcdef"


def test_a_rust_worker_serves_over_mutual_tls(stack: Stack) -> None:
    """HTTPS with a client CA and a workers file: the worker trusts the
    runtime's private CA through ORBIT_CA_CERT (the only root it then
    trusts) and presents the certificate of its workers-file identity
    through ORBIT_CLIENT_CERT and ORBIT_CLIENT_KEY."""
    server, certs, tls_env = hello_over_mutual_tls(stack, ADMIN, "hello-rust", "rust")
    api = server.api

    binary = rust_example("hello", stack.root / "hello-rust-bin")
    env = {
        **tls_env,
        "ORBIT_WORKER_ID": "hello-rust",
        "ORBIT_CLIENT_CERT": str(certs / "hello-rust.pem"),
        "ORBIT_CLIENT_KEY": str(certs / "hello-rust.key"),
    }
    worker = Worker("hello-rust", [str(binary)], stack.logs, stack.root, server, env=env)
    stack._own(worker).start()
    start = {"workflow": "Hello", "execution_id": "tls-ada", "input": {"name": "Ada"}}
    assert api("POST", "/v1/executions", start)[0] == 201
    status, state = api("GET", "/v1/executions/tls-ada/wait?timeout_ms=60000")
    assert status == 200
    assert state["status"] == "COMPLETED", state
    assert state["output"] == {"greeting": "Hello, Ada!!!"}
    assert worker.stop() == 0


def fnv1a(data: bytes) -> int:
    """64-bit FNV-1a, as examples/text_worker.rs computes it."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) % (1 << 64)
    return h


def test_one_execution_runs_on_python_typescript_go_and_rust_workers(stack: Stack) -> None:
    """Chapter 60's polyglot workflow with its Rust step: the crate's
    text_worker example fingerprints the normalized text beside the Python,
    TypeScript and Go workers, in one execution."""
    if shutil.which("go") is None:
        pytest.fail("the Go toolchain is not on PATH")
    project = stack.root / "polyglot"
    shutil.copytree(PROJECTS / "polyglot", project, ignore=shutil.ignore_patterns("go"))
    shutil.copy(PROJECTS.parent / "workers" / "package.json", project / "package.json")
    source = (project / "polyglot.orbit").read_text()
    source = source.replace(
        "workflow DocumentInsights {",
        'task "text.fingerprint" { version "1.0.0" input { text: String }'
        " output { hash: String, bytes: Int } }\n\nworkflow DocumentInsights {",
    )
    source = source.replace(
        "        top: List<WordCount>\n    }",
        "        top: List<WordCount>\n        hash: String\n        bytes: Int\n"
        "        normalized: String\n    }",
    )
    source = source.replace(
        "    return {",
        '    step fingerprint { worker "text.fingerprint" using rust'
        " with { text: normalize.text } timeout 5s }\n\n    return {",
    )
    source = source.replace(
        "        top: frequencies.top\n",
        "        top: frequencies.top\n        hash: fingerprint.hash\n"
        "        bytes: fingerprint.bytes\n        normalized: normalize.text\n",
    )
    assert source.count("text.fingerprint") == 2 and "fingerprint.hash" in source
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
    cli = stack.cli(server, project)

    text = "The quick brown fox jumps over the lazy dog. The dog sleeps."
    run = cli.ok("run", "polyglot.orbit", "--id", "doc-1", "--input", json.dumps({"text": text}))
    output = json.loads(run.stdout)
    normalized = output.pop("normalized")
    assert normalized == "the quick brown fox jumps over the lazy dog the dog sleeps"
    assert output.pop("hash") == f"{fnv1a(normalized.encode()):016x}"
    assert output.pop("bytes") == len(normalized.encode())
    assert output == {
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
        "fingerprint": "text-rust",
    }
