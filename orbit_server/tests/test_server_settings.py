"""Listen addresses and the configuration refusals of chapter 39."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_server.config import Address, ConfigError, ServerConfig, check, worker_extensions


@pytest.mark.parametrize(
    ("text", "host", "port", "shown"),
    [
        ("127.0.0.1:7233", "127.0.0.1", 7233, "127.0.0.1:7233"),
        ("0.0.0.0:80", "0.0.0.0", 80, "0.0.0.0:80"),
        ("[::]:7233", "::", 7233, "[::]:7233"),
        ("[::1]:0", "::1", 0, "[::1]:0"),
    ],
)
def test_addresses(text: str, host: str, port: int, shown: str) -> None:
    addr = Address.parse(text)
    assert (addr.host, addr.port, str(addr)) == (host, port, shown)


@pytest.mark.parametrize("text", ["localhost:7233", "127.0.0.1", "1.2.3.4:70000", "::1:80", ":80"])
def test_addresses_must_be_ip_and_port(text: str) -> None:
    with pytest.raises(ValueError, match="is not an ip:port address"):
        Address.parse(text)


def test_loopback() -> None:
    assert Address.parse("127.0.0.2:1").is_loopback
    assert Address.parse("[::1]:1").is_loopback
    assert not Address.parse("0.0.0.0:1").is_loopback


def _refusal(**fields: object) -> str:
    with pytest.raises(ConfigError) as info:
        check(ServerConfig(**fields))  # type: ignore[arg-type]
    return str(info.value)


def test_refusals() -> None:
    anywhere = Address.parse("0.0.0.0:7233")
    assert _refusal(addr=anywhere).startswith("refusing to listen on 0.0.0.0:7233 without")
    check(ServerConfig(addr=anywhere, insecure=True))
    check(ServerConfig(addr=anywhere, token="t"))
    assert _refusal(worker_token="w").startswith("--worker-token requires --token")
    assert _refusal(token="t", worker_token="t") == "--worker-token must differ from --token"
    assert _refusal(workers_file="w.toml").startswith("--workers-file requires --token")
    assert _refusal(cluster=True).startswith("--cluster requires a PostgreSQL database")
    assert _refusal(cluster_mode="shared") == "--cluster-mode shared requires --cluster"
    assert _refusal(unsupported=("--grpc-addr", "--tls-cert")) == (
        "--grpc-addr, --tls-cert: not supported yet by this version of orbit server"
    )
    # PostgreSQL is accepted, and clusters of both modes on it.
    check(ServerConfig(db="postgresql://h/db"))
    check(ServerConfig(db="postgres://h/db", cluster=True, node_id="n-1"))
    check(ServerConfig(db="postgres://h/db", cluster=True, cluster_mode="shared"))
    assert _refusal(db="orbit.db", cluster=True, cluster_mode="shared").startswith(
        "--cluster requires a PostgreSQL database"
    )
    assert _refusal(node_id="n-1") == "--node-id requires --cluster"
    # gRPC is served by the servers of a cluster of either mode too.
    grpc = Address.parse("127.0.0.1:7234")
    for mode in ("standby", "shared"):
        check(ServerConfig(db="postgres://h/db", cluster=True, cluster_mode=mode, grpc_addr=grpc))


def test_derived_values() -> None:
    config = ServerConfig(session_timeout_s=2.5, token="t")
    assert (config.session_timeout_ms, config.auth, config.backend) == (2500, True, "sqlite")
    assert ServerConfig(db="postgres://h/db").backend == "postgres"
    assert ServerConfig(db="POSTGRESQL://h/db").backend == "postgres"
    assert ServerConfig(db="postgres://u:pw@h/db").db_display == "postgres://u:***@h/db"
    assert ServerConfig(db="my:pw@file.db").db_display == "my:pw@file.db"


def test_tls_refusals(tmp_path: Path) -> None:
    import trustme

    from orbit_server.identities import parse

    root = tmp_path
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(root / "server.pem"))
    leaf.private_key_pem.write_to_path(str(root / "server.key"))
    trustme.CA().issue_cert("x").private_key_pem.write_to_path(str(root / "other.key"))
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    (root / "junk.pem").write_text("not a certificate\n")
    cert, key = str(root / "server.pem"), str(root / "server.key")
    with_cert = parse({"worker": [{"id": "w", "client_cert": "w.internal", "tasks": ["*"]}]})
    tokens_only = parse({"worker": [{"id": "w", "token_sha256": "a" * 64, "tasks": ["*"]}]})

    assert _refusal(tls_cert=cert).startswith("--tls-cert requires --tls-key")
    assert _refusal(tls_key=key) == "--tls-key requires --tls-cert"
    assert _refusal(tls_client_ca=str(root / "ca.pem")).startswith(
        "--tls-client-ca requires --tls-cert"
    )
    assert _refusal(
        tls_cert=cert,
        tls_key=key,
        tls_client_ca=str(root / "ca.pem"),
        token="t" * 20,
        identities=tokens_only,
    ) == (
        "--tls-client-ca needs --workers-file entries with `client_cert` "
        "to map certificates to workers"
    )
    assert _refusal(tls_cert=str(root / "none.pem"), tls_key=key).startswith(
        f"--tls-cert: cannot read {root / 'none.pem'}"
    )
    assert "is not the private key of the certificate" in _refusal(
        tls_cert=cert, tls_key=str(root / "other.key")
    )
    assert "not a PEM certificate chain" in _refusal(tls_cert=str(root / "junk.pem"), tls_key=key)
    assert _refusal(
        tls_cert=cert, tls_key=key, tls_client_ca=str(root / "junk.pem"), token="t" * 20,
        identities=with_cert,
    ).startswith(f"--tls-client-ca {root / 'junk.pem'}: not a PEM CA certificate")  # fmt: skip
    config = check(
        ServerConfig(
            tls_cert=cert,
            tls_key=key,
            tls_client_ca=str(root / "ca.pem"),
            token="t" * 20,
            identities=with_cert,
        )
    )
    assert config.tls


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", ()),
        ("none", ()),
        (" none ", ()),
        ("all", ("result-then-poll",)),
        ("result-then-poll", ("result-then-poll",)),
        ("result-then-poll, result-then-poll", ("result-then-poll",)),
    ],
)
def test_worker_extensions(text: str, names: tuple[str, ...]) -> None:
    assert worker_extensions(text) == names


def test_unknown_worker_extensions_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown worker protocol extension `batch-poll`"):
        worker_extensions("result-then-poll,batch-poll")
