"""Connection reuse: keep-alive, and recovering from connections the server closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import ApiError, Client, Worker, _http


@pytest.fixture
def client(fake: FakeRuntime) -> Iterator[Client]:
    fake.routes["GET", "/v1/health"] = lambda call: (200, {"status": "ok"})
    fake.routes["POST", "/v1/executions"] = lambda call: (201, {"execution_id": "e"})
    with Client(server=fake.url) as client:
        yield client


def test_sequential_requests_share_one_connection(fake: FakeRuntime, client: Client) -> None:
    for _ in range(20):
        client.get("/v1/health")
    assert fake.connections == 1


def test_a_busy_worker_keeps_its_connections_open(
    fake: FakeRuntime, make_worker: Callable[..., Worker], start_worker: Callable[[Worker], Worker]
) -> None:
    worker = make_worker(concurrency=2)
    worker.register("a.one", lambda i, c: {})
    start_worker(worker)
    tokens = [fake.enqueue("a.one", {}) for _ in range(100)]
    for token in tokens:
        fake.result(token)
    # Two poll loops, the heartbeat and registration: a handful, not hundreds.
    assert fake.connections <= 5


def test_a_connection_the_server_closed_while_idle_is_replaced(
    fake: FakeRuntime, client: Client
) -> None:
    client.get("/v1/health")
    fake.drop_connections()
    assert client.start("Hello") == "e"
    assert fake.connections == 2


def test_a_replayable_request_is_resent_once_on_a_stale_connection(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    client.get("/v1/health")
    fake.drop_connections()
    # Pretend the close arrived just after the idle check passed.
    monkeypatch.setattr(_http, "_is_dropped", lambda sock: False)

    assert client.get("/v1/health") == {"status": "ok"}
    assert len(fake.calls_to("/v1/health")) == 2


def test_a_start_is_not_resent_on_a_stale_connection(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    client.get("/v1/health")
    fake.drop_connections()
    monkeypatch.setattr(_http, "_is_dropped", lambda sock: False)

    with pytest.raises(ApiError) as caught:
        client.start("Hello")
    assert caught.value.is_connection_error
    assert client.start("Hello") == "e"


def test_a_worker_call_on_a_connection_closed_while_idle_is_sent_again_unchecked(
    monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime, client: Client
) -> None:
    fake.routes["POST", "/v1/workers/heartbeat"] = lambda call: (200, {"cancel": []})
    client.post("/v1/workers/heartbeat", {"worker_session_id": "s"})
    fake.drop_connections()

    def no_check(sock: object) -> bool:
        raise AssertionError("a replayable call needs no idle check")

    # Worker calls skip the check: a stale connection costs a second send.
    monkeypatch.setattr(_http, "_is_dropped", no_check)
    assert client.post("/v1/workers/heartbeat", {"worker_session_id": "s"}) == (
        200,
        {"cancel": []},
    )
    assert fake.connections == 2
    assert len(fake.calls_to("/v1/workers/heartbeat")) == 2
