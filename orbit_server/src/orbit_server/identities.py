"""The workers file (`--workers-file`): per-worker and client identities.

The file is TOML with two kinds of tables, `[[worker]]` and `[[client]]`
(chapter 45). It is read once, by the server's arbiter before it forks, and
validated whole: the first problem found is a `WorkersFileError` whose text
the server prints after the file's name. Unknown keys and tables are refused,
so a misspelt `task` or `token_sha` never silently widens or voids an entry.

No token is stored: an entry holds the hex SHA-256 of its token, and a
presented token is hashed and looked up (`Identities.by_token`). Tokens come
from `orbit token` (64 random hex characters), so a fast hash is right; the
lookup is keyed by the digest of the presented value, whose timing says
nothing about any stored digest, and the match is confirmed with a
constant-time comparison. An entry may instead (or also) name the
certificate that identifies it under mutual TLS (`client_cert`), matched
case-insensitively against a verified certificate's DNS subject alternative
names and subject common names; worker entries are tried before clients.

Patterns (a worker's `tasks`, a client's `workflows`) are an exact name, a
prefix followed by one `*`, or `*` alone.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

ACTIONS = ("start", "signal", "query", "read", "cancel", "schedule")
DEFAULT_ACTIONS = ("start", "signal", "query", "read")
_WORKER_FIELDS = ("id", "token_sha256", "client_cert", "tasks", "runtime")
_CLIENT_FIELDS = ("id", "token_sha256", "client_cert", "workflows", "actions")
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class WorkersFileError(Exception):
    """The workers file cannot be used; the message names the entry at fault."""


@attrs.frozen
class Patterns:
    """Names matched by exact name, by a prefix ending in `*`, or by `*`."""

    texts: tuple[str, ...]
    _exact: frozenset[str] = attrs.field(init=False)
    _prefixes: tuple[str, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_exact", frozenset(t for t in self.texts if not t.endswith("*")))
        object.__setattr__(self, "_prefixes", tuple(t[:-1] for t in self.texts if t.endswith("*")))

    def match(self, name: str) -> bool:
        return name in self._exact or name.startswith(self._prefixes)

    def __str__(self) -> str:
        return ", ".join(self.texts)


@attrs.frozen
class WorkerIdentity:
    id: str
    token_sha256: str | None
    client_cert: str | None
    tasks: Patterns
    runtime: str | None

    kind = "worker"


@attrs.frozen
class ClientIdentity:
    id: str
    token_sha256: str | None
    client_cert: str | None
    workflows: Patterns
    actions: frozenset[str]

    kind = "client"

    def may(self, action: str, workflow: str) -> bool:
        return action in self.actions and self.workflows.match(workflow)


Identity = WorkerIdentity | ClientIdentity


@attrs.frozen
class Identities:
    """Every entry of a workers file, indexed for authentication."""

    workers: tuple[WorkerIdentity, ...] = ()
    clients: tuple[ClientIdentity, ...] = ()
    _by_digest: Mapping[bytes, Identity] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        index: dict[bytes, Identity] = {}
        for entry in self.entries:
            if entry.token_sha256 is not None:
                index.setdefault(bytes.fromhex(entry.token_sha256), entry)
        object.__setattr__(self, "_by_digest", index)

    @property
    def entries(self) -> tuple[Identity, ...]:
        return (*self.workers, *self.clients)

    def __len__(self) -> int:
        return len(self.workers) + len(self.clients)

    @property
    def has_certificates(self) -> bool:
        return any(e.client_cert is not None for e in self.entries)

    def by_token(self, token: bytes) -> Identity | None:
        digest = hashlib.sha256(token).digest()
        entry = self._by_digest.get(digest)
        if entry is None or entry.token_sha256 is None:
            return None
        return entry if hmac.compare_digest(bytes.fromhex(entry.token_sha256), digest) else None

    def by_certificate(self, names: Iterable[str]) -> Identity | None:
        """The entry a verified certificate with these names identifies:
        workers first, then clients."""
        wanted = {n.lower() for n in names}
        for group in (self.workers, self.clients):
            for entry in group:
                if entry.client_cert is not None and entry.client_cert.lower() in wanted:
                    return entry
        return None


def certificate_names(peer: Mapping[str, Any]) -> list[str]:
    """DNS subject alternative names and subject common names of a
    certificate as `ssl.SSLSocket.getpeercert()` gives it."""
    names = [value for kind, value in peer.get("subjectAltName", ()) if kind == "DNS"]
    for rdn in peer.get("subject", ()):
        names.extend(value for key, value in rdn if key == "commonName")
    return names


def load(path: str) -> Identities:
    """Reads and validates a workers file; raises WorkersFileError."""
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise WorkersFileError(f"cannot read it: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise WorkersFileError(f"not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise WorkersFileError("not valid TOML: the file is not UTF-8") from None
    return parse(document)


def parse(document: Mapping[str, Any]) -> Identities:
    for key in document:
        if key not in ("worker", "client"):
            raise WorkersFileError(
                f"unknown table `{key}` (a workers file holds [[worker]] and [[client]] tables)"
            )
    workers = [_worker(t) for t in _tables(document, "worker")]
    clients = [_client(t) for t in _tables(document, "client")]
    seen: set[str] = set()
    for entry in workers:
        if entry.id in seen:
            raise WorkersFileError(f"worker `{entry.id}` is declared twice")
        seen.add(entry.id)
    for client in clients:
        if client.id in seen:
            raise WorkersFileError(f"identity `{client.id}` is declared twice")
        seen.add(client.id)
    return Identities(tuple(workers), tuple(clients))


def _tables(document: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    tables = document.get(kind, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise WorkersFileError(f"`{kind}` must be an array of tables, written [[{kind}]]")
    return tables


def _common(table: Mapping[str, Any], kind: str, fields: tuple[str, ...]) -> tuple[str, str]:
    """The entry's id (checked) and how to name it in messages."""
    raw_id = table.get("id")
    if raw_id is None:
        raise WorkersFileError(f"a {kind} has no `id` (missing field `id`)")
    if not isinstance(raw_id, str):
        raise WorkersFileError(f"a {kind} has an `id` that is not a string")
    if not raw_id.strip():
        raise WorkersFileError(f"a {kind} has an empty `id`")
    who = f"{kind} `{raw_id}`"
    for key in table:
        if key not in fields:
            raise WorkersFileError(
                f"{who}: unknown field `{key}` (expected one of: {', '.join(fields)})"
            )
    return raw_id, who


