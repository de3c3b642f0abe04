"""The server's configuration and the combinations it refuses to start with.

`ServerConfig` is what `orbit server` parsed from its flags and environment;
`check` applies chapter 39's refusals before anything is opened, raising
`ConfigError` with the message the server prints before exiting with status 1.

Tokens: an empty environment variable counts as unset (chapter 39), but an
explicit empty `--token ""` (typically `--token "$VAR"` with VAR unset) is
refused rather than read as "no authentication"; so is a token no client
could present (blank, surrounded by whitespace, or with characters outside
printable ASCII, which HTTP clients encode differently or not at all).
`startup_warnings` lists what is allowed but unwise, logged at start.

The workers file is read and validated by `check`, which returns the
configuration with its `identities`, so it is read once, before the server
forks; TLS files are loaded into a context there too (`tls.server_context`),
so a missing or mismatched certificate or key stops the start with a message
naming the file.
"""

from __future__ import annotations

import ipaddress
import re

import attrs

from orbit_server import defaults
from orbit_server import identities as _identities
from orbit_store.urls import is_postgres, redact

# Below this a token is likely typed by hand (a word, a short phrase) rather
# than generated: 16 random characters carry 64 bits even as hex, beyond any
# online guessing; `orbit token` prints 64.
MIN_TOKEN_LENGTH = 16
# The worker protocol extensions this server knows (docs/worker-protocol.md):
# offered to a worker that asks for them at registration, unless turned off
# with --no-worker-extensions (or ORBIT_WORKER_EXTENSIONS=none).
WORKER_EXTENSIONS: tuple[str, ...] = ("result-then-poll",)
_NODE_ID = re.compile(r"^[A-Za-z0-9._-]{1,63}$")
_ADDR = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<v4>[^:\[\]]+)):(?P<port>[0-9]{1,5})$")


class ConfigError(Exception):
    """A configuration the server refuses; the message is printed as is."""


@attrs.frozen
class Address:
    """An `ip:port` listen address (`[v6]:port` for IPv6)."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Address:
        match = _ADDR.match(text.strip())
        if match is None:
            raise ValueError(f"`{text}` is not an ip:port address (for example 127.0.0.1:7233)")
        host = match["v6"] or match["v4"]
        port = int(match["port"])
        try:
            ipaddress.ip_address(host)
        except ValueError:
            if host.lower() == "localhost":
                hint = (
                    f"use 127.0.0.1:{port} to listen on this machine only, "
                    f"or 0.0.0.0:{port} for all interfaces"
                )
            else:
                hint = f"use 0.0.0.0:{port} or [::]:{port} for all interfaces"
            raise ValueError(
                f"`{text}` is not an ip:port address: `{host}` is not an IP address ({hint})"
            ) from None
        if port > 65535:
            raise ValueError(f"`{text}` is not an ip:port address: port {port} is out of range")
        return cls(host, port)

    @property
    def is_loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback

    @property
    def family_is_v6(self) -> bool:
        return ipaddress.ip_address(self.host).version == 6

    def __str__(self) -> str:
        host = f"[{self.host}]" if self.family_is_v6 else self.host
        return f"{host}:{self.port}"


@attrs.frozen
class ServerConfig:
    """Everything `orbit server` was started with. Tokens are None when unset
    (an empty environment variable is unset); limits are None when unlimited."""

    db: str = defaults.DB
    addr: Address = attrs.field(factory=lambda: Address.parse(defaults.ADDR))
    # --grpc-addr: also serve the worker protocol over gRPC there.
    grpc_addr: Address | None = None
    token: str | None = None
    worker_token: str | None = None
    session_timeout_s: float = defaults.SESSION_TIMEOUT_S
    max_body: int = defaults.MAX_BODY
    max_active_executions: int | None = None
    max_fan_out: int | None = None
    max_history_events: int | None = None
    max_payload_bytes: int | None = None
    log_format: str = defaults.LOG_FORMAT
    insecure: bool = False
    ui: bool = True
    threads: int = defaults.THREADS
    # --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT): trace export is on when set.
    otlp_endpoint: str | None = None
    # --enable-http-adapter: run `orbit.http.request` steps in the runtime.
    http_adapter: bool = False
    # Options of features that later releases of this server add; set here
    # only so `check` can refuse them with a clear message.
    unsupported: tuple[str, ...] = ()
    workers_file: str | None = None
    # The workers file's entries, once `check` has read it.
    identities: _identities.Identities | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    cluster: bool = False
    cluster_mode: str = defaults.CLUSTER_MODE
    # --node-timeout: shared mode's silence after which a server is dead
    # (values below 2 are raised to 2, as chapter 39 says).
    node_timeout_s: float = defaults.NODE_TIMEOUT_S
    # --dev: a deploy may replace a definition of the same version that no
    # unfinished execution uses (beyond the book; off by default).
    dev: bool = False
    # --node-id and --advertise-addr (None: the host name, and the --addr
    # the server bound when it is not a wildcard address).
    node_id: str | None = None
    advertise_addr: str | None = None
    # The worker protocol extensions offered (beyond the book; all by default).
    worker_extensions: tuple[str, ...] = WORKER_EXTENSIONS
    # --retention (beyond the book): finished executions older than this are
    # archived to --archive (a directory, or `none`) and deleted.
    retention_ms: int | None = None
    archive: str | None = None
    # --idempotency-retention (beyond the book): how long a start's
    # idempotency key names its execution (docs/language/flow-control.md).
    idempotency_retention_ms: int = defaults.IDEMPOTENCY_RETENTION_H * 3600 * 1000

    @property
    def archive_location(self) -> str:
        """Where retention archives to: --archive, by default `orbit-archive`."""
        return self.archive if self.archive is not None else defaults.ARCHIVE

    @property
    def auth(self) -> bool:
        return self.token is not None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def session_timeout_ms(self) -> int:
        return max(1, round(self.session_timeout_s * 1000))

    @property
    def backend(self) -> str:
        return "postgres" if is_postgres(self.db) else "sqlite"

    @property
    def db_display(self) -> str:
        """`db` as logs and errors show it: a URL's password is hidden."""
        return redact(self.db, self.db) if self.backend == "postgres" else self.db


