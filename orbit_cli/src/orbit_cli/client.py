"""The HTTP client the runtime commands share.

It knows the connection options (`--server`, `--token`, `--ca-cert`,
`--client-cert`, `--client-key` and their environment variables), turns the
API's error envelope into `error: CODE (status): message`, explains an
unreachable runtime, and repeats a request once at the leader when a cluster
standby answers 503 NOT_LEADER.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import attrs
import click

from orbit_cli import __version__
from orbit_cli.output import CliError, os_reason

if TYPE_CHECKING:
    import httpx

DEFAULT_SERVER = "http://127.0.0.1:7233"
# The longest a single request may take; /wait alone may legitimately hold 300 s.
REQUEST_TIMEOUT_S = 330.0
UNREACHABLE_HINT = "  hint: start it with `orbit server` or set --server / ORBIT_SERVER"


class ApiError(CliError):
    """The runtime refused a request; `code` is the API's error code."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.code = code
        self.status = status
        self.text = message


class Unreachable(CliError):
    """No HTTP exchange happened: connection refused, TLS failure, timeout."""


@attrs.frozen
class ClientConfig:
    server: str = DEFAULT_SERVER
    token: str | None = None
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


def path(*segments: str) -> str:
    """`/v1/...` with each dynamic segment (ids, names) escaped."""
    return "/" + "/".join(quote(s, safe="-_.:~@") for s in segments)


class RuntimeClient:
    """Talks to one runtime; use as a context manager so the connection pool closes."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._verify = _tls_context(config)
        self._http = self._open(config.server)

    def __enter__(self) -> RuntimeClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def get(self, url: str, **params: Any) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        return self.request("GET", url, params=query)

    def post(self, url: str, body: Any = None) -> Any:
        return self.request("POST", url, body=body)

    def request(
        self, method: str, url: str, *, body: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        response = self._send(self._http, method, url, body, params)
        leader = _leader_of(response)
        if leader is not None:
            # A standby names the leader; ask it once, as chapter 44 promises.
            with self._open(leader) as http:
                response = self._send(http, method, url, body, params)
        return decode(response)

    def _open(self, server: str) -> httpx.Client:
        import httpx

        headers = {"user-agent": f"orbit-cli/{__version__}"}
        if self.config.token:
            headers["authorization"] = f"Bearer {self.config.token}"
        return httpx.Client(
            base_url=server.rstrip("/"),
            headers=headers,
            timeout=REQUEST_TIMEOUT_S,
            verify=self._verify,
            trust_env=False,
        )

    def _send(
        self,
        http: httpx.Client,
        method: str,
        url: str,
        body: Any,
        params: dict[str, Any] | None,
    ) -> httpx.Response:
        import httpx

        try:
            if body is None:
                return http.request(method, url, params=params)
            return http.request(method, url, params=params, json=body)
        except httpx.TransportError as exc:
            raise _unreachable(str(http.base_url).rstrip("/"), exc) from None


def _tls_context(config: ClientConfig) -> ssl.SSLContext | bool:
    if not (config.ca_cert or config.client_cert):
        return True
    try:
        # A CA file replaces the default roots rather than adding to them.
        if config.ca_cert:
            context = ssl.create_default_context(cafile=config.ca_cert)
        else:
            context = ssl.create_default_context()
        if config.client_cert:
            context.load_cert_chain(config.client_cert, config.client_key)
    except (OSError, ssl.SSLError) as exc:
        raise click.UsageError(f"cannot load the TLS files: {exc}") from None
    return context


def _leader_of(response: httpx.Response) -> str | None:
    if response.status_code != 503:
        return None
    error = _envelope(response)
    if error is None or error.get("code") != "NOT_LEADER":
        return None
    leader = error.get("leader_addr") or response.headers.get("x-orbit-leader")
    return leader if isinstance(leader, str) and leader else None


def _envelope(response: httpx.Response) -> dict[str, Any] | None:
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else None


def decode(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        error = _envelope(response)
        if error is not None:
            raise ApiError(
                str(error.get("code", "HTTP_ERROR")),
                response.status_code,
                str(error.get("message", "")),
            )
        # The HTTP layer's own refusals (bad JSON, 404 path, 413 body) are plain text.
        text = response.text.strip() or response.reason_phrase
        raise ApiError("HTTP_ERROR", response.status_code, text)
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise ApiError(
            "HTTP_ERROR",
            response.status_code,
            "the runtime answered with something other than JSON",
        ) from None


def _unreachable(server: str, exc: Exception) -> Unreachable:
    reason, hint = _transport_reason(exc)
    message = f"cannot reach the ORBIT runtime at {server}: {reason}"
    return Unreachable(f"{message}\n{UNREACHABLE_HINT}" if hint else message)


def _transport_reason(exc: Exception) -> tuple[str, bool]:
    """What went wrong, worded like the runtime's Rust client, and whether starting a server would help."""
    import httpx

    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            name = _VERIFY_ERRORS.get(cause.verify_code, cause.verify_message)
            return f"io: invalid peer certificate: {name}", False
        if isinstance(cause, ssl.SSLError):
            return f"io: {_tls_reason(cause)}", False
        if isinstance(cause, ConnectionRefusedError):
            return f"io: {os_reason(cause)}", True
    if isinstance(exc, httpx.TimeoutException):
        return "io: the request timed out", False
    if isinstance(exc, httpx.RemoteProtocolError | httpx.LocalProtocolError):
        return f"protocol: {exc}", False
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.errno is not None:
            return f"io: {os_reason(cause)}", True
    return f"io: {exc}", isinstance(exc, httpx.ConnectError)


