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
"""

from __future__ import annotations

import ssl
from typing import NoReturn


class TlsError(Exception):
    """A TLS file the server cannot use; the message names it."""


def _encrypted() -> NoReturn:
    # Without this callback OpenSSL would prompt on the terminal for a
    # passphrase, and a server started by a service manager would hang.
    raise TlsError("--tls-key is encrypted with a passphrase; give the server an unencrypted key")


def server_context(cert: str, key: str | None, client_ca: str | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=_encrypted)
    except FileNotFoundError as exc:
        which = "--tls-key" if key is not None and exc.filename == key else "--tls-cert"
        raise TlsError(f"{which}: cannot read {exc.filename}: {exc.strerror}") from None
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
        except FileNotFoundError as exc:
            raise TlsError(f"--tls-client-ca: cannot read {client_ca}: {exc.strerror}") from None
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(
                f"--tls-client-ca {client_ca}: not a PEM CA certificate "
                f"({getattr(exc, 'reason', None) or exc})"
            ) from None
        context.verify_mode = ssl.CERT_OPTIONAL
    return context
