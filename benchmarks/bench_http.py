"""bench_http: the whole path over HTTP (chapter 47).

Starts `orbit server` (or uses `--server`), deploys a workflow of `--steps`
sequential task steps, starts `--executions` executions from `--clients`
threads as fast as they can (or at `--rate` executions/s), and serves the
tasks with `--workers` worker processes of `--concurrency` threads each.
`--worker-kind raw` (the default) workers are minimal raw-protocol clients,
one keep-alive socket per thread writing prebuilt requests: register, poll,
complete; `sdk` workers are the Python SDK's `Worker`; `go` workers run the
Go SDK (sdks/go/internal/benchworker, built with `go build` first); `rust`
workers run the Rust SDK (sdks/rust/examples/bench_worker.rs, built with
`cargo build --release` first); `java` workers run the Java SDK
(sdks/java/bench/BenchWorker.java, with the SDK packaged by Maven first).
Prints executions/s,
steps/s, the p50/p90/p99 latency from each execution's creation to its
completion, as its history records them, and the CPU time per step of the
server and of the benchmark's own processes (Linux), which share the machine.
`--tls` serves HTTPS with a certificate made for the run (trustme), and
every client and worker connects over TLS. `--protocol grpc` has the
workers speak the worker protocol's gRPC binding instead (the server runs
with `--grpc-addr`): raw workers have one grpcio channel, thus one HTTP/2
connection, per poll thread, with the stub generated from protocol/;
`--worker-kind go` runs benchmarks/grpcworker (grpc-go, one connection per
process), whose client costs far less CPU than grpcio's.
`--otlp` runs the server with `--otlp-endpoint` pointing at a minimal OTLP/HTTP
receiver in a process of its own (it reads each export and answers 200), so
that every execution is traced (the default sampler keeps every trace) and
the figures show what tracing costs.

`--half-load` measures the latency target of issue 17: it runs the
benchmark flat out (with the other options given) to find the maximum
executions/s, then again at half that rate for about `--half-load-s`
seconds, each in a fresh run (a SQLite `--store` file is made anew), `--runs`
times in turns, and prints the medians with the p50 against 5 ms.

    python benchmarks/bench_http.py --executions 2000 --store /tmp/bench.db
    python benchmarks/bench_http.py --executions 2000 --rate 250 --store /tmp/bench.db
    python benchmarks/bench_http.py --executions 2000 --store postgres://orbit:pw@127.0.0.1/bench
    python benchmarks/bench_http.py --executions 2000 --protocol grpc
    python benchmarks/bench_http.py --executions 2000 --protocol grpc --worker-kind go
    python benchmarks/bench_http.py --executions 2000 --otlp --store /tmp/bench.db
    python benchmarks/bench_http.py --half-load --executions 3000 --store /tmp/bench.db
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import orjson

from orbit_core import ir
from orbit_core.ir import expr as e
from orbit_core.ir import types as t

TASK = "bench.step"


def definition(steps: int) -> dict[str, Any]:
    record = t.RecordType((t.Field("i", t.INT),))
    chain = []
    for i in range(steps):
        source: e.Expr = e.Get(e.StepRef(f"s{i - 1}"), "i") if i else e.Int(0)
        chain.append(
            ir.Step(
                f"s{i}",
                "task",
                task=TASK,
                depends_on=(f"s{i - 1}",) if i else (),
                with_=e.Object((e.Entry("i", source),)),
            )
        )
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="BenchHttp",
        version="1.0.0",
        input=t.EMPTY_RECORD,
        output=t.EMPTY_RECORD,
        steps=tuple(chain),
        result=e.EMPTY_OBJECT,
        contracts={TASK: ir.TaskContract(TASK, "1.0.0", record, record)},
    )
    return ir.to_json(attrs.evolve(defn, definition_hash=ir.definition_hash(defn)))


class Client:
    """One keep-alive connection with a bearer token."""

    def __init__(self, server: str, token: str, timeout: float = 120.0) -> None:
        parts = urlsplit(server)
        host = parts.hostname or "127.0.0.1"
        if parts.scheme == "https":
            self.conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, parts.port, timeout=timeout, context=_tls_context()
            )
        else:
            self.conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
        self.headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else orjson.dumps(body)
        self.conn.request(method, path, body=data, headers=self.headers)
        reply = self.conn.getresponse()
        raw = reply.read()
        return reply.status, (orjson.loads(raw) if raw else None)


class RawClient:
    """One keep-alive socket speaking just enough HTTP/1.1 for the worker
    protocol: each request is written with one send, and a response is read
    by its Content-Length. The benchmark's own CPU then stays small next to
    the server's, on a machine they share."""

    def __init__(self, server: str, token: str) -> None:
        parts = urlsplit(server)
        self.sock = socket.create_connection((parts.hostname, parts.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if parts.scheme == "https":
            self.sock = _tls_context().wrap_socket(self.sock, server_hostname=parts.hostname)
        self.head = (
            f"Host: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: "
        ).encode()
        self.buf = b""

    def post(self, path: bytes, body: Any) -> tuple[int, Any]:
        data = orjson.dumps(body)
        self.sock.sendall(
            b"POST %s HTTP/1.1\r\n%s%d\r\n\r\n%s" % (path, self.head, len(data), data)
        )
        buf = self.buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            buf += self._recv()
        head, buf = buf[: end + 2].lower(), buf[end + 4 :]
        status = int(head[9:12])
        at = head.find(b"\r\ncontent-length:")
        length = 0 if at < 0 else int(head[at + 17 : head.index(b"\r", at + 2)])
        while len(buf) < length:
            buf += self._recv()
        raw, self.buf = buf[:length], buf[length:]
        return status, (orjson.loads(raw) if raw else None)

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk


def raw_worker(server: str, token: str, worker_id: str, threads: int, stop: Any) -> None:
    """One raw worker: a session shared by `threads` poll loops."""
    client = RawClient(server, token)
    status, reply = client.post(
        b"/v1/workers/register",
        {
            "worker_id": worker_id,
            "runtime": "python",
            "sdk": "bench_http",
            "contracts": [{"task_name": TASK, "contract_version": "1.0.0"}],
            "extensions": ["result-then-poll"],
        },
    )
    assert status == 200, reply
    session = reply["worker_session_id"]
    # When offered, each result carries the next poll (result-then-poll).
    then_poll = "result-then-poll" in reply.get("extensions", [])

    def loop() -> None:
        conn = RawClient(server, token)
        poll = {"worker_session_id": session, "wait_ms": 1000}
        task = None
        while not stop.is_set():
            if task is None:
                status, task = conn.post(b"/v1/workers/poll", poll)
                if status != 200:
                    task = None
                    continue
            output = {"i": task["input"]["i"] + 1}
            result: dict[str, Any] = {"token": task["token"], "output": output}
            if then_poll:
                result["poll"] = poll
            _, answer = conn.post(b"/v1/tasks/complete", result)
            task = answer.get("task")

    pool = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    client.post(b"/v1/workers/unregister", {"worker_session_id": session})


def sdk_worker(server: str, token: str, worker_id: str, threads: int, stop: Any) -> None:
    """One Python SDK worker with `threads` poll threads."""
    from orbit_sdk import Worker

    worker = Worker(worker_id, server=server, token=token, concurrency=threads, poll_wait_ms=1000)

    @worker.task(TASK, version="1.0.0")
    def step(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"i": input["i"] + 1}

    worker.start()
    stop.wait()
    worker.stop()


GO_SDK = Path(__file__).resolve().parents[1] / "sdks" / "go"
GO_WORKER = Path(tempfile.gettempdir()) / f"orbit-bench-go-worker-{os.getpid()}"


def _program(command: list[str], env: dict[str, str], stop: Any) -> None:
    """Runs a worker program, with `env` added to the environment, until
    `stop` is set (the forked worker process stands in for it)."""
    proc = subprocess.Popen(command, env={**os.environ, **env})
    stop.wait()
    proc.terminate()
    proc.wait(30)


def _program_env(token: str, worker_id: str, threads: int) -> dict[str, str]:
    """What every worker program reads: its token, id and concurrency."""
    return {
        "ORBIT_WORKER_TOKEN": token,
        "ORBIT_BENCH_WORKER_ID": worker_id,
        "ORBIT_BENCH_CONCURRENCY": str(threads),
    }


def build_go_worker() -> None:
    subprocess.run(
        ["go", "build", "-o", str(GO_WORKER), "./internal/benchworker"], cwd=GO_SDK, check=True
    )


def go_worker(server: str, token: str, worker_id: str, threads: int, stop: Any) -> None:
    """One Go SDK worker process with `threads` poll goroutines."""
    env = {"ORBIT_SERVER": server, "ORBIT_BENCH_QUIET": "1"}
    _program([str(GO_WORKER)], {**env, **_program_env(token, worker_id, threads)}, stop)


GO_GRPC = Path(__file__).resolve().parent / "grpcworker"
GO_GRPC_WORKER = Path(tempfile.gettempdir()) / f"orbit-bench-go-grpc-worker-{os.getpid()}"


def build_go_grpc_worker() -> None:
    subprocess.run(["go", "build", "-o", str(GO_GRPC_WORKER), "."], cwd=GO_GRPC, check=True)


def remove_programs() -> None:
    """Deletes the Go worker programs a run built (in the temporary directory)."""
    for program in (GO_WORKER, GO_GRPC_WORKER):
        program.unlink(missing_ok=True)


def go_grpc_worker(target: str, token: str, worker_id: str, threads: int, stop: Any) -> None:
    """One Go worker process over the gRPC binding (benchmarks/grpcworker:
    grpc-go, its `threads` goroutines on one connection)."""
    env = {"ORBIT_GRPC_TARGET": target, **_program_env(token, worker_id, threads)}
    _program([str(GO_GRPC_WORKER)], env, stop)


RUST_SDK = Path(__file__).resolve().parents[1] / "sdks" / "rust"
RUST_TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or RUST_SDK / "target")
RUST_WORKER = RUST_TARGET / "release" / "examples" / "bench_worker"


def build_rust_worker() -> None:
    """Builds the Rust SDK's bench worker, optimised, in cargo's target
    directory (CARGO_TARGET_DIR when set, so nox's builds are reused)."""
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    subprocess.run(
        [cargo, "build", "--quiet", "--release", "--example", "bench_worker"],
        cwd=RUST_SDK,
        check=True,
    )


def rust_worker(server: str, token: str, worker_id: str, threads: int, stop: Any) -> None:
    """One Rust SDK worker process with `threads` poll threads."""
    env = {"ORBIT_SERVER": server, **_program_env(token, worker_id, threads)}
    _program([str(RUST_WORKER)], env, stop)


JAVA_SDK = Path(__file__).resolve().parents[1] / "sdks" / "java"
JAVA_BUILD = Path(tempfile.gettempdir()) / f"orbit-bench-java-{os.getpid()}"


def build_java_worker() -> None:
    """Packages the Java SDK into JAVA_BUILD and writes the class path of the
    SDK and Jackson next to it, with the Maven repository of nox -s sdk_java."""
    maven = [
        "mvn",
        "-q",
        "-B",
        f"-Dmaven.repo.local={JAVA_SDK.parents[1] / '.cache' / 'm2'}",
        f"-Dorbit.build.dir={JAVA_BUILD}",
    ]
    subprocess.run([*maven, "package", "-DskipTests"], cwd=JAVA_SDK, check=True)
    listed = JAVA_BUILD / "dependencies.txt"
    subprocess.run(
        [
            *maven,
            "dependency:build-classpath",
            "-DincludeScope=runtime",
            f"-Dmdep.outputFile={listed}",
        ],
        cwd=JAVA_SDK,
        check=True,
    )
    jar = JAVA_BUILD / "orbit-sdk-0.1.0.jar"
    (JAVA_BUILD / "classpath.txt").write_text(f"{jar}{os.pathsep}{listed.read_text().strip()}")


def java_worker(server: str, token: str, worker_id: str, threads: int, stop: Any) -> None:
    """One Java SDK worker process with `threads` poll threads."""
    env = {"ORBIT_SERVER": server, "ORBIT_BENCH_QUIET": "1"}
    classpath = (JAVA_BUILD / "classpath.txt").read_text()
    program = JAVA_SDK / "bench" / "BenchWorker.java"
    command = ["java", "-cp", classpath, str(program)]
    _program(command, {**env, **_program_env(token, worker_id, threads)}, stop)


def grpc_worker(target: str, token: str, worker_id: str, threads: int, stop: Any) -> None:
    """A raw worker over gRPC: the same loop as `raw_worker`, as the
    generated stub's calls. grpc is imported here, after the fork."""
    import grpc
    from google.protobuf import struct_pb2

    from orbit_server.grpc_proto import worker_pb2 as pb
    from orbit_server.grpc_proto import worker_pb2_grpc

    metadata = (("authorization", f"Bearer {token}"),)
    ca = os.environ.get("ORBIT_CA_CERT")

    def stub() -> Any:
        # Its own subchannel pool: a connection per channel, as raw_worker
        # has a socket per thread.
        options = [("grpc.use_local_subchannel_pool", 1)]
        if ca:
            credentials = grpc.ssl_channel_credentials(Path(ca).read_bytes())
            channel = grpc.secure_channel(target, credentials, options=options)
        else:
            channel = grpc.insecure_channel(target, options=options)
        return worker_pb2_grpc.WorkerServiceStub(channel)

    client = stub()
    reply = client.RegisterWorker(
        pb.RegisterWorkerRequest(
            worker_id=worker_id,
            runtime="python",
            sdk="bench_http",
            contracts=[pb.TaskContract(task_name=TASK, contract_version="1.0.0")],
            extensions=["result-then-poll"],
        ),
        metadata=metadata,
    )
    session = reply.worker_session_id
    # When offered, each result carries the next poll (ReportThenPoll).
    then_poll = "result-then-poll" in reply.extensions

    def loop() -> None:
        conn = stub()
        poll = pb.PollTaskRequest(worker_session_id=session, wait_ms=1000)
        task = None
        while not stop.is_set():
            if task is None or not task.token:
                task = conn.PollTask(poll, metadata=metadata)
                if not task.token:
                    continue
            i = task.input.struct_value.fields["i"].number_value
            output = struct_pb2.Value()
            output.struct_value.fields["i"].number_value = i + 1
            complete = pb.CompleteTaskRequest(token=task.token, output=output)
            if then_poll:
                request = pb.ReportThenPollRequest(complete=complete, poll=poll)
                task = conn.ReportThenPoll(request, metadata=metadata).task
            else:
                conn.CompleteTask(complete, metadata=metadata)
                task = None

    pool = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    client.UnregisterWorker(
        pb.UnregisterWorkerRequest(worker_session_id=session), metadata=metadata
    )


WORKER_KINDS = {
    "raw": raw_worker,
    "sdk": sdk_worker,
    "go": go_worker,
    "rust": rust_worker,
    "java": java_worker,
}


# The worker kinds that speak the gRPC binding: the Python loop on grpcio's
# stub, and a Go program on grpc-go.
GRPC_WORKER_KINDS = {"raw": grpc_worker, "go": go_grpc_worker}


def start_workers(args: Any, target: str, grpc: bool) -> tuple[list[Any], Any]:
    """The worker processes (forked) and the event that stops them; with
    several comma-separated targets, worker i serves through target i mod n."""
    if args.worker_kind == "go" and grpc:
        build_go_grpc_worker()
    elif args.worker_kind == "go":
        build_go_worker()
    if args.worker_kind == "rust":
        build_rust_worker()
    if args.worker_kind == "java":
        build_java_worker()
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    targets = target.split(",")
    workers = [
        ctx.Process(
            target=GRPC_WORKER_KINDS[args.worker_kind] if grpc else WORKER_KINDS[args.worker_kind],
            args=(targets[i % len(targets)], args.worker_token, worker_id, args.concurrency, stop),
            daemon=True,
        )
        for i, worker_id in enumerate(worker_ids(args.worker_kind, grpc, args.workers))
    ]
    for worker in workers:
        worker.start()
    return workers, stop


def worker_ids(kind: str, grpc: bool, count: int) -> list[str]:
    """The ids the bench's workers register under (one place, since the
    bench waits for exactly these)."""
    prefix = (
        {"raw": "bench-grpc-"}.get(kind, f"bench-grpc-{kind}-")
        if grpc
        else {"raw": "bench-"}.get(kind, f"bench-{kind}-")
    )
    return [f"{prefix}{i}" for i in range(count)]


def wait_for(admin: Any, eid: str, workers: list[Any]) -> dict[str, Any]:
    """The finished execution; exits at once when a worker process has died,
    rather than waiting for executions nobody will serve."""
    while True:
        status, reply = admin.call("GET", f"/v1/executions/{eid}/wait?timeout_ms=2000")
        state = reply if isinstance(reply, dict) else {}
        if state.get("status") == "COMPLETED":
            return dict(state)
        if status >= 400:
            sys.exit(f"bench_http: waiting for {eid} answered {status} {reply}")
        if state.get("status") in ("FAILED", "CANCELLED", "TIMED_OUT"):
            sys.exit(f"bench_http: execution {eid} ended {state['status']}: {state}")
        dead = [w.name for w in workers if not w.is_alive()]
        if dead:
            sys.exit(f"bench_http: worker process {', '.join(dead)} died; stopping")


def wait_registered(admins: list[Any], expected: set[str], workers: list[Any]) -> None:
    """Returns once every worker has a session, so that the clock starts
    with all of them serving (a gRPC worker takes longer to start). Each
    server lists the sessions registered through it."""
    deadline = time.monotonic() + 60
    while True:
        live = set()
        for admin in admins:
            status, reply = admin.call("GET", "/v1/workers")
            assert status == 200, reply
            live |= {w["worker_id"] for w in reply["workers"] if w["sessions"]}
        if expected <= live:
            return
        if time.monotonic() > deadline or not all(w.is_alive() for w in workers):
            sys.exit(f"bench_http: workers {sorted(expected - live)} did not register")
        time.sleep(0.05)


def cpu_split(proc: subprocess.Popen[str] | None) -> tuple[float, float] | None:
    """CPU seconds (user plus system) used so far by the server's process
    tree and by the rest of the benchmark's (its clients and workers), from
    /proc; None where there is no /proc."""
    try:
        server = _ticks(proc.pid) if proc is not None else 0
        bench = _ticks(os.getpid()) - server
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return server / hz, bench / hz


def report_cpu(
    before: tuple[float, float] | None,
    after: tuple[float, float] | None,
    front_before: float | None,
    front_after: float | None,
    steps: int,
) -> None:
    """Prints the CPU per step of the server's processes and of the rest,
    and the server's split between its engine and front processes."""
    if before is None or after is None:
        return
    server_ms, bench_ms = (1000 * (b - a) / steps for a, b in zip(before, after, strict=True))
    print(
        f"cpu          server {server_ms:.3f} ms/step, benchmark {bench_ms:.3f} ms/step "
        f"(on {os.cpu_count()} cores)"
    )
    if front_before is not None and front_after is not None:
        front_ms = 1000 * (front_after - front_before) / steps
        print(
            f"cpu split    engine process {server_ms - front_ms:.3f} ms/step, "
            f"front process {front_ms:.3f} ms/step"
        )


def front_cpu(proc: subprocess.Popen[str] | None) -> float | None:
    """CPU seconds used so far by the server's front process (ORBIT_WORKER_LOOP=front),
    or None without one."""
    if proc is None:
        return None
    try:
        pid = _front_of(proc.pid)
        return None if pid is None else _ticks(pid) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None


def _front_of(pid: int) -> int | None:
    for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if b"orbit_server.front" in Path(f"/proc/{kid}/cmdline").read_bytes():
            return int(kid)
        found = _front_of(int(kid))
        if found is not None:
            return found
    return None


def _ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(fields[11]) + int(fields[12]) + sum(_ticks(int(kid)) for kid in kids)


def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=os.environ["ORBIT_CA_CERT"])


