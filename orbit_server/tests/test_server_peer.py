"""The poll's view of its worker's connection (resources/_peer.py) on real
TCP sockets, and a task whose worker hung up before the body was written."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator

import attrs
import falcon.testing
import pytest
import trustme

from orbit_core import ir
from orbit_core.engine import Engine
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_server.app import create_app
from orbit_server.config import ServerConfig
from orbit_server.resources import _peer
from orbit_server.resources._peer import connection_probe, handed_over


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the server's end, the client's end) of one TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname()[:2])
        server, _ = listener.accept()
    with server, client:
        yield server, client


def test_the_probe_tells_a_waiting_client_from_one_that_hung_up(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = pair
    assert connection_probe({}) is None
    connected = connection_probe({"gunicorn.socket": server})
    assert connected is not None
    assert connected() is True
    # A pipelined next request is not a hang-up, and stays unread.
    client.sendall(b"POST")
    assert connected() is True
    assert server.recv(4) == b"POST"
    client.close()
    assert connected() is False
    server.close()
    assert connected() is False


@pytest.fixture
def tls_pair(
    pair: tuple[socket.socket, socket.socket],
) -> Iterator[tuple[ssl.SSLSocket, ssl.SSLSocket]]:
    """The same connection after a TLS handshake."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    raw_server, raw_client = pair
    wrapped: list[ssl.SSLSocket] = []
    accept = threading.Thread(
        target=lambda: wrapped.append(server_context.wrap_socket(raw_server, server_side=True))
    )
    accept.start()
    client = client_context.wrap_socket(raw_client, server_hostname="127.0.0.1")
    accept.join(10)
    with wrapped[0] as server, client:
        yield server, client


@pytest.mark.parametrize("poll", [True, False], ids=["poll", "peek"])
def test_the_probe_works_on_tls_connections(
    tls_pair: tuple[ssl.SSLSocket, ssl.SSLSocket], poll: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not poll:
        monkeypatch.setattr(_peer, "_RDHUP", 0)
    server, client = tls_pair
    connected = connection_probe({"gunicorn.socket": server})
    assert connected is not None
    assert connected() is True
    # A record the client sends while it waits is no hang-up, and stays
    # readable through TLS.
    client.sendall(b"POST")
    assert connected() is True
    assert server.recv(4) == b"POST"
    client.close()
    assert connected() is False
    server.close()
    assert connected() is False


def test_the_peek_probe_works_on_plain_connections(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_peer, "_RDHUP", 0)
    server, client = pair
    connected = connection_probe({"gunicorn.socket": server})
    assert connected is not None and connected() is True
    client.close()
    assert connected() is False


def test_the_body_reports_when_it_cannot_have_been_delivered() -> None:
    calls: list[str] = []

    def undelivered() -> None:
        calls.append("undelivered")

    # Written in full to a connected client: delivered.
    assert list(handed_over(b"{}", lambda: True, undelivered)) == [b"{}"]
    assert list(handed_over(b"{}", None, undelivered)) == [b"{}"]
    assert calls == []
    # The write failed: the server closes the body without asking for more.
    body = handed_over(b"{}", lambda: True, undelivered)
    assert next(body) == b"{}"
    body.close()
    assert calls == ["undelivered"]
    # The client had hung up before the write.
    assert list(handed_over(b"{}", lambda: False, undelivered)) == [b"{}"]
    assert calls == ["undelivered", "undelivered"]


def plain() -> ir.Definition:
    """One `demo.work` step taking nothing and giving nothing."""
    empty = t.RecordType(())
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="Plain",
        version="1.0.0",
        input=empty,
        output=empty,
        steps=(ir.Step("work", "task", task="demo.work", with_=e.Object(())),),
        result=e.Object(()),
        contracts={"demo.work": ir.TaskContract("demo.work", "1.0.0", empty, empty)},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


def test_a_task_for_a_worker_that_hung_up_is_redelivered_at_once(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = pair
    engine = Engine(auto_tick=False)
    try:
        app = falcon.testing.TestClient(create_app(engine, ServerConfig()))
        engine.deploy(plain())
        reply = engine.workers.register("w", "python", [("demo.work", "1.0.0")])
        session = reply["worker_session_id"]
        engine.start("Plain", input={}, execution_id="u-1")
        client.close()
        poll = app.simulate_post(
            "/v1/workers/poll",
            json={"worker_session_id": session, "wait_ms": 0},
            extras={"gunicorn.socket": server},
        )
        assert poll.status_code == 200
        assert poll.json["execution_id"] == "u-1"
        events = engine.history("u-1")["events"]
        assert [e["type"] for e in events[3:]] == [
            "StepDispatched",
            "StepAttemptUncertain",
            "StepScheduled",
        ]
        assert events[4]["reason"] == "worker `w` never received the task"
        again = engine.workers.poll(session, 0)
        assert again is not None and again["redelivery"] is True
    finally:
        engine.close()
