"""Client methods, the requests they send and how errors become ApiError."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sdk_fake_runtime import Answer, Call, FakeRuntime

from orbit_sdk import ApiError, Client


@pytest.fixture
def client(fake: FakeRuntime) -> Iterator[Client]:
    with Client(server=fake.url, token="admin-secret") as client:
        yield client


def _answer(status: int, body: Any) -> Any:
    return lambda call: (status, body)


def test_start_sends_only_the_given_fields_and_returns_the_id(
    fake: FakeRuntime, client: Client
) -> None:
    fake.routes["POST", "/v1/executions"] = _answer(201, {"execution_id": "e-1", "created": True})

    assert client.start("Hello") == "e-1"
    assert client.start("Hello", {"name": "Ada"}, version="1.1.0", execution_id="hello-ada") == (
        "e-1"
    )

    first, second = fake.calls_to("/v1/executions")
    assert first.body == {"workflow": "Hello"}
    assert second.body == {
        "workflow": "Hello",
        "input": {"name": "Ada"},
        "version": "1.1.0",
        "execution_id": "hello-ada",
    }
    assert first.headers["authorization"] == "Bearer admin-secret"
    assert first.headers["content-type"] == "application/json"


def test_wait_long_polls_with_the_timeout(fake: FakeRuntime, client: Client) -> None:
    state = {"id": "order/1", "status": "COMPLETED", "output": {"ok": True}}
    fake.routes["GET", "/v1/executions/order%2F1/wait"] = _answer(200, state)

    assert client.wait("order/1", timeout_ms=1500) == state
    assert client.wait("order/1") == state

    calls = fake.calls_to("/v1/executions/order%2F1/wait")
    assert [c.path for c in calls] == [
        "/v1/executions/order%2F1/wait?timeout_ms=1500",
        "/v1/executions/order%2F1/wait?timeout_ms=30000",
    ]
    assert calls[0].method == "GET"


def test_signal_posts_the_payload_and_returns_the_seq(fake: FakeRuntime, client: Client) -> None:
    fake.routes["POST", "/v1/executions/order-A-100/signals/review"] = _answer(
        200, {"execution_id": "order-A-100", "signal": "review", "accepted": True, "seq": 5}
    )

    assert client.signal("order-A-100", "review", {"approved": True, "reviewer": "dana"}) == 5
    assert client.signal("order-A-100", "review") == 5

    first, second = fake.calls_to("/v1/executions/order-A-100/signals/review")
    assert first.body == {"approved": True, "reviewer": "dana"}
    assert second.body == {}


def test_signal_seq_may_be_null_in_a_shared_cluster(fake: FakeRuntime, client: Client) -> None:
    fake.routes["POST", "/v1/executions/x/signals/go"] = _answer(200, {"seq": None})
    assert client.signal("x", "go") is None


def test_query_returns_the_value(fake: FakeRuntime, client: Client) -> None:
    value = {"needs_approval": True, "approved": None, "reviewer": None, "charged": False}
    fake.routes["GET", "/v1/executions/order-A-100/queries/status"] = _answer(
        200, {"execution_id": "order-A-100", "query": "status", "value": value}
    )

    assert client.query("order-A-100", "status") == value
    [call] = fake.calls_to("/v1/executions/order-A-100/queries/status")
    assert call.body is None
    assert "content-type" not in call.headers


def test_request_get_and_post(fake: FakeRuntime, client: Client) -> None:
    fake.routes["GET", "/v1/health"] = _answer(200, {"status": "ok"})
    fake.routes["POST", "/v1/executions/e/cancel"] = _answer(200, {"id": "e"})
    fake.routes["POST", "/v1/empty"] = _answer(204, None)

    assert client.get("/v1/health") == {"status": "ok"}
    assert client.request("GET", "/v1/health") == (200, {"status": "ok"})
    assert client.post("/v1/executions/e/cancel", {"reason": "r"}) == (200, {"id": "e"})
    assert client.request("POST", "/v1/empty", {}) == (204, None)


@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (
            422,
            {"error": {"code": "SIGNAL_PAYLOAD_INVALID", "message": "payload is invalid"}},
            "SIGNAL_PAYLOAD_INVALID",
            "payload is invalid",
        ),
        (
            403,
            {"error": {"code": "FORBIDDEN", "message": "worker credentials may only call"}},
            "FORBIDDEN",
            "worker credentials may only call",
        ),
        (
            422,
            "Failed to deserialize the JSON body: missing field `workflow`",
            "HTTP_ERROR",
            "Failed to deserialize the JSON body: missing field `workflow`",
        ),
        (404, None, "HTTP_ERROR", "Not Found"),
        (500, {"unexpected": "shape"}, "HTTP_ERROR", '{"unexpected": "shape"}'),
    ],
)
def test_error_answers_become_api_errors(
    fake: FakeRuntime, client: Client, status: int, body: Any, code: str, message: str
) -> None:
    fake.routes["POST", "/v1/x"] = _answer(status, body)

    with pytest.raises(ApiError) as caught:
        client.post("/v1/x", {})

    error = caught.value
    assert (error.status, error.code, error.message) == (status, code, message)
    assert str(error) == f"{code} ({status}): {message}"
    assert not error.is_connection_error


def test_signal_and_query_errors(fake: FakeRuntime, client: Client) -> None:
    with pytest.raises(ApiError) as caught:
        client.query("missing", "status")
    assert (caught.value.status, caught.value.code) == (404, "NOT_FOUND")


def test_an_unreachable_runtime_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = Client(server=f"http://127.0.0.1:{port}")

    with pytest.raises(ApiError) as caught:
        client.get("/v1/health")

    error = caught.value
    assert (error.status, error.code) == (0, "CONNECTION")
    assert error.is_connection_error
    assert error.message == (
        f"cannot reach ORBIT runtime at http://127.0.0.1:{port}: "
        "<urlopen error [Errno 111] Connection refused>"
    )
    assert type(error).__module__ == "orbit_sdk.client"


def test_a_server_that_hangs_up_is_a_connection_error(fake: FakeRuntime, client: Client) -> None:
    def hang_up(call: Call) -> Any:
        raise ConnectionError("dropped")

    fake.routes["GET", "/v1/hang"] = hang_up

    with pytest.raises(ApiError) as caught:
        client.get("/v1/hang")
    assert caught.value.is_connection_error
    assert caught.value.message.endswith("Remote end closed connection without response")


def test_a_socket_timeout_is_a_connection_error(fake: FakeRuntime) -> None:
    answered = threading.Event()

    def slow(call: Call) -> Answer:
        answered.wait(5)  # set once the client has given up
        return 200, {}

    fake.routes["GET", "/v1/slow"] = slow
    try:
        with Client(server=fake.url, timeout=0.2) as client, pytest.raises(ApiError) as caught:
            client.get("/v1/slow")
    finally:
        answered.set()
    assert caught.value.is_connection_error
    assert caught.value.message.endswith(": timed out")


def test_no_token_sends_no_authorization_header(fake: FakeRuntime) -> None:
    fake.routes["GET", "/v1/health"] = _answer(200, {})
    with Client(server=fake.url, token="") as client:
        client.get("/v1/health")
    assert "authorization" not in fake.calls[0].headers
    assert fake.calls[0].headers["user-agent"] == "orbit-python/0.1.0"


def test_the_server_url_may_carry_a_base_path(fake: FakeRuntime) -> None:
    fake.routes["GET", "/orbit/v1/health"] = _answer(200, {"status": "ok"})
    with Client(server=fake.url + "/orbit/") as client:
        assert client.server == fake.url + "/orbit"
        assert client.get("/v1/health") == {"status": "ok"}


def test_an_invalid_server_url_is_refused() -> None:
    with pytest.raises(ValueError, match="expected http:// or https://"):
        Client(server="127.0.0.1:7233")
