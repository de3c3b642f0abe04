"""Typed workers in the conformance suite (README.md, "Typed workers";
issue 43): for each SDK with a typed program, a worker built on the code
`orbit codegen` generates from conformance.orbit serves `conf.echo` through
a real `orbit server`, and the same program is refused at registration by a
server whose deployed `conf.echo` has changed since (CONTRACT_MISMATCH), so
the program did present the generated contract's hash.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conformance_kit import CONTRACTS, GO_SDK, POLL_WAIT_MS, WORKERS
from e2e_processes import (
    TSX_LOADER,
    Process,
    Server,
    Stack,
    Worker,
    java_classpath,
    link_orbit_lang,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

BIN = Path(sys.executable).parent
RUST_SDK = GO_SDK.parent / "rust"
CARGO_TARGET = Path.home() / ".cache" / "orbit" / "cargo-target"
ECHO = """task "conf.echo" {
    version "1.0.0"
    input { text: String }"""
# The same contract with one field more: what a later deployment might hold.
DRIFTED = ECHO.replace("input { text: String }", "input { text: String, loud: Bool = false }")


def _codegen(lang: str, out: Path, *more: str) -> None:
    done = subprocess.run(
        [str(BIN / "orbit"), "codegen", "--lang", lang, str(CONTRACTS), "-o", str(out), *more],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _python(workdir: Path) -> list[str]:
    target = workdir / "typed_worker.py"
    if not target.exists():
        shutil.copy(WORKERS / "typed_worker.py", target)
        _codegen("python", workdir)
    return [sys.executable, str(target)]


def _go(workdir: Path) -> list[str]:
    if shutil.which("go") is None:
        pytest.skip("go is not on PATH")
    module = workdir / "typed-go"
    binary = workdir / "typed-go-worker"
    if not binary.exists():
        module.mkdir(parents=True, exist_ok=True)
        shutil.copy(WORKERS / "typed_go" / "main.go", module / "main.go")
        _codegen("go", module / "conformance")
        (module / "go.mod").write_text(
            "module example.com/typed\n\ngo 1.21\n\n"
            "require github.com/AjmalX0/Orbit/sdks/go v0.0.0\n\n"
            f"replace github.com/AjmalX0/Orbit/sdks/go => {GO_SDK}\n"
        )
        subprocess.run(
            ["go", "build", "-o", str(binary), "."],
            cwd=module,
            check=True,
            timeout=300,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
        )
    return [str(binary)]


def _rust(workdir: Path) -> list[str]:
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).exists():
        pytest.skip("cargo is not installed")
    project = workdir / "typed-rust"
    binary = workdir / "typed-rust-worker"
    if not binary.exists():
        (project / "src").mkdir(parents=True, exist_ok=True)
        shutil.copy(WORKERS / "typed_rust" / "main.rs", project / "src" / "main.rs")
        _codegen("rust", project / "src")
        (project / "Cargo.toml").write_text(
            '[package]\nname = "orbit-typed-conformance"\nversion = "0.1.0"\n'
            'edition = "2021"\n\n[dependencies]\n'
            f'orbit-worker = {{ path = "{RUST_SDK}" }}\n'
            'serde = { version = "1", features = ["derive"] }\nserde_json = "1"\n'
        )
        target = Path(os.environ.get("CARGO_TARGET_DIR") or CARGO_TARGET)
        subprocess.run(
            [cargo, "build", "--quiet"],
            cwd=project,
            check=True,
            timeout=900,
            env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        )
        shutil.copy(target / "debug" / "orbit-typed-conformance", binary)
    return [str(binary)]


def _typescript(workdir: Path) -> list[str]:
    if not TSX_LOADER.exists():
        pytest.skip("the TypeScript SDK's packages are not installed (npm ci in sdks/typescript)")
    target = workdir / "typed_worker.ts"
    if not target.exists():
        shutil.copy(WORKERS / "typed_worker.ts", target)
        shutil.copy(WORKERS / "package.json", workdir / "package.json")
        link_orbit_lang(workdir)
        _codegen("typescript", workdir)
    return ["node", "--import", TSX_LOADER.as_uri(), str(target)]


def _java(workdir: Path) -> list[str]:
    if shutil.which("javac") is None or shutil.which("mvn") is None:
        pytest.skip("a JDK and Maven are needed")
    classes = workdir / "typed-java-classes"
    classpath = java_classpath(workdir)
    if not classes.exists():
        sources = workdir / "typed-java"
        _codegen("java", sources, "--package", "typed")
        shutil.copy(WORKERS / "typed_java" / "TypedWorker.java", sources / "typed")
        subprocess.run(
            ["javac", "-d", str(classes), "-cp", classpath, *map(str, sources.rglob("*.java"))],
            check=True,
            timeout=300,
        )
    return ["java", "-cp", f"{classes}{os.pathsep}{classpath}", "typed.TypedWorker"]


TYPED: dict[str, Callable[[Path], list[str]]] = {
    "java": _java,
    "python": _python,
    "typescript": _typescript,
    "go": _go,
    "rust": _rust,
}


@pytest.fixture(params=sorted(TYPED))
def typed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Stack, Path]]:
    stack = Stack(tmp_path / "stack")
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield str(request.param), stack, workdir
    stack.close()


def _worker(name: str, stack: Stack, workdir: Path, server: Server, worker_id: str) -> Worker:
    env = {"CONF_WORKER_ID": worker_id, "CONF_POLL_WAIT_MS": str(POLL_WAIT_MS)}
    return Worker(worker_id, TYPED[name](workdir), stack.logs, workdir, server, env=env)


def test_a_typed_worker_serves_and_a_drifted_contract_refuses_it(
    typed: tuple[str, Stack, Path],
) -> None:
    name, stack, workdir = typed
    server = stack.server(name="server")
    stack.cli(server).ok("deploy", str(CONTRACTS))
    worker = stack._own(_worker(name, stack, workdir, server, f"typed-{name}")).start()
    status, answer = server.api(
        "POST",
        "/v1/executions",
        {"workflow": "ConfEcho", "input": {"text": "hello"}, "execution_id": "typed-1"},
    )
    assert status == 201, answer
    state = server.wait_for_status("typed-1", {"COMPLETED", "FAILED"}, timeout=60)
    assert state["status"] == "COMPLETED", state
    assert state["output"] == {"text": "HELLO"}
    worker.wait_for_log(r"CONF start typed-1 ", 10)

    text = CONTRACTS.read_text()
    assert ECHO in text
    drifted_file = workdir / "drifted.orbit"
    drifted_file.write_text(text.replace(ECHO, DRIFTED))
    drifted = stack.server(name="drifted")
    stack.cli(drifted).ok("deploy", str(drifted_file))
    refused = stack._own(_worker(name, stack, workdir, drifted, f"typed-{name}-old"))
    Process.start(refused)  # never registers: do not wait for it
    drifted.wait_for_log(r"worker refused .*CONTRACT_MISMATCH", 60)
    assert refused.registrations() == 0