def make_certificates() -> list[str]:
    """A CA and a server certificate for 127.0.0.1 in a temporary directory:
    the server's TLS options; clients trust the CA through ORBIT_CA_CERT."""
    import trustme

    folder = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    (folder / "server.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(folder / "server.key"))
    os.environ["ORBIT_CA_CERT"] = str(folder / "ca.pem")
    return ["--tls-cert", str(folder / "server.pem"), "--tls-key", str(folder / "server.key")]


def _receive_traces(port: multiprocessing.connection.Connection, status: int) -> None:
    """An OTLP/HTTP receiver: accepts every export (an empty body is an empty
    ExportTraceServiceResponse) and keeps the bodies; asked through `port`
    once the run is over, it answers how many spans they held (decoding
    them only then, so that the run does not pay for it)."""
    import http.server

    bodies: list[bytes] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if status == 200:
                bodies.append(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    port.send(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port.recv()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = 0
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            spans += sum(len(scope.spans) for scope in resource.scope_spans)
    port.send(spans)


def start_receiver(status: int) -> tuple[multiprocessing.connection.Connection | None, str]:
    """The OTLP receiver's process (through its pipe: send anything, get the
    number of spans received) and the endpoint to give the server. With
    `status` 0, no receiver: the endpoint is a port nothing listens on."""
    if status == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return None, f"http://127.0.0.1:{probe.getsockname()[1]}"
    ours, theirs = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=_receive_traces, args=(theirs, status), daemon=True)
    proc.start()
    return ours, f"http://127.0.0.1:{ours.recv()}"


def start_server(
    store: str,
    token: str,
    worker_token: str,
    tls: list[str],
    *,
    grpc: bool = False,
    otlp: str | None = None,
    extensions: bool = True,
) -> tuple[subprocess.Popen[str], str, str | None]:
    """The server process, its URL and, with `grpc`, its gRPC address."""
    if store == "memory":
        db = ":memory:"
    else:
        from benchkit import fresh_store

        db = store
        fresh_store(db)
    orbit = str(Path(sys.executable).with_name("orbit"))
    credentials = ["--token", token, "--worker-token", worker_token]
    proc = subprocess.Popen(
        [
            orbit, "server", "--db", db, "--addr", "127.0.0.1:0", *credentials, *tls,
            *(["--grpc-addr", "127.0.0.1:0"] if grpc else []),
            *(["--otlp-endpoint", otlp] if otlp else []),
            *([] if extensions else ["--no-worker-extensions"]),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    grpc_addr = None
    for line in proc.stderr:
        on_grpc = re.search(r"gRPC \S+ protocol listening addr=(\S+)", line)
        if on_grpc:
            grpc_addr = on_grpc[1]
        found = re.search(r"ORBIT runtime listening addr=(\S+)", line)
        if found:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, f"{'https' if tls else 'http'}://{found[1]}", grpc_addr
    raise SystemExit("orbit server did not start")


def percentile(values: list[int], p: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--store", default="memory", help="memory, a SQLite file path or a postgres:// URL"
    )
    parser.add_argument(
        "--server",
        default="none",
        help="use this runtime instead (several, comma-separated: the servers of one "
        "shared-mode cluster, which workers and clients are spread over)",
    )
    parser.add_argument("--token", default="admin")
    parser.add_argument("--worker-token", default="worker")
    parser.add_argument("--workers", type=int, default=4)
    # 4 workers x 32 = 128 tasks in flight: what the peers harness gives
    # Restate (restate_128). With 8, the workers' slots, not the server,
    # held throughput (docs/performance.md, 2026-12-07 late night).
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0, help="starts per second (0: flat out)")
    parser.add_argument("--worker-kind", choices=sorted(WORKER_KINDS), default="raw")
    parser.add_argument(
        "--tls", action="store_true", help="serve HTTPS with a certificate made for the run"
    )
    parser.add_argument(
        "--protocol",
        choices=["http", "grpc"],
        default="http",
        help="the workers' binding of the worker protocol (grpc: raw or go workers)",
    )
    parser.add_argument(
        "--grpc-addr", help="with --server and --protocol grpc: the runtime's gRPC address"
    )
    parser.add_argument(
        "--otlp",
        action="store_true",
        help="trace every execution to an OTLP receiver run for the benchmark",
    )
    parser.add_argument(
        "--otlp-status",
        type=int,
        default=200,
        help="with --otlp: the status the receiver answers (0: no receiver listens)",
    )
    parser.add_argument(
        "--half-load",
        action="store_true",
        help="find the maximum rate flat out, then measure the latency at half of it",
    )
    parser.add_argument(
        "--half-load-s",
        type=float,
        default=8.0,
        help="with --half-load: seconds of each half-load run",
    )
    parser.add_argument("--runs", type=int, default=3, help="with --half-load: runs of each")
    parser.add_argument(
        "--no-worker-extensions",
        action="store_true",
        help="start the server with --no-worker-extensions: workers speak the book's "
        "protocol, a poll and a result per step (by default they send each result "
        "with the next poll: result-then-poll)",
    )
    return parser


def main() -> None:
    parser = arguments()
    args = parser.parse_args()
    if args.half_load:
        half_load(args, sys.argv[1:])
        return
    grpc = args.protocol == "grpc"
    if grpc and args.worker_kind not in GRPC_WORKER_KINDS:
        parser.error("--protocol grpc runs raw or go workers only")

    proc = None
    receiver: multiprocessing.connection.Connection | None = None
    otlp: str | None = None
    server = args.server
    grpc_addr = args.grpc_addr
    if server == "none":
        tls = make_certificates() if args.tls else []
        if args.otlp:
            receiver, otlp = start_receiver(args.otlp_status)
        proc, server, grpc_addr = start_server(
            args.store,
            args.token,
            args.worker_token,
            tls,
            grpc=grpc,
            otlp=otlp,
            extensions=not args.no_worker_extensions,
        )
    if grpc and not grpc_addr:
        parser.error("--protocol grpc needs the runtime's --grpc-addr")
    servers = server.split(",")
    admin = Client(servers[0], args.token)
    status, reply = admin.call("POST", "/v1/workflows", definition(args.steps))
    assert status in (200, 201), reply

    workers, stop = start_workers(args, grpc_addr if grpc else server, grpc)
    expected = set(worker_ids(args.worker_kind, grpc, args.workers))
    wait_registered([Client(url, args.token) for url in servers], expected, workers)

    cpu_before = cpu_split(proc)
    front_before = front_cpu(proc)
    prefix = f"bench-{os.getpid()}-{int(time.time())}"
    ids = [f"{prefix}-{i}" for i in range(args.executions)]
    began = time.monotonic()

    def starter(mine: list[str], offset: int) -> None:
        client = Client(servers[offset % len(servers)], args.token)
        for n, eid in enumerate(mine):
            if args.rate:
                due = began + (offset + n * args.clients) / args.rate
                time.sleep(max(0.0, due - time.monotonic()))
            status, reply = client.call(
                "POST", "/v1/executions", {"workflow": "BenchHttp", "execution_id": eid}
            )
            assert status == 201, reply

    starters = [
        threading.Thread(target=starter, args=(ids[i :: args.clients], i))
        for i in range(args.clients)
    ]
    for thread in starters:
        thread.start()
    for thread in starters:
        thread.join()
    started = time.monotonic() - began

    latencies: list[int] = []
    first_created, last_finished = None, 0
    for eid in ids:
        state = wait_for(admin, eid, workers)
        latencies.append(state["finished_at_ms"] - state["created_at_ms"])
        created = state["created_at_ms"]
        first_created = created if first_created is None else min(first_created, created)
        last_finished = max(last_finished, state["finished_at_ms"])
    cpu_after = cpu_split(proc)
    front_after = front_cpu(proc)
    stop.set()
    for worker in workers:
        worker.join(10)
    if proc is not None:
        proc.terminate()
        proc.wait(30)
    remove_programs()

    total = (last_finished - (first_created or 0)) / 1000
    report(
        args, server, grpc_addr if grpc else None, started=started, total=total, latencies=latencies
    )
    report_cpu(cpu_before, cpu_after, front_before, front_after, args.executions * args.steps)
    report_traces(receiver, args.executions * (args.steps + 1))


def report(
    args: argparse.Namespace,
    server: str,
    grpc_addr: str | None,
    *,
    started: float,
    total: float,
    latencies: list[int],
) -> None:
    """The run's figures, as chapter 47 prints them."""
    print(f"runtime      {server}")
    if grpc_addr is not None:
        print(f"protocol     gRPC at {grpc_addr}")
    print(f"executions   {args.executions} ({args.steps} task steps each)")
    print(
        f"workers      {args.workers} x {args.concurrency} handler threads, "
        f"{args.clients} client threads"
    )
    print(f"starts       {args.executions / started:.0f}/s")
    print(f"total        {total:.2f}s")
    print(
        f"throughput   {args.executions / total:.0f} executions/s, "
        f"{args.executions * args.steps / total:.0f} steps/s"
    )
    print(
        f"latency      p50 {percentile(latencies, 50)}ms, p90 {percentile(latencies, 90)}ms, "
        f"p99 {percentile(latencies, 99)}ms (start to completion)"
    )


HALF_LOAD_P50_MS = 5


def half_load(args: argparse.Namespace, argv: list[str]) -> None:
    """Flat out, then at half the rate reached, each run a fresh process;
    `--runs` pairs, taken in turns."""
    # The runs take the same options; the last --executions and --rate
    # given win (and --half-load-s and --runs mean nothing without --half-load).
    options = [arg for arg in argv if arg != "--half-load"]
    maxima: list[float] = []
    p50s: list[int] = []
    for _ in range(args.runs):
        flat = _one_run([*options, "--executions", str(args.executions), "--rate", "0"])
        top = float(re.search(r"throughput\s+(\d+) executions/s", flat)[1])  # type: ignore[index]
        rate = top / 2
        count = max(50, int(rate * args.half_load_s))
        half = _one_run([*options, "--executions", str(count), "--rate", f"{rate:.1f}"])
        p50 = int(re.search(r"p50 (\d+)ms", half)[1])  # type: ignore[index]
        maxima.append(top)
        p50s.append(p50)
        print(
            f"run          flat out {top:.0f} executions/s; at {rate:.0f}/s p50 {p50}ms", flush=True
        )
    middle = statistics.median(p50s)
    met = "met" if middle <= HALF_LOAD_P50_MS else "NOT met"
    print(
        f"maximum      {statistics.median(maxima):.0f} executions/s (median of {args.runs} flat-out runs)"
    )
    print(
        f"half load    p50 {middle:g}ms at half of each run's maximum [target <= {HALF_LOAD_P50_MS} ms: {met}]"
    )


def _one_run(options: list[str]) -> str:
    """One run of this benchmark in a fresh process (whose server starts on
    an emptied store: `start_server`)."""
    done = subprocess.run(
        [sys.executable, __file__, *options], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"bench_http: a run failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def report_traces(receiver: multiprocessing.connection.Connection | None, expected: int) -> None:
    """How many spans the OTLP receiver got, once the server has stopped
    (what it had queued was sent on its way out)."""
    if receiver is not None:
        receiver.send("count")
        spans = receiver.recv()
        print(f"traces       {spans} spans received of {expected} (a root and one per step)")


if __name__ == "__main__":
    main()
