"""No credential reaches the server's output (chapter 45's redaction).

A real server with every kind of credential configured runs at debug level
while it is called with right and wrong tokens, worker and client tokens
where they are refused, and a token under another scheme; neither its start-up lines nor anything it logs carries
a token (and a workers file's refusals do not print its hashes). A message
that would carry a token has it masked (`logs.configure(secrets=...)`).
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from pathlib import Path

import pytest
from server_harness import ORBIT, ServerProcess

from orbit_server import logs

pytestmark = pytest.mark.timeout(180)

ADMIN = "admin-secret-token-a1b2c3d4e5f6"
SHARED = "shared-worker-secret-f6e5d4c3b2a1"
WORKER = "per-worker-secret-0f1e2d3c4b5a"
CLIENT = "client-secret-9a8b7c6d5e4f"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_no_token_reaches_the_log(tmp_path: Path) -> None:
    workers = tmp_path / "workers.toml"
    workers.write_text(
        f'[[worker]]\nid = "w-1"\ntoken_sha256 = "{_digest(WORKER)}"\ntasks = ["a.*"]\n'
        f'[[client]]\nid = "app"\ntoken_sha256 = "{_digest(CLIENT)}"\nworkflows = ["X*"]\n'
    )
    args = ("--token", ADMIN, "--worker-token", SHARED, "--workers-file", str(workers))
    with ServerProcess(tmp_path / "o.db", *args, env={"ORBIT_LOG": "debug"}) as server:
        api = server.http()
        for token in (ADMIN, SHARED, WORKER, CLIENT, ADMIN[::-1], f"{ADMIN}x"):
            api.get("/v1/executions", token=token)
            api.post("/v1/workflows", {"x": 1}, token=token)
            body = {"worker_id": "w-2", "runtime": "go", "contracts": []}
            api.post("/v1/workers/register", body, token=token)
            api.post("/v1/tasks/complete", {"token": token}, token=token)
        api.request("GET", "/v1/health", headers={"authorization": f"Basic {ADMIN}"})
    log = server.log()
    assert "ORBIT runtime listening" in log
    for secret in (ADMIN, SHARED, WORKER, CLIENT, _digest(WORKER), _digest(CLIENT)):
        assert secret not in log


def test_refusals_at_start_print_no_secret(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[[worker]]\nid = "w"\ntoken_sha256 = "{_digest(WORKER)}"\ntasks = []\n')
    done = subprocess.run(
        [
            ORBIT,
            "server",
            "--db",
            str(tmp_path / "o.db"),
            "--token",
            ADMIN,
            "--workers-file",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().endswith("worker `w` must list at least one task pattern")
    assert ADMIN not in done.stderr and _digest(WORKER) not in done.stderr
    same = subprocess.run(
        [
            ORBIT,
            "server",
            "--db",
            str(tmp_path / "o.db"),
            "--token",
            ADMIN,
            "--worker-token",
            ADMIN,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert same.stderr.strip() == "error: --worker-token must differ from --token"


def test_a_logged_token_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    logs.configure("text", secrets=(ADMIN, SHARED))
    logs.logger().warning(f"header was Bearer {ADMIN}", other=SHARED)
    logs.configure("json", secrets=(ADMIN,))
    logs.logger().error("oops", token=ADMIN)
    text = err.getvalue()
    assert ADMIN not in text and SHARED not in text
    assert text.count("***") == 3


def test_a_short_token_is_masked_only_as_a_whole_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: `--token a` masked every "a" of every line. A token is
    masked where it stands alone (as a header's, a field's or a query's
    value), not inside longer words."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    logs.configure("text", secrets=("a", "s3"))
    logs.logger().info("a database was created at data.db", path="/var/s3/a")
    logs.logger().info("header was Bearer a", query="?token=a&x=1", items="s3,a")
    logs.configure("json", secrets=("a",))
    logs.logger().info("cannot parse", value="a")
    first, second, third = err.getvalue().splitlines()
    assert first.endswith("INFO orbit: *** database was created at data.db path=/var/***/***")
    assert second.endswith("INFO orbit: header was Bearer *** query=?token=***&x=1 items=***,***")
    assert '"value":"***"' in third and '"message":"cannot parse"' in third
