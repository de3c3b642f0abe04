"""TLS and mutual TLS end to end (chapter 45), with certificates made here.

One `orbit server` serves HTTPS with a client CA and a workers file; the CLI
connects to it with a CA certificate and with a client certificate, and
every way to get TLS wrong fails with a clear error: an untrusted CA (or the
server's own certificate given as a CA), an expired server certificate, a
client certificate from another CA or an expired one, a certificate that
matches no identity, plain HTTP to the TLS port and HTTPS to a plain port.
The SDKs' side is tests/e2e/test_e2e_tls.py.
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import server_ir
import trustme
from server_harness import ORBIT, ServerProcess

from orbit_server.worker import LINGER_S

# Several real servers and CLI processes: slow on a loaded machine.
pytestmark = pytest.mark.timeout(240)

ADMIN = "admin-token-0123456789abcdef"
PAST = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)

WORKERS_FILE = """
[[worker]]
id = "inventory"
client_cert = "inventory.workers.internal"
tasks = ["tls.*"]

[[worker]]
id = "node-1"
client_cert = "node-1.workers.internal"
tasks = ["tls.step"]
runtime = "typescript"

[[client]]
id = "ops-console"
client_cert = "ops-console.clients.internal"
workflows = ["*"]
actions = ["read"]
"""


class Certs:
    """Files made by trustme in one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        ca, workers_ca, stranger_ca = trustme.CA(), trustme.CA(), trustme.CA()
        ca.cert_pem.write_to_path(str(self.path("ca.pem")))
        workers_ca.cert_pem.write_to_path(str(self.path("workers-ca.pem")))
        self._leaf(ca.issue_cert("127.0.0.1", "localhost"), "server")
        self._leaf(ca.issue_cert("127.0.0.1", not_after=PAST), "expired-server")
        for name in ("inventory", "node-1"):
            self._leaf(workers_ca.issue_cert(f"{name}.workers.internal"), name)
        self._leaf(workers_ca.issue_cert("ops-console.clients.internal"), "ops-console")
        self._leaf(workers_ca.issue_cert("nobody.workers.internal"), "nobody")
        self._leaf(
            workers_ca.issue_cert("inventory.workers.internal", not_after=PAST), "expired-inventory"
        )
        self._leaf(stranger_ca.issue_cert("inventory.workers.internal"), "stranger-inventory")
        self.path("workers.toml").write_text(WORKERS_FILE)

    def path(self, name: str) -> Path:
        return self.root / name

    def __getitem__(self, name: str) -> str:
        return str(self.path(name))

    def _leaf(self, leaf: trustme.LeafCert, name: str) -> None:
        self.path(f"{name}.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(self.path(f"{name}.key")))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def server(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("tls") / "orbit.db"
    args = ("--token", ADMIN, "--workers-file", certs["workers.toml"])
    tls = ("--tls-cert", certs["server.pem"], "--tls-key", certs["server.key"])
    with ServerProcess(db, *args, *tls, "--tls-client-ca", certs["workers-ca.pem"]) as proc:
        assert "tls=true mtls=true" in proc.log()
        admin = _https(proc, certs, token=ADMIN)
        assert admin.post("/v1/workflows", server_ir.chain(2, "tls.step"))[0] == 201
        admin.close()
        yield proc


class _Https:
    def __init__(self, addr: str, context: ssl.SSLContext, token: str | None) -> None:
        host, port = addr.rsplit(":", 1)
        self._conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
        self._token = token

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"content-type": "application/json"}
        if self._token:
            headers["authorization"] = f"Bearer {self._token}"
        data = None if body is None else json.dumps(body)
        self._conn.request(method, path, body=data, headers=headers)
        reply = self._conn.getresponse()
        raw = reply.read()
        return reply.status, json.loads(raw) if raw else None

    def close(self) -> None:
        self._conn.close()

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return self.request("POST", path, body)


def _https(
    proc: ServerProcess, certs: Certs, *, token: str | None = None, cert: str | None = None
) -> _Https:
    context = ssl.create_default_context(cafile=certs["ca.pem"])
    if cert is not None:
        context.load_cert_chain(certs[f"{cert}.pem"], certs[f"{cert}.key"])
    return _Https(proc.addr, context, token)