# OpenSSL's verification results, named as the runtime's Rust client names them.
_UNKNOWN_ISSUER = "UnknownIssuer"
_VERIFY_ERRORS = {
    2: _UNKNOWN_ISSUER,  # unable to get issuer certificate
    18: _UNKNOWN_ISSUER,  # self-signed certificate (the server's own, given as a CA)
    19: _UNKNOWN_ISSUER,  # self-signed certificate in the chain
    20: _UNKNOWN_ISSUER,  # unable to get local issuer certificate
    21: _UNKNOWN_ISSUER,  # unable to verify the first certificate
    9: "NotValidYet",
    10: "Expired",
    23: "Revoked",
    62: "NotValidForName",  # host name mismatch
    64: "NotValidForName",  # IP address mismatch
}
# Alerts the server sends when it refuses the client's certificate.
_ALERTS = {
    "UNKNOWN_CA": "UnknownCA",
    "BAD_CERTIFICATE": "BadCertificate",
    "CERTIFICATE_EXPIRED": "CertificateExpired",
    "CERTIFICATE_REVOKED": "CertificateRevoked",
    "CERTIFICATE_REQUIRED": "CertificateRequired",
    "UNSUPPORTED_CERTIFICATE": "UnsupportedCertificate",
    "HANDSHAKE_FAILURE": "HandshakeFailure",
    "PROTOCOL_VERSION": "ProtocolVersion",
}


def _tls_reason(error: ssl.SSLError) -> str:
    reason = error.reason or ""
    if reason == "WRONG_VERSION_NUMBER":
        # What came back is not TLS: the server serves plain HTTP.
        return "received corrupt message of type InvalidContentType"
    for prefix in ("TLSV1_ALERT_", "SSLV3_ALERT_", "TLSV13_ALERT_"):
        if reason.startswith(prefix):
            alert = reason.removeprefix(prefix)
            return f"received fatal alert: {_ALERTS.get(alert, alert.title().replace('_', ''))}"
    return reason or str(error)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


F = TypeVar("F", bound=Callable[..., Any])


def connection_options(command: F) -> F:
    """Adds the runtime connection options and passes a ready `client` to the command."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        server: str,
        token: str | None,
        ca_cert: str | None,
        client_cert: str | None,
        client_key: str | None,
        **kwargs: Any,
    ) -> Any:
        if client_cert and not client_key:
            raise click.UsageError("--client-cert requires --client-key")
        if client_key and not client_cert:
            raise click.UsageError("--client-key requires --client-cert")
        config = ClientConfig(server, token or None, ca_cert, client_cert, client_key)
        with RuntimeClient(config) as client:
            return command(*args, client=client, **kwargs)

    pem = click.Path(exists=True, dir_okay=False, readable=True)
    options = [
        click.option(
            "--server",
            envvar="ORBIT_SERVER",
            default=DEFAULT_SERVER,
            show_default=True,
            show_envvar=True,
            metavar="URL",
            help="Where the runtime's HTTP API listens; https:// for a TLS server.",
        ),
        click.option(
            "--token",
            envvar="ORBIT_TOKEN",
            show_envvar=True,
            metavar="TOKEN",
            help="Bearer token to authenticate with (admin or client identity); empty for none.",
        ),
        click.option(
            "--ca-cert",
            envvar="ORBIT_CA_CERT",
            show_envvar=True,
            type=pem,
            help="PEM CA certificate that signs the server's certificate; replaces the system roots.",
        ),
        click.option(
            "--client-cert",
            envvar="ORBIT_CLIENT_CERT",
            show_envvar=True,
            type=pem,
            help="PEM certificate to present for mutual TLS (needs --client-key).",
        ),
        click.option(
            "--client-key",
            envvar="ORBIT_CLIENT_KEY",
            show_envvar=True,
            type=pem,
            help="PEM private key of --client-cert.",
        ),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]
