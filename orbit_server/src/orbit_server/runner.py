"""`orbit server`: the engine behind gunicorn, in one process tree.

The command's process is gunicorn's arbiter. It checks the configuration,
makes sure the database opens, binds the listener itself (so a busy port is
reported at once, and `--addr 127.0.0.1:0` picks a free one), then forks ONE
worker (`worker.OrbitWorker`: gunicorn's `gthread` with a short path for
kept-alive requests), kept on one CPU. The worker opens the store, recovers
every active execution and only then builds the WSGI app and logs that it
listens: one engine per server. Long polls park on the engine's condition,
each holding one of the worker's threads, so the pool is sized for pollers
plus headroom.

`--db` is a SQLite file or a PostgreSQL URL; `open_store` opens either (the
place where a store of another kind, such as a cluster's fenced one, would
be chosen). The database is checked by the arbiter before it forks
(`_check_database`): a SQLite file is created with a notice naming it if
missing (unless the files it left show it was lost: orbit_store.sqlite),
refused if another process holds its lock, or if it is corrupt or
read-only; a PostgreSQL URL must parse, connect, log in and have its schema
prepared. A refusal is one log line naming the database (a URL's password
hidden, as in every log line: `logs.configure` masks it) and exit status 1.
The worker's store is wrapped in `storage.LoggedStore`, which logs every
storage error and the store's notices (a reconnection to PostgreSQL).

TLS (`--tls-cert`/`--tls-key`, and `--tls-client-ca` for mutual TLS) is
gunicorn's: its `certfile`/`keyfile` settings turn it on, and its
`ssl_context` hook hands it the context `tls.server_context` builds once per
worker process. TLS connections take gunicorn's own path through the worker
(`worker.OrbitWorker` keeps its short path for plain HTTP).

With `--grpc-addr` the worker also starts the gRPC binding of the worker
protocol (`grpc_server.GrpcServer`, grpcio's own threads) over the same
engine and `WorkerCalls` as the HTTP routes, after recovery and before the
HTTP listening line; the arbiter checks its port first, as for `--addr`.
A cluster node's engine changes (a standby's read-only one, the leader's
after an election), so its gRPC binding asks for the calls of the engine
serving at each call (`_node_calls`), which are those its HTTP app uses; a
standby refuses every call with NOT_LEADER, as it refuses HTTP writes.

SIGINT and SIGTERM both stop gracefully: the arbiter logs `shutting down`,
the listener closes, the worker drains the engine (`Engine.drain`: parked
long polls answer 204 and waits the current state at once, and later ones do
not park; the gRPC server takes no new calls), in-flight requests and
calls finish, the engine closes, exit status 0. The
worker dies with the arbiter (PR_SET_PDEATHSIG), so a SIGKILL of `orbit
server` stops everything at once, as a crash would.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import resource
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

import falcon
from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter
from gunicorn.glogging import Logger as GunicornLogger
from gunicorn.sock import TCP6Socket, TCPSocket

from orbit_core.decide import Limits
from orbit_core.engine import MAX_WAIT_MS, Engine, tune_process
from orbit_core.engine.facade import EngineApi
from orbit_core.engine.handoff import Sharing
from orbit_core.errors import OrbitError
from orbit_core.ports import Store
from orbit_server import logs, tls, worker_loop
from orbit_server.app import create_app, worker_calls
from orbit_server.archive import open_archive
from orbit_server.auth import Credentials
from orbit_server.batches import Batches
from orbit_server.cluster import ClusterNode, advertise_default, node_id_default
from orbit_server.config import Address, ConfigError, ServerConfig, check, startup_warnings
from orbit_server.faults import LoggedFaults
from orbit_server.front_link import FrontedLoop
from orbit_server.http_adapter import HttpAdapter
from orbit_server.identities import Identities
from orbit_server.resources.health import ClusterView
from orbit_server.retention import Sweeper
from orbit_server.shared import SharedNode
from orbit_server.skewed_clock import clock_from_env
from orbit_server.storage import LoggedStore
from orbit_server.telemetry import Telemetry
from orbit_server.trace_export import TraceForwarder
from orbit_server.tracing import TracingSettings
from orbit_server.worker import OrbitWorker
from orbit_server.worker_calls import WorkerCalls
from orbit_server.worker_loop import WorkerLoop

if TYPE_CHECKING:
    from orbit_server.grpc_server import GrpcServer
from orbit_core.schedules.times import format_duration
from orbit_store.postgres import PostgresStore
from orbit_store.sql import SqlStore
from orbit_store.sqlite import SqliteStore

# Idle keep-alive connections stay open this long: workers poll and heartbeat
# continuously, so reusing their connections saves a TCP handshake per call.
KEEPALIVE_S = 75
# Connections the worker keeps open at once; beyond this it stops accepting
# and new clients (health probes too) wait in the listen backlog. Idle ones
# cost a descriptor and a selector entry, no thread (worker.py), so the bound
# is high, and the process's descriptor limit is raised to fit it.
MAX_CONNECTIONS = 10_000
# Shutdown waits for the longest request the API allows: a /wait.
GRACEFUL_TIMEOUT_S = MAX_WAIT_MS // 1000 + 5
GRACEFUL_TIMEOUT_TLS_S = 10
_PR_SET_PDEATHSIG = 1
# A restarted server waits this long for the one it replaces to finish exiting
# (and release the database) before it refuses to start.
LOCK_WAIT_S = 3.0


def serve(config: ServerConfig) -> int:
    """Runs the server until it is stopped; returns the process exit status."""
    try:
        config = check(config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    logs.configure(
        config.log_format,
        logs.parse_filter(os.environ.get("ORBIT_LOG")),
        secret_url=config.db if config.backend == "postgres" else None,
        secrets=tuple(t for t in (config.token, config.worker_token) if t is not None),
    )
    log = logs.logger()
    log.info(
        "starting ORBIT runtime",
        db=config.db_display,
        backend=logs.Quoted(config.backend),
        http_adapter=config.http_adapter,
        auth=config.auth,
        ui=config.ui,
    )
    if config.identities is not None:
        log.info(
            "loaded the workers file",
            path=config.workers_file,
            workers=len(config.identities.workers),
            clients=len(config.identities.clients),
        )
    for warning in startup_warnings(config):
        log.warning(warning)
    if not _check_database(config, log):
        return 1
    try:
        listener = _listen(config.addr)
    except OSError as exc:
        log.error(f"cannot listen on {config.addr}: {exc.strerror or exc}")
        return 1
    if config.grpc_addr is not None and config.grpc_addr.port != 0:
        # The worker binds it; a busy port is reported now, before the fork.
        try:
            _listen(config.grpc_addr).close()
        except OSError as exc:
            log.error(f"cannot listen on {config.grpc_addr}: {exc.strerror or exc}")
            listener.close()
            return 1
    host, port = listener.getsockname()[:2]
    bound = Address(host, port)
    arbiter = os.getpid()
    try:
        OrbitApplication(config, listener, bound).run()
    except SystemExit as exc:
        if os.getpid() != arbiter:
            # The forked worker unwinds through here: its status (a boot
            # error is 3) is what tells the arbiter to stop, not restart it.
            raise
        return _exit_now(0 if exc.code in (None, 0) else 1)
    return _exit_now(0)


def _exit_now(code: int) -> NoReturn:
    """Ends the arbiter once its worker is gone. Nothing is left to clean up
    (the worker closed the store; the arbiter holds no connection), and
    tearing the interpreter down (its modules, their objects) took most of
    a second of a stop, more on a busy machine: the output is flushed and
    the process exits at once (issue 36)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _listen(addr: Address) -> socket.socket:
    family = socket.AF_INET6 if addr.family_is_v6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((addr.host, addr.port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def open_store(config: ServerConfig, *, first: bool = False) -> SqlStore:
    """The store `--db` names. `first`: the arbiter's open before the fork,
    which checks a SQLite file (and waits for a lock held by a server still
    exiting); the worker's second open skips that."""
    if config.backend == "postgres":
        return PostgresStore(config.db, ca_cert=os.environ.get("ORBIT_DB_CA_CERT") or None)
    if first:
        return SqliteStore(config.db, lock_wait_s=LOCK_WAIT_S)
    return SqliteStore(config.db, verify=False)


def _check_database(config: ServerConfig, log: Any) -> bool:
    """Opens the database once before the worker is forked. A SQLite file is
    created (with a notice naming it) or found, locked, checked for
    corruption and written to; a PostgreSQL URL is checked, connected to and
    its schema prepared. Any failure stops the start with one clear line."""
    try:
        store = open_store(config, first=True)
    except OrbitError as exc:
        log.error("cannot open the database", db=config.db_display, error=exc.message)
        return False
    try:
        if isinstance(store, SqliteStore):
            if store.replaced_missing:
                log.warning(
                    f"created new database at {store.path}",
                    note="its lock file shows a database was used there before",
                )
            elif store.created:
                log.info(f"created new database at {store.path}")
        elif store.found_version == 0:
            log.info("created the schema", db=config.db_display)
    finally:
        store.close()
    return True


def make_telemetry(config: ServerConfig) -> Telemetry:
    """What the server derives from commits; with `--otlp-endpoint` its
    tracing starts the exporting process (`trace_export`). One per worker
    process: a cluster node's successive engines share it."""
    settings = TracingSettings.from_env(config.otlp_endpoint, os.environ)
    if settings is None:
        return Telemetry()
    tracer = TraceForwarder(settings, config.log_format)
    logs.logger().info(
        "exporting OpenTelemetry traces",
        endpoint=settings.endpoint,
        service=settings.service_name,
    )
    return Telemetry(tracer)


def build_engine(
    config: ServerConfig,
    store: Store | None = None,
    sharing: Sharing | None = None,
    telemetry: Telemetry | None = None,
) -> Engine:
    """The engine on `store`, or on the store `--db` names (the arbiter
    checked it just before forking: `_check_database`); `sharing`: a shared
    server's (orbit_core/engine/handoff.py)."""
    if telemetry is None:
        telemetry = make_telemetry(config)
    if store is None:
        store = open_store(config)
    if isinstance(telemetry.tracing, TraceForwarder):
        telemetry.tracing.attach(store)
    return Engine(
        LoggedStore(store, config.db_display, telemetry),
        limits=Limits(config.max_fan_out, config.max_history_events, config.max_payload_bytes),
        max_active_executions=config.max_active_executions,
        session_timeout_ms=config.session_timeout_ms,
        # LoggedStore logs storage errors already; faults still counts them.
        faults=LoggedFaults(quiet=frozenset({"store"})),
        builtins=HttpAdapter() if config.http_adapter else None,
        sharing=sharing,
        clock=clock_from_env(),
        idempotency_retention_ms=config.idempotency_retention_ms,
    )


def _sweeper(config: ServerConfig, store: SqlStore | None, log: Any) -> Sweeper | None:
    """`--retention`'s sweeper on the engine's store (not started yet); a
    cluster server's has none until its node attaches one (a standby
    cluster's leader, every shared server)."""
    if config.retention_ms is None:
        return None
    try:
        archive = open_archive(config.archive_location)
    except OSError as exc:
        raise OrbitError(
            f"cannot open the archive {config.archive_location}: {exc.strerror or exc}"
        ) from None
    log.info(
        "retention is on",
        retention=format_duration(config.retention_ms),
        archive=archive.location,
    )
    return Sweeper(store, archive, config.retention_ms, log=log)


class _NodeParts(TypedDict):
    """The parts `ClusterNode` and `SharedNode` take besides the config."""

    node_id: str
    advertise_addr: str | None
    build_engine: Callable[[Store, Sharing | None], Engine]
    make_app: Callable[[EngineApi, ClusterView], Callable[[dict[str, Any], Any], Iterable[bytes]]]
    sweeper: Sweeper | None
    batches: Batches | None


class OrbitApplication(BaseApplication):  # type: ignore[misc]
    """gunicorn's application interface around one engine."""

    def __init__(self, config: ServerConfig, listener: socket.socket, bound: Address) -> None:
        self.config = config
        self.listener = listener
        self.bound = bound
        self.engine: Engine | None = None
        self.grpc: GrpcServer | None = None
        self.cluster: ClusterNode | None = None
        self.shared: SharedNode | None = None
        self.telemetry: Telemetry | None = None
        self.sweeper: Sweeper | None = None
        self.batches: Batches | None = None
        self._tls_context: ssl.SSLContext | None = None
        # A cluster node's current engine and its worker calls (_node_calls).
        self._calls_lock = threading.Lock()
        self._engine_calls: tuple[EngineApi, WorkerCalls] | None = None
        # The worker calls of a single server's engine (the worker loop's).
        self.calls: WorkerCalls | None = None
        super().__init__(prog="orbit server")

    def load_config(self) -> None:
        settings: dict[str, Any] = {
            "bind": [str(self.bound)],
            "workers": 1,
            "worker_class": OrbitWorker,
            "threads": self.config.threads,
            "worker_connections": _connection_limit(),
            "keepalive": KEEPALIVE_S,
            "graceful_timeout": GRACEFUL_TIMEOUT_S,
            # Recovery may take long on a big database, and a restarted
            # worker would only recover again: never time the worker out.
            "timeout": 0,
            "logger_class": GunicornLog,
            "accesslog": None,
            # No proxy is trusted to rewrite the scheme or the client address
            # (and the per-request check is cheapest with nothing to match).
            "forwarded_allow_ips": "",
            "proc_name": "orbit",
            "post_fork": _post_fork,
            "worker_exit": self._worker_exit,
            "control_socket_disable": True,
        }
        if self.config.tls_cert is not None:
            settings["certfile"] = self.config.tls_cert
            settings["keyfile"] = self.config.tls_key
            settings["ssl_context"] = self._ssl_context
            # Shutdown gives open TLS connections this long (chapter 39).
            settings["graceful_timeout"] = GRACEFUL_TIMEOUT_TLS_S
        for name, value in settings.items():
            if name in self.cfg.settings:
                self.cfg.set(name, value)

    def load(self) -> falcon.App[falcon.Request, falcon.Response] | ClusterNode | SharedNode:
        """Runs in the worker, after the fork: open, recover, then serve."""
        log = logs.logger()
        tune_process()
        _pin_to_one_cpu()
        self.telemetry = make_telemetry(self.config)
        if self.config.cluster:
            try:
                self.sweeper = _sweeper(self.config, None, log)
            except OrbitError as exc:
                log.error("cannot start the runtime", error=exc.message)
                sys.exit(Arbiter.WORKER_BOOT_ERROR)
            # Batch operations: the node attaches the engine and store its
            # role allows (docs/operating-executions.md).
            self.batches = Batches(log=log)
            self.batches.start()
            node: ClusterNode | SharedNode = (
                self._load_shared()
                if self.config.cluster_mode == "shared"
                else self._load_cluster()
            )
            if self.sweeper is not None:
                self.sweeper.start()  # it sweeps once its node attaches a store
            return node
        try:
            store = open_store(self.config)
            self.engine = build_engine(self.config, store, telemetry=self.telemetry)
            self.sweeper = _sweeper(self.config, store, log)
        except OrbitError as exc:
            log.error("cannot start the runtime", error=exc.message)
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
        log.info(
            "recovered active executions from history",
            executions=self.engine.recovered_executions,
            in_flight=self.engine.recovered_in_flight,
        )
        if self.sweeper is not None:
            self.sweeper.start()
        # Batch operations work on the engine's store beside the engine,
        # acting through its calls (docs/operating-executions.md).
        self.batches = Batches(self.engine, store, log=log)
        self.batches.start()
        calls = worker_calls(self.engine, extensions=self.config.worker_extensions)
        self.calls = calls
        app = create_app(
            self.engine, self.config, calls=calls, retention=self.sweeper, batches=self.batches
        )
        if self.config.grpc_addr is not None:
            self._start_grpc(calls, log)
        self._log_listening()
        return app

    def _node_parts(self) -> _NodeParts:
        """What a node of either cluster mode is built from."""
        config, telemetry = self.config, self.telemetry
        return {
            "node_id": config.node_id or node_id_default(),
            "advertise_addr": advertise_default(config, self.bound),
            "build_engine": lambda store, sharing: build_engine(config, store, sharing, telemetry),
            "make_app": lambda engine, view: create_app(
                engine,
                config,
                cluster=view,
                calls=self._calls_of(engine),
                retention=self.sweeper,
                batches=self.batches,
            ),
            "sweeper": self.sweeper,
            "batches": self.batches,
        }

    def _calls_of(self, engine: EngineApi) -> WorkerCalls:
        """The worker calls of a node's engine: one per engine, shared by
        its HTTP app and the gRPC binding."""
        with self._calls_lock:
            if self._engine_calls is None or self._engine_calls[0] is not engine:
                self._engine_calls = (
                    engine,
                    worker_calls(engine, extensions=self.config.worker_extensions),
                )
            return self._engine_calls[1]

    def _node_calls(self) -> WorkerCalls:
        """For the gRPC binding of a cluster node: the calls of the engine
        serving now; NotLeader while a standby-mode node does not lead."""
        if self.cluster is not None:
            if not self.cluster.serving():
                raise self.cluster.not_leader()
            return self._calls_of(self.cluster.engine)
        assert self.shared is not None
        return self._calls_of(self.shared.engine)

    def _load_cluster(self) -> ClusterNode:
        """A cluster server (orbit_server/cluster.py) starts as a standby,
        listens at once and joins the election."""
        try:
            node = ClusterNode(self.config, **self._node_parts())
        except OrbitError as exc:
            logs.logger().error("cannot start the runtime", error=exc.message)
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
        self.cluster = node
        node.start()
        if self.config.grpc_addr is not None:
            self._start_grpc(self._node_calls, logs.logger())
        self._log_listening()
        return node

    def _load_shared(self) -> SharedNode:
        """A shared-mode server (orbit_server/shared.py): takes its node id,
        resumes what it owned, and serves every route."""
        try:
            node = SharedNode(self.config, **self._node_parts())
        except OrbitError as exc:
            logs.logger().error(f"cannot join the shared cluster: {exc.code}: {exc.message}")
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
        self.shared = node
        node.start()
        if self.config.grpc_addr is not None:
            self._start_grpc(self._node_calls, logs.logger())
        self._log_listening()
        return node

    def _log_listening(self) -> None:
        log = logs.logger()
        if self.config.dev:
            log.warning(
                "development server: a deploy may replace a definition of the same version "
                "while no unfinished execution uses it"
            )
        if self.config.tls:
            log.info(
                "ORBIT runtime listening",
                addr=str(self.bound),
                tls=True,
                mtls=self.config.tls_client_ca is not None,
                ui=self.config.ui,
            )
        else:
            log.info("ORBIT runtime listening", addr=str(self.bound), tls=False, ui=self.config.ui)

    def _start_grpc(self, calls: WorkerCalls | Callable[[], WorkerCalls], log: Any) -> None:
        # Imported here: grpcio is only loaded by servers that serve gRPC.
        from orbit_server.grpc_server import GrpcServer

        self.grpc = GrpcServer(self.config, calls)
        try:
            bound = self.grpc.start()
        except OSError as exc:
            log.error(f"cannot listen on {self.config.grpc_addr}: {exc}")
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
        log.info("gRPC worker protocol listening", addr=str(bound), tls=self.config.tls)

    def worker_loop(self, **hooks: Any) -> WorkerLoop | None:
        """The worker loop of a single plain-HTTP server (worker_loop.py;
        with its HTTP in the front process unless `worker_loop.mode()` says
        otherwise), not started; None for TLS, a cluster node, or
        `ORBIT_WORKER_LOOP=off`."""
        calls = self.calls
        config = self.config
        mode = worker_loop.mode()
        if calls is None or config.tls or mode == "off":
            return None
        desk = calls.batched
        if desk is None:
            return None
        credentials = Credentials(
            config.token, config.worker_token, config.identities or Identities()
        )
        # Starts too, on a server whose start route is the engine's alone: a
        # sweeper reads the start's `retention` field, which the loop does not.
        start = desk.start_call if self.sweeper is None else None
        front = {name: hooks.pop(name) for name in ("reader", "server_header") if name in hooks}
        if mode == "front":
            return FrontedLoop(
                calls, desk, credentials, config.max_body, start=start, **hooks, **front
            )
        return WorkerLoop(calls, desk, credentials, config.max_body, start=start, **hooks)

    def drain(self) -> None:
        """Shutdown has begun: parked polls and waits end at once (HTTP and
        gRPC), and the gRPC server takes no new calls."""
        if self.engine is not None:
            self.engine.drain()
        if self.cluster is not None:
            self.cluster.drain()
        if self.shared is not None:
            self.shared.drain()
        if self.grpc is not None:
            self.grpc.stop()

    def _ssl_context(self, conf: Any, default_factory: Any) -> ssl.SSLContext:
        """gunicorn asks for a context per connection: the worker's one."""
        context = self._tls_context
        if context is None:
            assert self.config.tls_cert is not None
            context = tls.server_context(
                self.config.tls_cert, self.config.tls_key, self.config.tls_client_ca
            )
            self._tls_context = context
        return context

    def run(self) -> None:
        arbiter = OrbitArbiter(self)
        kind = TCP6Socket if self.bound.family_is_v6 else TCPSocket
        address = (self.bound.host, self.bound.port)
        arbiter.LISTENERS = [kind(address, self.cfg, arbiter.log, self.listener.detach())]
        arbiter.run()

    def _worker_exit(self, server: Any, worker: Any) -> None:
        if self.grpc is not None:
            self.grpc.wait_stopped()
            self.grpc = None
        if self.batches is not None:
            # Before the engine it acts through closes.
            self.batches.stop()
            self.batches = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None
        if self.shared is not None:
            self.shared.close()
            self.shared = None
        if self.sweeper is not None:
            self.sweeper.close()
            self.sweeper = None
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        if self.telemetry is not None and self.telemetry.tracing is not None:
            self.telemetry.tracing.close()  # what is queued goes out (10 s at most)
            self.telemetry = None


class OrbitArbiter(Arbiter):  # type: ignore[misc]
    """SIGINT stops as gracefully as SIGTERM (gunicorn treats it as a quick stop)."""

    def handle_term(self) -> None:
        logs.logger().info("shutting down")
        raise StopIteration

    handle_int = handle_term


def _pin_to_one_cpu() -> None:
    """Keeps the worker process on the CPU it runs on now (Linux).

    One GIL runs the engine and every request thread, so the process never
    uses more than one CPU for Python, but its threads hand the GIL to one
    another several times per request. Spread over CPUs, each hand-off wakes
    a thread on another CPU with cold caches; on one CPU the same hand-offs
    are cheap switches. Measured with bench_http on 2 cores: about 1.5x the
    steps/s. The CPU it already runs on is the one the scheduler chose, so
    several servers on one machine do not all crowd onto the same CPU.

    The threads are also SCHED_BATCH: a thread woken by another (a group's
    leader answering each caller, a commit waking a long poll) does not
    preempt the waker, which still holds the GIL and would be descheduled
    only for the woken thread to find the GIL taken. About 10 % more
    steps/s and less CPU per step with bench_http (6 of 7 alternated pairs).
    """
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        stat = Path("/proc/self/stat").read_text()
        cpu = int(stat[stat.rindex(")") + 2 :].split()[36])
        if cpu in os.sched_getaffinity(0):
            # Per thread on Linux: those started later inherit it.
            for thread in Path("/proc/self/task").iterdir():
                os.sched_setaffinity(int(thread.name), {cpu})
                os.sched_setscheduler(int(thread.name), os.SCHED_BATCH, os.sched_param(0))
    except (OSError, ValueError, IndexError):
        return


def _connection_limit() -> int:
    """`MAX_CONNECTIONS`, or fewer if the process may not open that many
    descriptors even after raising its soft limit to the hard one (a few
    are kept for the database, logs and the listener)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = MAX_CONNECTIONS + 256
        if soft != resource.RLIM_INFINITY and soft < wanted:
            raised = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
    except (OSError, ValueError):
        return 1000
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(100, min(MAX_CONNECTIONS, soft - 256))


def _post_fork(server: Any, worker: Any) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server.pid:
        os._exit(1)


class GunicornLog(GunicornLogger):  # type: ignore[misc]
    """gunicorn's own messages through structlog: its chatter (booting,
    listening at) is debug, its warnings and errors stay what they are."""

    def setup(self, cfg: Any) -> None:
        self.cfg = cfg

    def _emit(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if level < logging.WARNING and not logs.enabled(logging.DEBUG, target="gunicorn"):
            return
        text = msg % args if args else str(msg)
        log = logs.logger().bind(target="gunicorn")
        if level >= logging.ERROR:
            log.error(text, exc_info=kwargs.get("exc_info"))
        elif level >= logging.WARNING:
            log.warning(text)
        else:
            log.debug(text)

    def critical(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._emit(logging.CRITICAL, msg, *args, **kwargs)

    def error(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._emit(logging.ERROR, msg, *args, **kwargs)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._emit(logging.WARNING, msg, *args, **kwargs)

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._emit(logging.INFO, msg, *args, **kwargs)

    def debug(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._emit(logging.DEBUG, msg, *args, **kwargs)

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._emit(logging.ERROR, msg, *args, exc_info=True)

    def log(self, lvl: Any, msg: str, *args: Any, **kwargs: Any) -> None:
        level = self.LOG_LEVELS.get(lvl.lower(), logging.INFO) if isinstance(lvl, str) else lvl
        self._emit(level, msg, *args, **kwargs)

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        return None
