"""Real processes for the end-to-end tests: `orbit server`, SDK workers and
the `orbit` CLI.

Every child runs in its own process group with stdout and stderr going to one
log file, so a test can wait for a line, print the logs when it fails, and
stop the whole group (gunicorn's arbiter and its worker together) by the
group id it started. `LIVE` holds every process started and not yet discarded;
the conftest prints their logs into the report of a failed test. A `Stack`
owns the processes of one fixture scope and stops them all at its end.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pgkit
import trustme
from server_harness import wait_until

REPO = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).resolve().parent / "workers"
ORBIT = str(Path(sys.executable).with_name("orbit"))
TS_SDK = REPO / "sdks" / "typescript"
TSX_LOADER = TS_SDK / "node_modules" / "tsx" / "dist" / "esm" / "index.mjs"
JAVA_SDK = REPO / "sdks" / "java"
# Maven's local repository, shared with the sdk_java nox session.
MAVEN_REPO = REPO / ".cache" / "m2"

LIVE: list[Process] = []


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test environment without ORBIT_/OTEL_ settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Process:
    """One child process and the log file that collects its output."""

    def __init__(
        self, name: str, argv: list[str], log_dir: Path, cwd: Path, env: dict[str, str]
    ) -> None:
        self.name = name
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        assert self.proc is None, f"{self.name} is already running"
        with self.log_path.open("ab") as log:
            log.write(f"--- {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self not in LIVE:
            LIVE.append(self)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float = 30.0, count: int = 1) -> list[str]:
        """Waits until `pattern` matches `count` lines of the log; returns the matches."""
        regex = re.compile(pattern)

        def found() -> list[str]:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}")
            hits = [line for line in self.log().splitlines() if regex.search(line)]
            return hits if len(hits) >= count else []

        return list(wait_until(found, timeout, f"{pattern!r} in the log of {self.name}"))

    def send(self, sig: int) -> None:
        """Signals the process group without waiting."""
        if self.proc is not None and self.proc.poll() is None:
            _signal_group(self.proc.pid, sig)

    def stop(self, sig: int | None = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Signals the process group (unless `sig` is None: already signalled)
        and waits for the leader; SIGKILL on timeout. A second SIGINT would
        not do: the SDKs take it as an order to quit at once."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            if sig is not None:
                _signal_group(proc.pid, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        # Whatever the leader left behind in its group goes too.
        _signal_group(proc.pid, signal.SIGKILL)
        self.proc = None
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL, as a crash or power loss would."""
        self.stop(signal.SIGKILL)

    def discard(self, sig: int | None = signal.SIGTERM) -> None:
        self.stop(sig)
        if self in LIVE:
            LIVE.remove(self)


def stop_all(processes: Iterable[Process], sig: int = signal.SIGTERM) -> None:
    """Stops several processes at once: a Python worker, and a server holding
    its long polls, may each take a whole poll wait to shut down gracefully."""
    processes = list(processes)
    for process in processes:
        process.send(sig)
    for process in processes:
        process.discard(None)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


