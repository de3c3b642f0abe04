"""The SDKs over TLS and mutual TLS (chapter 45), with certificates made here.

An `orbit server` serves HTTPS with a client CA and a workers file whose
worker identities are certificates. The CLI deploys over HTTPS; a Python
worker (ORBIT_CA_CERT, ORBIT_CLIENT_CERT, ORBIT_CLIENT_KEY) and a TypeScript
worker (clientCert through node:https) run tasks as the identities their
certificates name, and cannot register as anyone else; a TypeScript client
trusts the CA through NODE_EXTRA_CA_CERTS; an untrusted server is a
connection error in both SDKs. The CLI's errors are tests/test_server_tls.py.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from e2e_processes import ORBIT, TS_SDK, TSX_LOADER, Server, Stack, clean_env
from server_harness import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ADMIN = "admin-token-0123456789abcdef"
WORKFLOW = """
task "tls.step" {
    version "1.0.0"
    input { n: Int }
    output { n: Int }
}

workflow Twice {
    version "1.0.0"
    input { n: Int }
    output { n: Int }

    step first {
        worker "tls.step"
        with { n: input.n }
    }

    step second {
        worker "tls.step"
        with { n: first.n }
    }

    return { n: second.n }
}
"""
WORKERS_FILE = """
[[worker]]
id = "python-1"
client_cert = "python-1.workers.internal"
tasks = ["tls.*"]
runtime = "python"

[[worker]]
id = "node-1"
client_cert = "node-1.workers.internal"
tasks = ["tls.step"]
runtime = "typescript"
"""
PY_WORKER = """
from orbit_sdk import Worker

worker = Worker("python-1", poll_wait_ms=1000)


@worker.task("tls.step")
def step(input, ctx):
    return {"n": input["n"] + 1}


