"""The workers file: its fields, the refusals of chapter 45, and lookups by
token and by certificate name."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from orbit_server.config import ConfigError, ServerConfig, check
from orbit_server.identities import (
    ClientIdentity,
    WorkerIdentity,
    WorkersFileError,
    certificate_names,
    load,
    parse,
)

DIGEST = "cf65d58bce0a5ed7d7c7a09b53a5287eaa138e3ee3e72f22f97df7861cab7bc0"
BOOK_EXAMPLE = f"""
[[worker]]
id = "payments-1"
# SHA-256 of the worker's bearer token, as 64 hex characters.
token_sha256 = "{DIGEST}"
tasks = ["payments.*", "audit.log"]
runtime = "python"

[[worker]]
id = "inventory"
client_cert = "inventory.workers.internal"
tasks = ["inventory.reserve", "inventory.release"]

[[client]]
id = "warehouse-app"
token_sha256 = "4854f0bb0c1dd54b3884060e1a136550851354eccf27e8d1a5a6307b7f522df1"
workflows = ["Print*"]

[[client]]
id = "ops-console"
client_cert = "ops-console.clients.internal"
workflows = ["*"]
actions = ["read", "cancel"]
"""


def _refusal(text: str, tmp_path: Path) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        check(ServerConfig(token="t" * 20, workers_file=str(path)))
    return str(info.value)


def test_the_book_example_is_read(tmp_path: Path) -> None:
    path = tmp_path / "workers.toml"
    path.write_text(BOOK_EXAMPLE)
    found = load(str(path))
    assert [w.id for w in found.workers] == ["payments-1", "inventory"]
    assert [c.id for c in found.clients] == ["warehouse-app", "ops-console"]
    payments, inventory = found.workers
    assert payments.tasks.match("payments.charge") and payments.tasks.match("audit.log")
    assert not payments.tasks.match("audit.logs") and not payments.tasks.match("payments")
    assert payments.runtime == "python" and inventory.runtime is None
    warehouse, ops = found.clients
    assert warehouse.actions == {"start", "signal", "query", "read"}
    assert warehouse.may("start", "PrintLabels") and not warehouse.may("cancel", "PrintLabels")
    assert not warehouse.may("start", "Review")
    assert ops.may("cancel", "Anything") and not ops.may("start", "Anything")
    config = check(ServerConfig(token="t" * 20, workers_file=str(path)))
    assert config.identities == found


def test_tokens_are_found_by_their_hash_only(tmp_path: Path) -> None:
    token = "8a7df28ad62d4237a229d884ee8f8d659f3406f060554af19f10cd96c731b2c4"
    digest = hashlib.sha256(token.encode()).hexdigest().upper()
    found = parse({"worker": [{"id": "w", "token_sha256": digest, "tasks": ["*"]}]})
    assert isinstance(found.by_token(token.encode()), WorkerIdentity)
    assert found.by_token(digest.encode()) is None
    assert found.by_token(token.encode()[:-1]) is None


def test_certificates_match_dns_names_and_common_names_workers_first() -> None:
    found = parse(
        {
            "worker": [{"id": "w", "client_cert": "Shared.Name", "tasks": ["*"]}],
            "client": [
                {"id": "c", "client_cert": "shared.name", "workflows": ["*"]},
                {"id": "d", "client_cert": "client.only", "workflows": ["*"]},
            ],
        }
    )
    peer = {
        "subject": ((("organizationName", "x"),), (("commonName", "CLIENT.ONLY"),)),
        "subjectAltName": (("DNS", "other.name"), ("IP Address", "127.0.0.1")),
    }
    assert certificate_names(peer) == ["other.name", "CLIENT.ONLY"]
    assert isinstance(found.by_certificate(["SHARED.name"]), WorkerIdentity)
    client = found.by_certificate(certificate_names(peer))
    assert isinstance(client, ClientIdentity) and client.id == "d"
    assert found.by_certificate(["127.0.0.1", "nobody"]) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[worker]]\nid = "a"\ntasks = ["*"]', "worker `a` needs `token_sha256` or `client_cert`"),
        (
            f'[[worker]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\ntasks = ["*"]\n'
            f'[[worker]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\ntasks = ["*"]',
            "worker `x` is declared twice",
        ),
        (
            '[[worker]]\nid = "x"\ntoken_sha256 = "abc"\ntasks = ["*"]',
            "worker `x`: `token_sha256` must be 64 hex characters (use `orbit token`)",
        ),
        (
            f'[[worker]]\nid = "x"\ntoken_sha256 = "{"g" * 64}"\ntasks = ["*"]',
            "worker `x`: `token_sha256` must be 64 hex characters (use `orbit token`)",
        ),
        (
            f'[[worker]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\ntasks = []',
            "worker `x` must list at least one task pattern",
        ),
        (
            f'[[worker]]\nid = ""\ntoken_sha256 = "{DIGEST}"\ntasks = ["*"]',
            "a worker has an empty `id`",
        ),
        (
            f'[[worker]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\ntasks = ["*"]\ntask = ["a"]',
            "worker `x`: unknown field `task` "
            "(expected one of: id, token_sha256, client_cert, tasks, runtime)",
        ),
        (
            f'[[worker]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\ntasks = ["a*b"]',
            "worker `x`: task pattern `a*b` is not a name, a prefix ending in `*`, or `*`",
        ),
        (
            f'[[client]]\nid = "app"\ntoken_sha256 = "{DIGEST}"\nworkflows = ["*"]\n'
            'actions = ["deploy"]',
            "client `app`: unknown action `deploy` "
            "(allowed: start, signal, query, read, cancel, schedule)",
        ),
        (
            '[[client]]\nid = "app"\nworkflows = ["*"]',
            "client `app` needs `token_sha256` or `client_cert`",
        ),
        (
            '[[client]]\nid = "app"\ntoken_sha256 = "00"\nworkflows = ["*"]',
            "client `app`: `token_sha256` must be 64 hex characters (use `orbit token`)",
        ),
        (
            f'[[client]]\nid = "app"\ntoken_sha256 = "{DIGEST}"\nworkflows = []',
            "client `app` must list at least one workflow pattern",
        ),
        (
            f'[[client]]\nid = " "\ntoken_sha256 = "{DIGEST}"\nworkflows = ["*"]',
            "a client has an empty `id`",
        ),
        (
            f'[[worker]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\ntasks = ["*"]\n'
            f'[[client]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\nworkflows = ["*"]',
            "identity `x` is declared twice",
        ),
        (
            f'[[client]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\nworkflows = ["*"]\n'
            f'[[client]]\nid = "x"\ntoken_sha256 = "{DIGEST}"\nworkflows = ["*"]',
            "identity `x` is declared twice",
        ),
        (
            f'[[client]]\nid = "app"\ntoken_sha256 = "{DIGEST}"',
            "client `app`: missing field `workflows`",
        ),
        ('[[workers]]\nid = "x"', "unknown table `workers`"),
        ('[worker]\nid = "x"', "`worker` must be an array of tables, written [[worker]]"),
    ],
)
def test_an_invalid_file_stops_the_start(text: str, message: str, tmp_path: Path) -> None:
    refusal = _refusal(text, tmp_path)
    assert refusal.startswith(f"{tmp_path / 'bad.toml'}: {message}"), refusal


def test_toml_errors_and_missing_files_are_located(tmp_path: Path) -> None:
    assert "not valid TOML" in _refusal('[[worker]]\nid = "x', tmp_path)
    assert "line 2" in _refusal("[[worker]]\nid = x\n", tmp_path)
    with pytest.raises(ConfigError, match=r"nowhere.toml: cannot read it: No such file"):
        check(ServerConfig(token="t" * 20, workers_file=str(tmp_path / "nowhere.toml")))
    with pytest.raises(WorkersFileError):
        parse({"worker": [{"id": 3}]})


def test_a_workers_file_requires_the_admin_token(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(BOOK_EXAMPLE)
    with pytest.raises(ConfigError, match="--workers-file requires --token"):
        check(ServerConfig(workers_file=str(path)))
