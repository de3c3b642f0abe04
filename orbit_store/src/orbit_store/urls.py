"""Database locations as `--db` gives them, and the one function that hides
PostgreSQL passwords.

A value starting with `postgres://` or `postgresql://` names a PostgreSQL
database as a libpq connection URI; anything else is a SQLite file path.

`redact` is the only place that knows how a password can appear: in the
userinfo of a URL (`postgres://user:secret@host`), as a `password=` query
parameter, or bare, in a message that quotes it. Every log line and error
that may carry a database location goes through it. It masks generously: the
userinfo password runs to the LAST `@` before the path, so a password with an
unencoded `@` is hidden whole rather than split where libpq would split it.

Standard library only: the CLI imports it before anything heavy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote

SCHEMES = ("postgres://", "postgresql://")
MASK = "***"

# A URL ends at whitespace or at a character that delimits it in a message.
_URL = re.compile(r"postgres(?:ql)?://[^\s\"'<>`]*", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def is_postgres(db: str) -> bool:
    return db.lower().startswith(SCHEMES)


def password_of(url: str) -> str | None:
    """The password a URL carries (percent-decoded), if any; the userinfo's
    wins over a `password=` parameter, as in libpq."""
    raw = _raw_passwords(url)
    return unquote(raw[0]) if raw else None


def _redact_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    slash = rest.find("/")
    authority, tail = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if "@" in authority:
        userinfo, host = authority.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":" + MASK
        authority = f"{userinfo}@{host}"
    elif "?" in authority:
        # `postgres://host?password=x`: the query starts inside the authority.
        host, query = authority.split("?", 1)
        authority, tail = host, "?" + query + tail
    tail = _QUERY_PASSWORD.sub(lambda m: m[1] + MASK, tail)
    return f"{scheme}://{authority}{tail}"


def redact(text: str, url: str | None = None) -> str:
    """`text` with the password of every PostgreSQL URL in it replaced by
    `***`; with `url`, also every bare occurrence of that URL's password
    (as written and percent-decoded)."""
    return redactor(url)(text)


def redactor(url: str | None = None) -> Callable[[str], str]:
    """`redact` with `url`'s passwords worked out once, for a caller that
    redacts many texts (every log line)."""
    secrets: set[str] = set()
    for raw in _raw_passwords(url) if url is not None else []:
        secrets.update(x for x in (raw, unquote(raw)) if x)
    # Longest first, so a secret that contains another is masked whole.
    ordered = sorted(secrets, key=len, reverse=True)

    def scrub(text: str) -> str:
        if "://" in text:  # what every URL `_URL` matches has; most texts have none
            text = _URL.sub(lambda m: _redact_url(m[0]), text)
        for secret in ordered:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    return scrub


def _raw_passwords(url: str) -> list[str]:
    """The passwords a URL carries, as written: userinfo's, then the query's."""
    rest = url.split("://", 1)[1] if "://" in url else url
    authority = rest.split("/", 1)[0]
    found: list[str] = []
    if "@" in authority:
        userinfo = authority.rsplit("@", 1)[0]
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    found.extend(m[0].split("=", 1)[1] for m in _QUERY_PASSWORD.finditer(rest))
    return found
