"""HTTPS with a private CA, and mutual TLS with a client certificate."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import ApiError, Client, Worker

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


class Pki:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = root / "ca.pem"
        self.server = root / "server.pem"
        self.server_key = root / "server.key"
        self.client = root / "client.pem"
        self.client_key = root / "client.key"
        self.client_combined = root / "client-with-key.pem"


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(root: Path, name: str, subject: str, extensions: str) -> None:
    (root / f"{name}.ext").write_text(extensions)
    _openssl(
        root,
        *("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
        *("-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject),
    )
    _openssl(
        root,
        *("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key"),
        *("-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext"),
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    _openssl(
        root,
        *("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
        *("-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2"),
        *("-subj", "/CN=ORBIT test CA"),
        *("-addext", "basicConstraints=critical,CA:TRUE"),
        *("-addext", "keyUsage=critical,keyCertSign,cRLSign"),
    )
    common = (
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    _issue(
        root,
        "server",
        "/CN=127.0.0.1",
        common + "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    _issue(
        root,
        "client",
        "/CN=payments-1",
        common + "subjectAltName=DNS:payments-1\nextendedKeyUsage=clientAuth\n",
    )
    pki = Pki(root)
    pki.client_combined.write_text(pki.client.read_text() + pki.client_key.read_text())
    return pki


@pytest.fixture
def tls_fake(pki: Pki) -> Iterator[FakeRuntime]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server, pki.server_key)
    context.load_verify_locations(pki.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    runtime = FakeRuntime(ssl_context=context)
    runtime.routes["GET", "/v1/health"] = lambda call: (200, {"status": "ok"})
    yield runtime
    runtime.close()


def test_mutual_tls_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, pki: Pki, tls_fake: FakeRuntime
) -> None:
    monkeypatch.setenv("ORBIT_SERVER", tls_fake.url)
    monkeypatch.setenv("ORBIT_CA_CERT", str(pki.ca))
    monkeypatch.setenv("ORBIT_CLIENT_CERT", str(pki.client))
    monkeypatch.setenv("ORBIT_CLIENT_KEY", str(pki.client_key))

    with Client() as client:
        assert client.server.startswith("https://")
        assert client.get("/v1/health") == {"status": "ok"}


def test_the_key_may_live_in_the_certificate_file(pki: Pki, tls_fake: FakeRuntime) -> None:
    with Client(
        server=tls_fake.url, ca_cert=str(pki.ca), client_cert=str(pki.client_combined)
    ) as client:
        assert client.get("/v1/health") == {"status": "ok"}


def test_the_ca_replaces_the_system_store(pki: Pki, tls_fake: FakeRuntime) -> None:
    client = Client(server=tls_fake.url, client_cert=str(pki.client_combined))
    with client, pytest.raises(ApiError) as caught:
        client.get("/v1/health")
    assert caught.value.is_connection_error
    assert "CERTIFICATE_VERIFY_FAILED" in caught.value.message


def test_a_server_requiring_a_client_certificate_refuses_none(
    pki: Pki, tls_fake: FakeRuntime
) -> None:
    with Client(server=tls_fake.url, ca_cert=str(pki.ca)) as client, pytest.raises(ApiError) as e:
        client.get("/v1/health")
    assert e.value.is_connection_error


def test_a_worker_over_mutual_tls_with_a_replaced_client(pki: Pki, tls_fake: FakeRuntime) -> None:
    worker = Worker("payments-1", poll_wait_ms=300)
    worker.client = Client(
        server=tls_fake.url,
        ca_cert=str(pki.ca),
        client_cert=str(pki.client),
        client_key=str(pki.client_key),
        timeout=worker.poll_wait_ms / 1000 + 15,
    )
    worker.register("payments.charge", lambda i, c: {"transaction_id": "t-1"})
    thread = worker.start()
    try:
        token = tls_fake.enqueue("payments.charge", {"amount": 5})
        assert tls_fake.result(token).body["output"] == {"transaction_id": "t-1"}
    finally:
        worker.stop()
        thread.join(5)
    assert tls_fake.calls_to("/v1/workers/unregister")