def _orbit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    return subprocess.run(
        [ORBIT, *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=60,
        check=False,
    )


def _url(proc: ServerProcess, scheme: str = "https") -> str:
    return f"{scheme}://{proc.addr}"


# ---- the CLI


def test_the_cli_connects_with_a_ca_certificate_and_with_a_client_certificate(
    server: ServerProcess, certs: Certs
) -> None:
    ran = _orbit(
        "run", "Chain", "--no-wait", "--id", "cli-1", "--server", _url(server),
        "--ca-cert", certs["ca.pem"], env={"ORBIT_TOKEN": ADMIN},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    # The client identity of a certificate reads, through ORBIT_CA_CERT.
    listed = _orbit(
        "ps", "--server", _url(server), "--client-cert", certs["ops-console.pem"],
        "--client-key", certs["ops-console.key"], env={"ORBIT_CA_CERT": certs["ca.pem"]},
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "cli-1" in listed.stdout
    refused = _orbit(
        "cancel", "cli-1", "--server", _url(server), "--ca-cert", certs["ca.pem"],
        "--client-cert", certs["ops-console.pem"], "--client-key", certs["ops-console.key"],
    )  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "error: FORBIDDEN (403): client `ops-console` may not cancel executions of `Chain`"
    )


@pytest.mark.parametrize(
    ("ca", "reason"),
    [("workers-ca.pem", "UnknownIssuer"), ("server.pem", "UnknownIssuer")],
)
def test_an_untrusted_server_certificate_is_a_clear_cli_error(
    server: ServerProcess, certs: Certs, ca: str, reason: str
) -> None:
    done = _orbit(
        "ps", "--server", _url(server), "--ca-cert", certs[ca], env={"ORBIT_TOKEN": ADMIN}
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: cannot reach the ORBIT runtime at {_url(server)}: "
        f"io: invalid peer certificate: {reason}"
    )


def test_plain_http_to_the_tls_port_is_told_to_use_https(server: ServerProcess) -> None:
    done = _orbit("ps", "--server", _url(server, "http"), env={"ORBIT_TOKEN": ADMIN})
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: HTTP_ERROR (400): This port serves HTTPS: use https:// to reach the ORBIT runtime."
    )


@pytest.mark.parametrize(
    ("cert", "alert"),
    [("stranger-inventory", "UnknownCA"), ("expired-inventory", "CertificateExpired")],
)
def test_a_client_certificate_the_server_cannot_verify_is_refused_in_the_handshake(
    server: ServerProcess, certs: Certs, cert: str, alert: str
) -> None:
    done = _orbit(
        "ps", "--server", _url(server), "--ca-cert", certs["ca.pem"],
        "--client-cert", certs[f"{cert}.pem"], "--client-key", certs[f"{cert}.key"],
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: cannot reach the ORBIT runtime at {_url(server)}: "
        f"io: received fatal alert: {alert}"
    )


def test_a_certificate_that_matches_no_identity_is_refused_everywhere(
    server: ServerProcess, certs: Certs
) -> None:
    nobody = _https(server, certs, cert="nobody")
    for method, path in (("GET", "/v1/health"), ("GET", "/v1/executions"), ("GET", "/nowhere")):
        status, body = nobody.request(method, path)
        assert status == 403, (path, body)
        assert body["error"]["code"] == "FORBIDDEN"
    nobody.close()
    # The same client with the admin token: the token decides.
    tokened = _https(server, certs, cert="nobody", token=ADMIN)
    assert tokened.request("GET", "/v1/executions")[0] == 200
    tokened.close()
    # No certificate: health is open, the rest needs a token.
    anonymous = _https(server, certs)
    assert anonymous.request("GET", "/v1/health")[0] == 200
    assert anonymous.request("GET", "/v1/executions")[0] == 401
    anonymous.close()


def test_an_expired_server_certificate_and_a_plain_server_are_clear_errors(
    certs: Certs, tmp_path: Path
) -> None:
    tls = ("--tls-cert", certs["expired-server.pem"], "--tls-key", certs["expired-server.key"])
    with ServerProcess(tmp_path / "expired.db", "--token", ADMIN, *tls) as expired:
        done = _orbit(
            "ps", "--server", _url(expired), "--ca-cert", certs["ca.pem"],
            env={"ORBIT_TOKEN": ADMIN},
        )  # fmt: skip
        assert done.stderr.strip() == (
            f"error: cannot reach the ORBIT runtime at {_url(expired)}: "
            "io: invalid peer certificate: Expired"
        )
    with ServerProcess(tmp_path / "plain.db", "--token", ADMIN) as plain:
        done = _orbit(
            "ps", "--server", _url(plain), "--ca-cert", certs["ca.pem"],
            env={"ORBIT_TOKEN": ADMIN},
        )  # fmt: skip
        assert done.stderr.strip() == (
            f"error: cannot reach the ORBIT runtime at {_url(plain)}: "
            "io: received corrupt message of type InvalidContentType"
        )


def _read_response(sock: ssl.SSLSocket, buf: bytes) -> tuple[int, bytes, bytes]:
    """(status, body, what was read beyond it) of one response."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, "closed without an answer"
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(head.split(b" ")[1]), rest[:length], rest[length:]


def test_a_kept_alive_tls_connection_serves_request_after_request(
    server: ServerProcess, certs: Certs
) -> None:
    """After gunicorn's first request, the worker's short path serves a TLS
    connection: pipelined requests, a body in pieces, a pause longer than it
    waits, all with the certificate's identity on every request."""
    context = ssl.create_default_context(cafile=certs["ca.pem"])
    context.load_cert_chain(certs["inventory.pem"], certs["inventory.key"])
    host, port = server.addr.rsplit(":", 1)
    beat = b'{"worker_session_id":"nope"}'
    request = (
        b"POST /v1/workers/heartbeat HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(beat), beat)
    )
    admin_only = b"GET /v1/workers HTTP/1.1\r\nHost: t\r\n\r\n"
    with (
        socket.create_connection((host, int(port))) as raw,
        context.wrap_socket(raw, server_hostname=host) as sock,
    ):
        buf = b""
        for _ in range(5):
            sock.sendall(request)
            status, body, buf = _read_response(sock, buf)
            assert (status, json.loads(body)["error"]["code"]) == (404, "UNKNOWN_SESSION")
        sock.sendall(request + admin_only + request)
        statuses = []
        for _ in range(3):
            status, body, buf = _read_response(sock, buf)
            statuses.append(status)
        assert statuses == [404, 403, 404]
        sock.sendall(request[:20])
        time.sleep(4 * LINGER_S)  # longer than the short path lingers; the rest comes later
        sock.sendall(request[20:])
        status, body, buf = _read_response(sock, buf)
        assert status == 404
        time.sleep(4 * LINGER_S)  # idle: back to gunicorn's poller, then a request again
        sock.sendall(request)
        assert _read_response(sock, buf)[0] == 404


class _RawTls:
    """A TLS client over memory buffers, so that a test can put on the wire
    any part of the records it makes."""

    def __init__(self, addr: str, context: ssl.SSLContext) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._in, self._out, server_hostname=host)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self._out.read())
                self._in.write(self.sock.recv(65536))
        self.sock.sendall(self._out.read())

    def records(self, data: bytes) -> bytes:
        """`data` encrypted, not sent."""
        self.tls.write(data)
        return self._out.read()

    def close(self) -> None:
        self.sock.close()


def test_half_a_tls_record_does_not_hold_a_server_thread(certs: Certs, tmp_path: Path) -> None:
    """The short path reads a TLS connection once it is readable; readable
    means some bytes of a record came, so a peer that sends half a record
    (and nothing more) must not keep the thread waiting for the rest. With
    every thread of a 4-thread server held that way, a fifth client is
    served once the short path gives up on them."""
    tls = ("--tls-cert", certs["server.pem"], "--tls-key", certs["server.key"])
    context = ssl.create_default_context(cafile=certs["ca.pem"])
    request = b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n"
    with ServerProcess(tmp_path / "orbit.db", "--insecure", "--threads", "4", *tls) as proc:
        stalled = [_RawTls(proc.addr, context) for _ in range(4)]
        try:
            for peer in stalled:
                # A whole request, so the short path takes the connection,
                # then the first half of the next request's record.
                first, second = peer.records(request), peer.records(request)
                peer.sock.sendall(first + second[: len(second) // 2])
            client = _https(proc, certs)
            started = time.monotonic()
            status, body = client.request("GET", "/v1/health")
            client.close()
            assert (status, body["status"]) == (200, "ok")
            assert time.monotonic() - started < 25
        finally:
            for peer in stalled:
                peer.close()