worker.run()
"""
TS_WORKER = """
import { Worker } from "%s";
const worker = new Worker({ workerId: "node-1", pollWaitMs: 1000 });
worker.task("tls.step", { version: "1.0.0" }, (input: { n: number }) => ({ n: input.n + 10 }));
await worker.run();
"""
TS_CLIENT = """
import { Client } from "%s";
const client = new Client({ token: process.env.ADMIN });
const listed = await client.request("GET", "/v1/workflows");
console.log(listed.status);
"""


class TlsServer(Server):
    """`orbit server` over HTTPS, asked with the admin token."""

    def __init__(self, log_dir: Path, db: Path, ca: str, *args: str) -> None:
        super().__init__(log_dir, db, *args)
        self.url = self.url.replace("http://", "https://")
        self._context = ssl.create_default_context(cafile=ca)

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json", "authorization": f"Bearer {ADMIN}"}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._context) as reply:
                raw = reply.read()
                return reply.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("certs")
    ca, workers_ca = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    workers_ca.cert_pem.write_to_path(str(root / "workers-ca.pem"))
    leaves = {
        "server": ca.issue_cert("127.0.0.1", "localhost"),
        "python-1": workers_ca.issue_cert("python-1.workers.internal"),
        "node-1": workers_ca.issue_cert("node-1.workers.internal"),
    }
    for name, leaf in leaves.items():
        (root / f"{name}.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(root / f"{name}.key"))
    (root / "workers.toml").write_text(WORKERS_FILE)
    (root / "twice.orbit").write_text(WORKFLOW)
    return root


@pytest.fixture(scope="module")
def server(module_stack: Stack, certs: Path) -> Iterator[TlsServer]:
    args = (
        "--token", ADMIN, "--workers-file", str(certs / "workers.toml"),
        "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
        "--tls-client-ca", str(certs / "workers-ca.pem"),
    )  # fmt: skip
    db = module_stack.root / "tls.db"
    proc = TlsServer(module_stack.logs, db, str(certs / "ca.pem"), *args)
    module_stack._own(proc)
    proc.start()
    deployed = subprocess.run(
        [ORBIT, "deploy", str(certs / "twice.orbit"), "--server", proc.url],
        env=clean_env({"ORBIT_TOKEN": ADMIN, "ORBIT_CA_CERT": str(certs / "ca.pem")}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert deployed.returncode == 0, deployed.stderr
    yield proc


def _worker_env(server: TlsServer, certs: Path, name: str) -> dict[str, str]:
    return clean_env(
        {
            "ORBIT_SERVER": server.url,
            "ORBIT_CA_CERT": str(certs / "ca.pem"),
            "ORBIT_CLIENT_CERT": str(certs / f"{name}.pem"),
            "ORBIT_CLIENT_KEY": str(certs / f"{name}.key"),
        }
    )


def _run(server: TlsServer, execution_id: str, n: int) -> dict[str, Any]:
    start = {"workflow": "Twice", "execution_id": execution_id, "input": {"n": n}}
    assert server.api("POST", "/v1/executions", start)[0] == 201
    status, state = server.api("GET", f"/v1/executions/{execution_id}/wait?timeout_ms=60000")
    assert status == 200
    return dict(state)


def test_a_python_worker_serves_over_mutual_tls(
    server: TlsServer, certs: Path, tmp_path: Path
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(PY_WORKER)
    log = (tmp_path / "python.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, str(script)],
        env=_worker_env(server, certs, "python-1"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        state = _run(server, "py-1", 1)
        assert state["status"] == "COMPLETED", (tmp_path / "python.log").read_text()
        assert state["output"] == {"n": 3}
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()


def test_a_typescript_worker_serves_over_mutual_tls(
    server: TlsServer, certs: Path, tmp_path: Path
) -> None:
    script = tmp_path / "worker.mts"
    script.write_text(TS_WORKER % (TS_SDK / "src" / "index.ts").as_uri())
    log = (tmp_path / "node.log").open("w")
    worker = subprocess.Popen(
        ["node", "--import", TSX_LOADER.as_uri(), str(script)],
        env=_worker_env(server, certs, "node-1"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(
            lambda: any(
                w["worker_id"] == "node-1" and w["online"]
                for w in server.api("GET", "/v1/workers")[1]["workers"]
            ),
            60,
            "the TypeScript worker to register",
        )
        state = _run(server, "ts-1", 1)
        assert state["status"] == "COMPLETED", (tmp_path / "node.log").read_text()
        assert state["output"] == {"n": 21}
        workers = {w["worker_id"]: w for w in server.api("GET", "/v1/workers")[1]["workers"]}
        assert workers["node-1"]["runtime"] == "typescript"
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()


def test_a_certificate_binds_its_worker_id_in_both_sdks(
    server: TlsServer, certs: Path, tmp_path: Path
) -> None:
    from orbit_sdk import ApiError, Client

    body = {
        "worker_id": "node-1",
        "runtime": "python",
        "contracts": [{"task_name": "tls.step", "contract_version": "1.0.0"}],
    }
    with (
        Client(
            server=server.url,
            ca_cert=str(certs / "ca.pem"),
            client_cert=str(certs / "python-1.pem"),
            client_key=str(certs / "python-1.key"),
        ) as client,
        pytest.raises(ApiError) as refused,
    ):
        client.post("/v1/workers/register", body)
    assert (refused.value.status, refused.value.code) == (403, "FORBIDDEN")
    assert "this credential belongs to worker `python-1`, not `node-1`" in str(refused.value)

    script = tmp_path / "impostor.mts"
    script.write_text(
        f'import {{ Client }} from "{(TS_SDK / "src" / "index.ts").as_uri()}";\n'
        "const client = new Client();\n"
        "try {\n"
        f'  await client.request("POST", "/v1/workers/register", {json.dumps(body)});\n'
        "} catch (err) {\n"
        "  console.log(err.status, err.code, err.message);\n"
        "}\n"
    )
    done = subprocess.run(
        ["node", "--import", TSX_LOADER.as_uri(), str(script)],
        env=_worker_env(server, certs, "python-1"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.startswith("403 FORBIDDEN"), done.stdout + done.stderr
    assert "belongs to worker `python-1`" in done.stdout


def test_a_typescript_client_trusts_the_ca_through_node_extra_ca_certs(
    server: TlsServer, certs: Path, tmp_path: Path
) -> None:
    script = tmp_path / "client.mts"
    script.write_text(TS_CLIENT % (TS_SDK / "src" / "index.ts").as_uri())
    env = clean_env({"ORBIT_SERVER": server.url, "ADMIN": ADMIN})
    env.pop("NODE_EXTRA_CA_CERTS", None)
    command = ["node", "--import", TSX_LOADER.as_uri(), str(script)]
    trusted = subprocess.run(
        command,
        env={**env, "NODE_EXTRA_CA_CERTS": str(certs / "ca.pem")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (trusted.returncode, trusted.stdout.strip()) == (0, "200"), trusted.stderr
    untrusted = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert untrusted.returncode != 0
    assert "CONNECTION" in untrusted.stderr and "certificate" in untrusted.stderr


def test_an_untrusted_server_is_a_python_connection_error(server: TlsServer, certs: Path) -> None:
    from orbit_sdk import ApiError, Client

    with (
        Client(server=server.url, token=ADMIN, ca_cert=str(certs / "workers-ca.pem")) as client,
        pytest.raises(ApiError) as failed,
    ):
        client.get("/v1/workflows")
    assert failed.value.is_connection_error
    assert "certificate verify failed" in str(failed.value)