def _credential(table: Mapping[str, Any], who: str) -> tuple[str | None, str | None]:
    digest = _optional_string(table, "token_sha256", who)
    cert = _optional_string(table, "client_cert", who)
    if digest is None and cert is None:
        raise WorkersFileError(f"{who} needs `token_sha256` or `client_cert`")
    if digest is not None and not _HEX64.match(digest):
        raise WorkersFileError(
            f"{who}: `token_sha256` must be 64 hex characters (use `orbit token`)"
        )
    if cert is not None and not cert.strip():
        raise WorkersFileError(f"{who}: `client_cert` is empty")
    return (digest.lower() if digest is not None else None), cert


def _optional_string(table: Mapping[str, Any], key: str, who: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise WorkersFileError(f"{who}: `{key}` must be a string")
    return value


def _patterns(table: Mapping[str, Any], key: str, who: str, what: str) -> Patterns:
    if key not in table:
        raise WorkersFileError(f"{who}: missing field `{key}`")
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WorkersFileError(f"{who}: `{key}` must be an array of strings")
    if not value:
        raise WorkersFileError(f"{who} must list at least one {what} pattern")
    for pattern in value:
        if not pattern or "*" in pattern[:-1]:
            raise WorkersFileError(
                f"{who}: {what} pattern `{pattern}` is not a name, a prefix ending in `*`, or `*`"
            )
    return Patterns(tuple(dict.fromkeys(value)))


def _worker(table: Mapping[str, Any]) -> WorkerIdentity:
    worker_id, who = _common(table, "worker", _WORKER_FIELDS)
    digest, cert = _credential(table, who)
    tasks = _patterns(table, "tasks", who, "task")
    runtime = _optional_string(table, "runtime", who)
    if runtime is not None and not runtime.strip():
        raise WorkersFileError(f"{who}: `runtime` is empty")
    return WorkerIdentity(
        worker_id, digest, cert, tasks, runtime.lower() if runtime is not None else None
    )


def _client(table: Mapping[str, Any]) -> ClientIdentity:
    client_id, who = _common(table, "client", _CLIENT_FIELDS)
    digest, cert = _credential(table, who)
    workflows = _patterns(table, "workflows", who, "workflow")
    actions = table.get("actions", list(DEFAULT_ACTIONS))
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise WorkersFileError(f"{who}: `actions` must be an array of strings")
    for action in actions:
        if action not in ACTIONS:
            raise WorkersFileError(
                f"{who}: unknown action `{action}` (allowed: {', '.join(ACTIONS)})"
            )
    return ClientIdentity(client_id, digest, cert, workflows, frozenset(actions))