def _tokens(config: ServerConfig) -> list[tuple[str, str, str]]:
    """(flag, what it is, value) of each token that is set."""
    tokens = [("--token", "admin token", config.token)]
    tokens.append(("--worker-token", "shared worker token", config.worker_token))
    return [(flag, what, value) for flag, what, value in tokens if value is not None]


def _check_token(flag: str, value: str) -> None:
    if not value:
        raise ConfigError(
            f"{flag} is empty (set from an unset variable?); pass a long random value "
            f"(`orbit token` prints one), or leave {flag} out"
        )
    if not value.strip():
        raise ConfigError(f"{flag} is only whitespace; pass a long random value (`orbit token`)")
    if value != value.strip():
        raise ConfigError(
            f"{flag} starts or ends with whitespace, which clients cannot send in a header; "
            "remove it (a value read from a file often ends with a newline)"
        )
    if not all(" " <= c <= "~" for c in value):
        raise ConfigError(
            f"{flag} must be printable ASCII: clients cannot all send other characters "
            "in a header (`orbit token` prints a token that fits)"
        )


def startup_warnings(config: ServerConfig) -> list[str]:
    """What the server accepts but logs a warning about at start."""
    warnings = [
        f"the {what} ({flag}) is shorter than {MIN_TOKEN_LENGTH} characters and may be "
        "guessed; use a long random value (`orbit token` prints one)"
        for flag, what, value in _tokens(config)
        if len(value) < MIN_TOKEN_LENGTH
    ]
    if config.retention_ms is not None and config.archive_location == "none":
        warnings.append(
            "--archive none: finished executions older than the retention are DELETED "
            "without a copy and cannot be read afterwards"
        )
    return warnings


def check(config: ServerConfig) -> ServerConfig:
    """Chapter 39's refusals, in the book's order, after the tokens' own (so
    that an empty --token is not reported as a missing one); raises
    ConfigError. Returns the configuration with the workers file read."""
    for flag, _, value in _tokens(config):
        _check_token(flag, value)
    if not config.addr.is_loopback and not config.auth and not config.insecure:
        raise ConfigError(
            f"refusing to listen on {config.addr} without authentication; "
            "pass --token (or ORBIT_TOKEN), or --insecure for trusted networks"
        )
    grpc = config.grpc_addr
    if grpc is not None and not grpc.is_loopback and not config.auth and not config.insecure:
        raise ConfigError(
            f"refusing to serve gRPC on {grpc} without authentication; "
            "pass --token (or ORBIT_TOKEN), or --insecure for trusted networks"
        )
    if config.worker_token is not None and config.token is None:
        raise ConfigError(
            "--worker-token requires --token: without an admin token every endpoint would be open"
        )
    if config.worker_token is not None and config.worker_token == config.token:
        raise ConfigError("--worker-token must differ from --token")
    if config.workers_file is not None and config.token is None:
        raise ConfigError(
            "--workers-file requires --token: without an admin token "
            "administrative endpoints would be open"
        )
    config = _read_workers_file(config)
    _check_tls(config)
    _check_cluster(config)
    _check_retention(config)
    unsupported = config.unsupported
    if unsupported:
        names = ", ".join(unsupported)
        raise ConfigError(f"{names}: not supported yet by this version of orbit server")
    return config


