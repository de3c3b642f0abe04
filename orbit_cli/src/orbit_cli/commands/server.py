"""`orbit server`: parse the options of chapter 39 and run orbit_server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from orbit_cli.output import CliError
from orbit_server import defaults

# Options of features this server does not have yet: accepted so that a
# configuration written for them is refused with a clear message.
LATER: tuple[tuple[str, str], ...] = ()


def _address(ctx: click.Context, param: click.Parameter, value: str) -> Any:
    from orbit_server.config import Address

    try:
        return Address.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _retention(value: str | None) -> int | None:
    from orbit_core.schedules.times import TimeFormatError, parse_duration

    if not value:
        return None
    try:
        return parse_duration(value)
    except TimeFormatError as exc:
        raise click.BadParameter(f"`{value}`: {exc}") from None


def _extensions(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    from orbit_server.config import WORKER_EXTENSIONS, worker_extensions

    if value is None:
        return WORKER_EXTENSIONS
    try:
        return worker_extensions(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_F = TypeVar("_F", bound=Callable[..., Any])


def _limit(name: str, envvar: str, text: str) -> Callable[[_F], _F]:
    return click.option(
        name,
        envvar=envvar,
        show_envvar=True,
        type=click.IntRange(min=0),
        metavar="N",
        help=f"{text} [default: unlimited]",
    )


@click.command("server", short_help="Run the ORBIT runtime server")
@click.option(
    "--db",
    envvar="ORBIT_DB",
    show_envvar=True,
    default=defaults.DB,
    show_default=True,
    metavar="PATH|URL",
    help="SQLite database file (created if missing), or a postgres:// URL "
    "(ORBIT_DB_CA_CERT: extra CA certificates for its TLS).",
)
@click.option(
    "--addr",
    envvar="ORBIT_ADDR",
    show_envvar=True,
    default=defaults.ADDR,
    show_default=True,
    metavar="IP:PORT",
    callback=_address,
    help="Address of the HTTP API and the worker protocol: an IP address, not a host name.",
)
@click.option(
    "--token",
    envvar="ORBIT_TOKEN",
    show_envvar=True,
    metavar="TOKEN",
    help="Admin bearer token, required on every endpoint except health and readiness.",
)
@click.option(
    "--worker-token",
    envvar="ORBIT_WORKER_TOKEN",
    show_envvar=True,
    metavar="TOKEN",
    help="Shared worker token, accepted only on /v1/workers/* and /v1/tasks/*.",
)
@click.option(
    "--session-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=defaults.SESSION_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="A worker silent this long is lost and its tasks are redelivered.",
)
@click.option(
    "--max-body",
    type=click.IntRange(min=1),
    default=defaults.MAX_BODY,
    show_default=True,
    metavar="BYTES",
    help="Largest request body accepted.",
)
@_limit("--max-active-executions", "ORBIT_MAX_ACTIVE_EXECUTIONS", "Most running executions.")
@_limit("--max-fan-out", "ORBIT_MAX_FAN_OUT", "Most elements one `for` step may fan out to.")
@_limit("--max-history-events", "ORBIT_MAX_HISTORY_EVENTS", "Most history events per execution.")
@_limit(
    "--max-payload-bytes",
    "ORBIT_MAX_PAYLOAD_BYTES",
    "Largest execution input, task result or signal payload, as compact JSON.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default=defaults.LOG_FORMAT,
    show_default=True,
    help="Log format (logs go to stderr; ORBIT_LOG sets the level).",
)
@click.option("--insecure", is_flag=True, help="Allow a non-loopback --addr without a token.")
@click.option(
    "--no-ui",
    is_flag=True,
    envvar="ORBIT_NO_UI",
    show_envvar=True,
    help="Do not serve the web UI at /ui/.",
)
@click.option(
    "--dev",
    is_flag=True,
    envvar="ORBIT_DEV",
    show_envvar=True,
    help="Development server: deploying a changed definition without a version bump replaces "
    "the registered one while no unfinished execution uses it (never in production).",
)
@click.option("--threads", type=click.IntRange(min=4), default=defaults.THREADS, hidden=True)
@click.option(
    "--grpc-addr",
    envvar="ORBIT_GRPC_ADDR",
    show_envvar=True,
    metavar="IP:PORT",
    callback=lambda ctx, param, value: None if not value else _address(ctx, param, value),
    help="Also serve the worker protocol over gRPC on this address, with the HTTP API's "
    "credentials and TLS settings.",
)
@click.option(
    "--workers-file",
    envvar="ORBIT_WORKERS_FILE",
    show_envvar=True,
    metavar="PATH",
    help="TOML file of worker identities ([[worker]]) and client identities ([[client]]). "
    "Requires --token.",
)
@click.option(
    "--tls-cert",
    envvar="ORBIT_TLS_CERT",
    show_envvar=True,
    metavar="PATH",
    help="PEM certificate chain, leaf first: with --tls-key, serve HTTPS.",
)
@click.option(
    "--tls-key",
    envvar="ORBIT_TLS_KEY",
    show_envvar=True,
    metavar="PATH",
    help="PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).",
)
@click.option(
    "--tls-client-ca",
    envvar="ORBIT_TLS_CLIENT_CA",
    show_envvar=True,
    metavar="PATH",
    help="PEM CA of client certificates (mutual TLS): a verified certificate identifies "
    "the workers-file entry whose client_cert it names. Requires --tls-cert.",
)
@click.option(
    "--otlp-endpoint",
    envvar="OTEL_EXPORTER_OTLP_ENDPOINT",
    show_envvar=True,
    metavar="URL",
    help="Export OpenTelemetry traces over OTLP/HTTP to this collector base URL "
    "(OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_HEADERS).",
)
@click.option(
    "--enable-http-adapter",
    is_flag=True,
    help="Let the runtime itself send the requests of `orbit.http.request` steps "
    "(off: they fail with ADAPTER_DISABLED). Anyone who can deploy can then make "
    "this host send HTTP requests.",
)
@click.option(
    "--cluster",
    is_flag=True,
    envvar="ORBIT_CLUSTER",
    show_envvar=True,
    help="Run as one of several servers on the same PostgreSQL database. By default one "
    "leader serves and the others stand by and take over if it fails; see --cluster-mode.",
)
@click.option(
    "--cluster-mode",
    envvar="ORBIT_CLUSTER_MODE",
    show_envvar=True,
    type=click.Choice(["standby", "shared"]),
    default=defaults.CLUSTER_MODE,
    show_default=True,
    help="With --cluster: `standby` (one leader serves, the others stand by) or `shared` "
    "(every server is active and they share executions and worker tasks).",
)
@click.option(
    "--node-timeout",
    envvar="ORBIT_NODE_TIMEOUT",
    show_envvar=True,
    type=float,
    default=defaults.NODE_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Shared mode: a server whose heartbeat is older than this is dead, and the others "
    "take over its executions. Values below 2 are raised to 2.",
)
@click.option(
    "--node-id",
    envvar="ORBIT_NODE_ID",
    show_envvar=True,
    metavar="NODE_ID",
    help="This server's name in the cluster (default: the host name). Must be unique "
    "among running servers. Requires --cluster.",
)
@click.option(
    "--advertise-addr",
    envvar="ORBIT_ADVERTISE_ADDR",
    show_envvar=True,
    metavar="URL",
    help="URL other servers give out to reach this one while it leads (default: from "
    "--addr unless it is a wildcard address). Requires --cluster.",
)
@click.option(
    "--retention",
    envvar="ORBIT_RETENTION",
    show_envvar=True,
    callback=lambda ctx, param, value: _retention(value),
    metavar="DURATION",
    help="Archive, then delete, finished executions that ended longer ago than this "
    "(such as 30d or 12h). Off by default: executions are kept for ever.",
)
@click.option(
    "--idempotency-retention",
    envvar="ORBIT_IDEMPOTENCY_RETENTION",
    show_envvar=True,
    callback=lambda ctx, param, value: _retention(value),
    metavar="DURATION",
    help="How long a start's idempotency key names the execution it started "
    f"[default: {defaults.IDEMPOTENCY_RETENTION_H}h].",
)
@click.option(
    "--archive",
    envvar="ORBIT_ARCHIVE",
    show_envvar=True,
    metavar="DIR",
    help="With --retention: the directory swept executions are archived to "
    f"[default: {defaults.ARCHIVE}], or `none` to delete them without a copy.",
)
@click.option(
    "--worker-extensions",
    envvar="ORBIT_WORKER_EXTENSIONS",
    show_envvar=True,
    callback=_extensions,
    metavar="NAMES",
    help="Worker protocol extensions offered to workers that ask at registration: "
    "`all` (the default), `none`, or a comma-separated list (result-then-poll).",
)
@click.option(
    "--no-worker-extensions",
    is_flag=True,
    help="Offer workers the book's worker protocol only (as --worker-extensions none).",
)
def cli(**options: Any) -> None:
    """Run the ORBIT runtime: the HTTP API and the worker protocol over one
    durable engine. Stop it with Ctrl+C or SIGTERM; in-flight requests finish
    first.

    Without --token the server is open, which it allows only on a loopback
    address (or with --insecure)."""
    from orbit_server.config import ConfigError, ServerConfig, check, missing_tls_partner

    config = ServerConfig(
        db=options["db"],
        addr=options["addr"],
        grpc_addr=options["grpc_addr"],
        # click reads an empty environment variable as unset (chapter 39);
        # an empty --token on the command line stays "" so `check` refuses it.
        token=options["token"],
        worker_token=options["worker_token"],
        session_timeout_s=options["session_timeout"],
        max_body=options["max_body"],
        max_active_executions=options["max_active_executions"],
        max_fan_out=options["max_fan_out"],
        max_history_events=options["max_history_events"],
        max_payload_bytes=options["max_payload_bytes"],
        log_format=options["log_format"],
        insecure=options["insecure"],
        ui=not options["no_ui"],
        threads=options["threads"],
        otlp_endpoint=options["otlp_endpoint"] or None,
        http_adapter=options["enable_http_adapter"],
        unsupported=tuple(flag for flag, key in LATER if options[key] not in (None, False)),
        workers_file=options["workers_file"] or None,
        tls_cert=options["tls_cert"] or None,
        tls_key=options["tls_key"] or None,
        tls_client_ca=options["tls_client_ca"] or None,
        cluster=options["cluster"],
        cluster_mode=options["cluster_mode"],
        node_timeout_s=options["node_timeout"],
        dev=options["dev"],
        node_id=options["node_id"] or None,
        advertise_addr=options["advertise_addr"] or None,
        retention_ms=options["retention"],
        archive=options["archive"] or None,
        **(
            {}
            if options["idempotency_retention"] is None
            else {"idempotency_retention_ms": options["idempotency_retention"]}
        ),
        worker_extensions=() if options["no_worker_extensions"] else options["worker_extensions"],
    )
    usage = missing_tls_partner(config)
    if usage is not None:
        raise click.UsageError(usage)  # chapter 66: a flag that needs another, exit 2
    try:
        # Before the runner's heavy imports, so a refusal is instant.
        config = check(config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    from orbit_server.runner import serve

    raise SystemExit(serve(config))
