"""The HTTP listener's TLS context (`--tls-cert`, `--tls-key`, `--tls-client-ca`).

One `ssl.SSLContext` per worker process, built once and handed to gunicorn
through its `ssl_context` hook: gunicorn would otherwise build a context (and
parse the certificate and key files) for every connection it accepts. The
arbiter builds one too before it forks, only to refuse a bad file at start
with a message that names it.

TLS 1.2 is the oldest version offered. With a client CA, certificates are
requested but optional (`CERT_OPTIONAL`): a presented certificate must
verify against that CA or the handshake fails, while a client without one
connects and authenticates with a token (the admin CLI, health probes). A
verified certificate's names identify a workers-file entry (`auth.Gate`).

A client that speaks plain HTTP to the TLS port fails the handshake, which
would leave it with a connection closed without a word. The context's
sockets (`_Socket`) answer such a request with a plain-text 400 that says
to use https://, written on the raw connection, before the failure goes on
to gunicorn as usual.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from typing import Any, NoReturn

PLAIN_HTTP_BODY = b"This port serves HTTPS: use https:// to reach the ORBIT runtime.\n"
PLAIN_HTTP_ANSWER = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: " + str(len(PLAIN_HTTP_BODY)).encode() + b"\r\n\r\n" + PLAIN_HTTP_BODY
)


class _Socket(ssl.SSLSocket):
    def do_handshake(self, *args: Any) -> None:
        try:
            super().do_handshake(*args)
        except ssl.SSLError as exc:
            if exc.reason == "HTTP_REQUEST":
                # The plain socket's send: below the failed TLS layer.
                with contextlib.suppress(OSError):
                    socket.socket.send(self, PLAIN_HTTP_ANSWER)
            raise


class TlsError(Exception):
    """A TLS file the server cannot use; the message names it."""


def _encrypted() -> NoReturn:
    # Without this callback OpenSSL would prompt on the terminal for a
    # passphrase, and a server started by a service manager would hang.
    raise TlsError("--tls-key is encrypted with a passphrase; give the server an unencrypted key")


def _readable(flag: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise TlsError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None


def server_context(cert: str, key: str | None, client_ca: str | None) -> ssl.SSLContext:
    for flag, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-client-ca", client_ca)):
        if path is not None:
            _readable(flag, path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.sslsocket_class = _Socket
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=_encrypted)
    except OSError as exc:
        if isinstance(exc, ssl.SSLError):
            if "KEY_VALUES_MISMATCH" in str(exc):
                raise TlsError(
                    f"--tls-key {key} is not the private key of the certificate in --tls-cert {cert}"
                ) from None
            raise TlsError(
                f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate chain and "
                f"a PEM private key ({exc.reason or exc})"
            ) from None
        raise TlsError(f"--tls-cert / --tls-key: {exc.strerror or exc}") from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except OSError as exc:
            raise TlsError(
                f"--tls-client-ca {client_ca}: not a PEM CA certificate "
                f"({getattr(exc, 'reason', None) or exc})"
            ) from None
        context.verify_mode = ssl.CERT_OPTIONAL
    return context