def worker_extensions(text: str) -> tuple[str, ...]:
    """The extensions named by `--worker-extensions`: `none` (or nothing),
    `all`, or a comma-separated list of known names; ValueError otherwise."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if names in ([], ["none"]):
        return ()
    if names == ["all"]:
        return WORKER_EXTENSIONS
    unknown = [name for name in names if name not in WORKER_EXTENSIONS]
    if unknown:
        known = ", ".join(WORKER_EXTENSIONS)
        raise ValueError(f"unknown worker protocol extension `{unknown[0]}` (known: {known})")
    return tuple(name for name in WORKER_EXTENSIONS if name in names)


def _check_cluster(config: ServerConfig) -> None:
    """The cluster options' refusals (chapter 44)."""
    if config.cluster and config.backend == "sqlite":
        raise ConfigError(
            "--cluster requires a PostgreSQL database (--db postgres://...): "
            "the servers share it for leader election and history"
        )
    if config.cluster_mode == "shared" and not config.cluster:
        raise ConfigError("--cluster-mode shared requires --cluster")
    for flag, given in (("--node-id", config.node_id), ("--advertise-addr", config.advertise_addr)):
        if given is not None and not config.cluster:
            raise ConfigError(f"{flag} requires --cluster")
    if config.node_id is not None and not _NODE_ID.match(config.node_id):
        raise ConfigError(
            f"--node-id `{config.node_id}` must be 1 to 63 letters, digits, '.', '_' or '-'"
        )
    if config.advertise_addr is not None and not config.advertise_addr.startswith(
        ("http://", "https://")
    ):
        raise ConfigError(
            f"--advertise-addr `{config.advertise_addr}` must be an http:// or https:// URL"
        )


def _check_retention(config: ServerConfig) -> None:
    if config.archive is not None and config.retention_ms is None:
        raise ConfigError("--archive requires --retention (or ORBIT_RETENTION)")
    if config.idempotency_retention_ms <= 0:
        raise ConfigError("--idempotency-retention must be longer than 0s")
    if config.retention_ms is not None and config.retention_ms <= 0:
        raise ConfigError("--retention must be longer than 0s")


def _read_workers_file(config: ServerConfig) -> ServerConfig:
    if config.workers_file is None or config.identities is not None:
        return config
    try:
        found = _identities.load(config.workers_file)
    except _identities.WorkersFileError as exc:
        raise ConfigError(f"{config.workers_file}: {exc}") from None
    return attrs.evolve(config, identities=found)


def missing_tls_partner(config: ServerConfig) -> str | None:
    """A TLS flag given without the one it needs, or None. `orbit server`
    reports it as invalid usage (exit 2, chapter 66) before `check`, which
    refuses it too for configurations built in code."""
    if config.tls_cert is not None and config.tls_key is None:
        return "--tls-cert requires --tls-key (the certificate's private key)"
    if config.tls_key is not None and config.tls_cert is None:
        return "--tls-key requires --tls-cert"
    if config.tls_client_ca is not None and config.tls_cert is None:
        return (
            "--tls-client-ca requires --tls-cert and --tls-key: "
            "client certificates are only seen over TLS"
        )
    return None


def _check_tls(config: ServerConfig) -> None:
    problem = missing_tls_partner(config)
    if problem is not None:
        raise ConfigError(problem)
    certificates = config.identities is not None and config.identities.has_certificates
    if config.tls_client_ca is not None and not certificates:
        raise ConfigError(
            "--tls-client-ca needs --workers-file entries with `client_cert` "
            "to map certificates to workers"
        )
    if config.tls_cert is not None:
        from orbit_server import tls

        try:
            tls.server_context(config.tls_cert, config.tls_key, config.tls_client_ca)
        except tls.TlsError as exc:
            raise ConfigError(str(exc)) from None