class Server(Process):
    """`orbit server` on a fixed free port and a SQLite file (a PostgreSQL
    database with ORBIT_TEST_DB=postgres: `pgkit.db_for`); ready once
    /v1/health answers. A restart keeps the port, so workers find it again."""

    def __init__(self, log_dir: Path, db: Path, *args: str, name: str = "server") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        target = pgkit.db_for(db)
        argv = [ORBIT, "server", "--db", target, "--addr", f"127.0.0.1:{self.port}", *args]
        super().__init__(name, argv, log_dir, db.parent, clean_env())

    def start(self, timeout: float = 60.0) -> Server:
        super().start()
        wait_until(self._healthy, timeout, f"{self.url}/v1/health")
        return self

    def _healthy(self) -> bool:
        if not self.running:
            raise AssertionError(f"orbit server exited:\n{self.log()}")
        try:
            return self.api("GET", "/v1/health")[0] == 200
        except OSError:
            return False

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                raw = reply.read()
                return reply.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None

    def execution(self, execution_id: str) -> dict[str, Any]:
        status, body = self.api("GET", f"/v1/executions/{execution_id}")
        assert status == 200, body
        return dict(body)

    def events(self, execution_id: str) -> list[dict[str, Any]]:
        status, body = self.api("GET", f"/v1/executions/{execution_id}/history")
        assert status == 200, body
        return list(body["events"])

    def wait_for_event(
        self, execution_id: str, match: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            status, body = self.api("GET", f"/v1/executions/{execution_id}/history")
            if status != 200:
                return None
            return next((e for e in body["events"] if match(e)), None)

        return dict(wait_until(found, timeout, f"an event of {execution_id}", every=0.1))

    def wait_for_status(
        self, execution_id: str, statuses: Iterable[str], timeout: float = 60.0
    ) -> dict[str, Any]:
        wanted = set(statuses)

        def done() -> dict[str, Any] | None:
            state = self.execution(execution_id)
            return state if state["status"] in wanted else None

        return dict(wait_until(done, timeout, f"{execution_id} in {wanted}", every=0.1))


class Cli:
    """Runs `orbit ...` to completion against one server."""

    def __init__(self, server: Server, cwd: Path) -> None:
        self.server = server
        self.cwd = cwd

    def __call__(
        self, *args: str, timeout: float = 120.0, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [ORBIT, *args],
            check=False,
            cwd=cwd or self.cwd,
            env=clean_env({"ORBIT_SERVER": self.server.url}),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        """Like calling it, but the command must exit 0."""
        done = self(*args, **kw)
        assert done.returncode == 0, f"orbit {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done


def started_execution(run: subprocess.CompletedProcess[str]) -> str:
    """The execution id in the `started execution <id>` line `orbit run` prints."""
    found = re.search(r"^started execution (\S+)$", run.stderr, re.MULTILINE)
    assert found, run.stderr
    return found[1]


class Worker(Process):
    """An SDK worker process; `start` waits for its registration line."""

    def __init__(
        self,
        worker_id: str,
        argv: list[str],
        log_dir: Path,
        cwd: Path,
        server: Server,
        *,
        env: dict[str, str] | None = None,
    ) -> None:
        self.worker_id = worker_id
        full_env = clean_env({"ORBIT_SERVER": server.url, "PYTHONUNBUFFERED": "1", **(env or {})})
        super().__init__(worker_id, argv, log_dir, cwd, full_env)
        self._registrations = 0

    def start(self, timeout: float = 60.0) -> Worker:
        self._registrations = self.registrations()
        super().start()
        self.wait_registered(timeout)
        return self

    def registrations(self) -> int:
        pattern = re.compile(rf"worker {re.escape(self.worker_id)} registered")
        return sum(1 for line in self.log().splitlines() if pattern.search(line))

    def wait_registered(self, timeout: float = 60.0) -> None:
        """Waits for one more registration line than there was at start."""
        self.wait_for_log(
            rf"worker {re.escape(self.worker_id)} registered", timeout, self._registrations + 1
        )


def python_worker(
    worker_id: str,
    script: Path,
    log_dir: Path,
    server: Server,
    env: dict[str, str] | None = None,
) -> Worker:
    argv = [sys.executable, str(script)]
    return Worker(worker_id, argv, log_dir, script.parent, server, env=env)


def typescript_worker(
    worker_id: str,
    script: Path,
    log_dir: Path,
    server: Server,
    env: dict[str, str] | None = None,
) -> Worker:
    """Runs a .ts file on Node 20 through tsx; `orbit-lang` must resolve from
    the script's directory (see `link_orbit_lang`)."""
    argv = ["node", "--import", TSX_LOADER.as_uri(), str(script)]
    return Worker(worker_id, argv, log_dir, script.parent, server, env=env)


def link_orbit_lang(project: Path) -> None:
    """Makes `import ... from "orbit-lang"` resolve to sdks/typescript from
    `project`, as installing the unpublished package would."""
    modules = project / "node_modules"
    modules.mkdir(exist_ok=True)
    link = modules / "orbit-lang"
    if not link.exists():
        link.symlink_to(TS_SDK, target_is_directory=True)


def java_classpath(workdir: Path) -> str:
    """The class path of the Java SDK and Jackson, for running a Java worker
    as a single source file (`java -cp CP Worker.java`). The SDK is packaged
    by Maven into `workdir` once, leaving sdks/java untouched."""
    saved = workdir / "java-classpath.txt"
    if not saved.exists():
        build = workdir / "java-build"
        maven = [
            "mvn",
            "-q",
            "-B",
            f"-Dmaven.repo.local={MAVEN_REPO}",
            f"-Dorbit.build.dir={build}",
        ]
        subprocess.run([*maven, "package", "-DskipTests"], cwd=JAVA_SDK, check=True, timeout=900)
        listed = workdir / "java-dependencies.txt"
        subprocess.run(
            [
                *maven,
                "dependency:build-classpath",
                "-DincludeScope=runtime",
                f"-Dmdep.outputFile={listed}",
            ],
            cwd=JAVA_SDK,
            check=True,
            timeout=900,
        )
        jar = build / "orbit-sdk-0.1.0.jar"
        saved.write_text(os.pathsep.join([str(jar), listed.read_text().strip()]))
    return saved.read_text()


P = TypeVar("P", bound=Process)


class Stack:
    """Processes owned by one fixture scope, in a directory of their own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._owned: list[Process] = []

    def _own(self, process: P) -> P:
        self._owned.append(process)
        return process

    def server(self, *args: str, name: str = "server", db: Path | None = None) -> Server:
        """A started `orbit server` on a fresh SQLite file unless `db` is given."""
        db = db or self.root / f"{name}.db"
        return self._own(Server(self.logs, db, *args, name=name)).start()

    def python_worker(
        self,
        worker_id: str,
        script: Path,
        server: Server,
        env: dict[str, str] | None = None,
    ) -> Worker:
        worker = self._own(python_worker(worker_id, script, self.logs, server, env))
        return worker.start()

    def typescript_worker(
        self,
        worker_id: str,
        script: Path,
        server: Server,
        env: dict[str, str] | None = None,
    ) -> Worker:
        link_orbit_lang(script.parent)
        worker = self._own(typescript_worker(worker_id, script, self.logs, server, env))
        return worker.start()

    def workers_dir(self) -> Path:
        """A copy of tests/e2e/workers where `orbit-lang` resolves."""
        target = self.root / "workers"
        if not target.exists():
            shutil.copytree(WORKERS, target, ignore=shutil.ignore_patterns("__pycache__"))
            link_orbit_lang(target)
        return target

    def cli(self, server: Server, cwd: Path | None = None) -> Cli:
        return Cli(server, cwd or self.root)

    def close(self) -> None:
        stop_all(self._owned)
        self._owned.clear()


RUST_SDK = REPO / "sdks" / "rust"


def rust_example(name: str, destination: Path) -> Path:
    """Builds the orbit-worker crate's example `name` and copies the binary to
    `destination`. The build goes to cargo's target directory
    (CARGO_TARGET_DIR when nox sets it), so one that CI already made is reused;
    cargo is looked up on PATH, then where rustup puts it."""
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).exists():
        raise RuntimeError("cargo is not installed: install Rust (rustup) to run Rust workers")
    subprocess.run(
        [cargo, "build", "--quiet", "--example", name], cwd=RUST_SDK, check=True, timeout=900
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR") or RUST_SDK / "target")
    shutil.copy(target / "debug" / "examples" / name, destination)
    return destination


HELLO = REPO / "orbit_cli" / "src" / "orbit_cli" / "templates" / "hello" / "hello.orbit"


def hello_over_mutual_tls(
    stack: Stack, admin: str, worker_id: str, runtime: str
) -> tuple[Server, Path, dict[str, str]]:
    """A server on HTTPS with a client CA and a workers file in which
    `worker_id` is the identity of its certificate, with the quick start's
    Hello (every step `using runtime`) deployed over TLS. Returns the server
    (its `api` speaks HTTPS with the admin token), the certificates' folder
    (`<worker_id>.pem`/`.key` are the worker's) and the environment with
    which a worker trusts the server (ORBIT_CA_CERT)."""
    certs = stack.root / "certs"
    certs.mkdir()
    ca, workers_ca = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(certs / "ca.pem"))
    workers_ca.cert_pem.write_to_path(str(certs / "workers-ca.pem"))
    for name, leaf in {
        "server": ca.issue_cert("127.0.0.1"),
        worker_id: workers_ca.issue_cert(f"{worker_id}.workers.internal"),
    }.items():
        (certs / f"{name}.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(certs / f"{name}.key"))
    (certs / "workers.toml").write_text(
        f'[[worker]]\nid = "{worker_id}"\nclient_cert = "{worker_id}.workers.internal"\n'
        f'tasks = ["greeting.*"]\nruntime = "{runtime}"\n'
    )
    hello = stack.root / "hello.orbit"
    hello.write_text(
        HELLO.read_text()
        .replace("using python", f"using {runtime}")
        .replace("using typescript", f"using {runtime}")
    )

    server = Server(
        stack.logs,
        stack.root / "tls.db",
        "--token", admin, "--workers-file", str(certs / "workers.toml"),
        "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
        "--tls-client-ca", str(certs / "workers-ca.pem"),
        name="tls-server",
    )  # fmt: skip
    server.url = server.url.replace("http://", "https://")
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))

    def api(method: str, path: str, body: object = None) -> tuple[int, dict[str, object]]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json", "authorization": f"Bearer {admin}"}
        request = urllib.request.Request(
            server.url + path, data=data, method=method, headers=headers
        )
        with urllib.request.urlopen(request, timeout=60, context=context) as reply:
            return reply.status, json.loads(reply.read())

    server.api = api  # type: ignore[method-assign]
    stack._own(server).start()
    tls_env = {"ORBIT_CA_CERT": str(certs / "ca.pem")}
    deployed = subprocess.run(
        [ORBIT, "deploy", str(hello), "--server", server.url],
        env=clean_env({"ORBIT_TOKEN": admin, **tls_env}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert deployed.returncode == 0, deployed.stderr
    return server, certs, tls_env
