"""Settings from arguments and from the environment."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Client, Worker


def _authorization(fake: FakeRuntime, client: Client) -> str | None:
    fake.routes["GET", "/v1/health"] = lambda call: (200, {})
    with client:
        client.get("/v1/health")
    return fake.calls[-1].headers.get("authorization")


def test_worker_defaults() -> None:
    worker = Worker()
    assert worker.worker_id == f"python-{socket.gethostname()}-{os.getpid()}"
    assert worker.runtime == "python"
    assert worker.concurrency == 4
    assert worker.poll_wait_ms == 20000
    assert worker.client.server == "http://127.0.0.1:7233"
    # Long polls must end before the socket gives up on them.
    assert worker.client.timeout == 35.0


@pytest.mark.parametrize(("given", "resolved"), [(0, 1), (-2, 1), (1, 1), (16, 16)])
def test_concurrency_is_at_least_one(given: int, resolved: int) -> None:
    assert Worker("w", concurrency=given).concurrency == resolved


def test_client_defaults() -> None:
    client = Client()
    assert client.server == "http://127.0.0.1:7233"
    assert client.timeout == 70.0


@pytest.mark.parametrize(
    ("variable", "argument", "expected"),
    [
        ("http://orbit.internal:7300/", None, "http://orbit.internal:7300"),
        ("", None, "http://127.0.0.1:7233"),
        ("http://orbit.internal:7300", "http://other:1/", "http://other:1"),
    ],
)
def test_orbit_server(
    monkeypatch: pytest.MonkeyPatch, variable: str, argument: str | None, expected: str
) -> None:
    monkeypatch.setenv("ORBIT_SERVER", variable)
    assert Client(server=argument).server == expected
    assert Worker("w", server=argument).client.server == expected


@pytest.mark.parametrize(
    ("worker_token", "token", "argument", "expected"),
    [
        ("worker-secret", "admin-secret", None, "Bearer worker-secret"),
        ("", "admin-secret", None, "Bearer admin-secret"),
        (None, "admin-secret", None, "Bearer admin-secret"),
        ("worker-secret", "admin-secret", "mine", "Bearer mine"),
        ("worker-secret", "admin-secret", "", None),
        (None, None, None, None),
    ],
)
@pytest.mark.parametrize("make", [Client, lambda **kw: Worker("w", **kw).client])
def test_token_precedence(
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeRuntime,
    make: Callable[..., Client],
    worker_token: str | None,
    token: str | None,
    argument: str | None,
    expected: str | None,
) -> None:
    for name, value in (("ORBIT_WORKER_TOKEN", worker_token), ("ORBIT_TOKEN", token)):
        if value is not None:
            monkeypatch.setenv(name, value)
    assert _authorization(fake, make(server=fake.url, token=argument)) == expected


def test_a_worker_configured_only_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime
) -> None:
    fake.token = "worker-secret"
    monkeypatch.setenv("ORBIT_SERVER", fake.url + "/")
    monkeypatch.setenv("ORBIT_WORKER_TOKEN", "worker-secret")
    monkeypatch.setenv("ORBIT_TOKEN", "admin-secret")
    worker = Worker("env-worker", poll_wait_ms=200)
    worker.register("a.one", lambda i, c: {"ok": True})
    thread = worker.start()
    try:
        token = fake.enqueue("a.one", {})
        assert fake.result(token).body["output"] == {"ok": True}
    finally:
        worker.stop()
        thread.join(5)
    assert {c.headers["authorization"] for c in fake.calls} == {"Bearer worker-secret"}


def test_tls_variables_are_ignored_for_plain_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORBIT_CA_CERT", "/does/not/exist.pem")
    assert Client(server="http://127.0.0.1:1").server == "http://127.0.0.1:1"


def test_a_missing_ca_file_fails_fast_for_https(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORBIT_CA_CERT", "/does/not/exist.pem")
    with pytest.raises(FileNotFoundError):
        Client(server="https://orbit.internal:7233")
