"""What the conformance suite's fixtures and scenarios share: the registry of
worker programs (PROGRAMS, the hook where an SDK or binding joins, README.md)
and `Conformance`, which starts a program's instances and executions."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_processes import (
    JAVA_SDK,
    REPO,
    TSX_LOADER,
    Server,
    Stack,
    Worker,
    free_port,
    java_classpath,
    link_orbit_lang,
    rust_example,
)

HERE = Path(__file__).resolve().parent
WORKERS = HERE / "workers"
CONTRACTS = HERE / "conformance.orbit"
GO_SDK = REPO / "sdks" / "go"
# Short enough for the session scenarios to be quick, long enough for a
# loaded machine: heartbeats come every sixth of it (500 ms).
SESSION_TIMEOUT_S = 3
POLL_WAIT_MS = 5000


class Program(NamedTuple):
    """A conformance worker program: `argv(workdir)` is its command line."""

    runtime: str
    argv: Callable[[Path], list[str]]


def _python(_: Path) -> list[str]:
    return [sys.executable, str(WORKERS / "conf_worker.py")]


def _raw_http(_: Path) -> list[str]:
    return [sys.executable, str(WORKERS / "raw_http_worker.py")]


def _raw_grpc(_: Path) -> list[str]:
    return [sys.executable, str(WORKERS / "raw_grpc_worker.py")]


def _typescript(workdir: Path) -> list[str]:
    target = workdir / "conf_worker.ts"
    if not target.exists():
        shutil.copy(WORKERS / "conf_worker.ts", target)
        shutil.copy(WORKERS / "package.json", workdir / "package.json")
        link_orbit_lang(workdir)
    return ["node", "--import", TSX_LOADER.as_uri(), str(target)]


def _go(workdir: Path) -> list[str]:
    binary = workdir / "conf-worker-go"
    if not binary.exists():
        subprocess.run(
            ["go", "build", "-o", str(binary), "./conformance"],
            cwd=GO_SDK,
            check=True,
            timeout=300,
        )
    return [str(binary)]


def _java(workdir: Path) -> list[str]:
    program = JAVA_SDK / "conformance" / "ConfWorker.java"
    return ["java", "-cp", java_classpath(workdir), str(program)]


def _rust(workdir: Path) -> list[str]:
    binary = workdir / "conf-worker-rust"
    if not binary.exists():
        rust_example("conformance", binary)
    return [str(binary)]


PROGRAMS: dict[str, Program] = {
    "python": Program("python", _python),
    "typescript": Program("typescript", _typescript),
    "go": Program("go", _go),
    "java": Program("java", _java),
    "rust": Program("rust", _rust),
    "raw_http": Program("raw", _raw_http),
    "raw_grpc": Program("raw", _raw_grpc),
}

# The gRPC address of each runtime the suite started (new_server), by its
# HTTP URL: a worker program finds it in CONF_GRPC_ADDR.
GRPC_ADDRS: dict[str, str] = {}


class Conformance:
    """What a scenario gets: the program under test and its runtime."""

    def __init__(
        self, name: str, stack: Stack, server: Server, workdir: Path, extensions: bool = True
    ) -> None:
        self.name = name
        # Whether the runtimes offer the worker protocol extensions
        # (docs/worker-protocol.md); without them, the book's protocol.
        self.extensions = extensions
        self.program = PROGRAMS[name]
        self.stack = stack
        self.server = server
        self.workdir = workdir
        self._count = 0

    def worker(self, server: Server | None = None, concurrency: int = 1) -> Worker:
        """Starts a new instance of the program against `server` (default:
        the module's runtime); returns once it registered."""
        self._count += 1
        worker_id = f"conf-{self.name}-{self._count}"
        env = {
            "CONF_WORKER_ID": worker_id,
            "CONF_POLL_WAIT_MS": str(POLL_WAIT_MS),
            "CONF_CONCURRENCY": str(concurrency),
        }
        target = server or self.server
        env["CONF_GRPC_ADDR"] = GRPC_ADDRS[target.url]
        worker = Worker(
            worker_id,
            self.program.argv(self.workdir),
            self.stack.logs,
            self.workdir,
            target,
            env=env,
        )
        return self.stack._own(worker).start()

    def start(
        self,
        workflow: str,
        execution_id: str,
        body: dict[str, object] | None = None,
        server: Server | None = None,
    ) -> str:
        target = server or self.server
        status, answer = target.api(
            "POST",
            "/v1/executions",
            {"workflow": workflow, "input": body or {}, "execution_id": execution_id},
        )
        assert status in (200, 201), answer
        return execution_id


def deploy(stack: Stack, server: Server) -> None:
    stack.cli(server).ok("deploy", str(CONTRACTS))


def new_server(
    stack: Stack, name: str, session_timeout_s: int = SESSION_TIMEOUT_S, *, extensions: bool = True
) -> Server:
    """A started runtime with the conformance contracts deployed, serving
    the gRPC binding too, on a port of its own that a restart keeps; with
    `extensions` off, it offers the book's worker protocol only."""
    grpc_addr = f"127.0.0.1:{free_port()}"
    server = stack.server(
        "--session-timeout",
        str(session_timeout_s),
        "--grpc-addr",
        grpc_addr,
        *([] if extensions else ["--no-worker-extensions"]),
        name=name,
    )
    GRPC_ADDRS[server.url] = grpc_addr
    deploy(stack, server)
    return server
