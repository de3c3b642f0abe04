"""Connection settings resolved from arguments first, then the environment.

Every ORBIT SDK follows the same precedence: a value passed in code wins, and an
environment variable that is set but empty counts as unset.
"""

from __future__ import annotations

import os

DEFAULT_SERVER = "http://127.0.0.1:7233"


def env(name: str) -> str | None:
    """The variable's value, or None when it is unset or empty."""
    value = os.environ.get(name)
    return value if value else None


def resolve_server(server: str | None) -> str:
    url = server or env("ORBIT_SERVER") or DEFAULT_SERVER
    return url.rstrip("/")


def resolve_token(token: str | None) -> str | None:
    """The bearer token to send; an explicit "" means "send none"."""
    if token is not None:
        return token or None
    return env("ORBIT_WORKER_TOKEN") or env("ORBIT_TOKEN")


def resolve_path(value: str | None, variable: str) -> str | None:
    """A TLS file path; an explicit "" disables the environment's value."""
    if value is not None:
        return value or None
    return env(variable)
