"""Authorisation on the wire of a real `orbit server` (issue 11 #1).

Every route, sent as raw bytes (like `curl --path-as-is`) in the spellings
that once slipped past the credential check (`//v1/...`, `%2F`, dot segments,
trailing and doubled slashes, case), with no credential (or a wrong one) and
the worker token; each request goes once as the first request of a connection
(gunicorn's parser) and once kept alive (the worker's short path). None may be
answered by a resource, and afterwards the admin finds nothing deployed,
started, signalled or cancelled. The exhaustive matrix over every responder is
orbit_server/tests/test_server_auth_routes.py; this is its check end to end.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import server_ir
from server_harness import Http, ServerProcess

ADMIN, WORKER = "admin-secret-0123456789", "worker-secret-0123456789"
VICTIM = "victim-1"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("authz") / "orbit.db"
    with ServerProcess(db, "--token", ADMIN, "--worker-token", WORKER) as proc:
        api = proc.http(ADMIN)
        assert api.post("/v1/workflows", server_ir.review()).status == 201
        start = {"workflow": "Review", "execution_id": VICTIM, "input": {"order_id": "o-1"}}
        assert api.post("/v1/executions", start).status == 201
        yield proc


def _exchange(sock: socket.socket, request: bytes) -> tuple[int, bytes]:
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed without an answer to {request[:80]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk
    return int(lines[0].split(" ")[1]), body[:length]


def _request(method: str, target: str, token: str | None, body: Any) -> bytes:
    head = [f"{method} {target} HTTP/1.1", "Host: t"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    data = b"" if body is None else orjson.dumps(body)
    if body is not None:
        head.append("Content-Type: application/json")
    head.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


def _spellings(path: str) -> list[str]:
    rest = path[1:]
    return sorted(
        {
            path,
            "/" + path,
            "///" + rest,
            "/%2F" + rest,
            "/%2f%2F" + rest,
            "/" + rest.replace("/", "%2F"),
            "/" + rest.replace("/", "//"),
            "/./" + rest,
            "/../" + rest,
            "/x/../" + rest,
            "/%2e/" + rest,
            path + "/",
            path + "%2F",
            path.upper(),
            "/V" + rest[1:],
            path + "?limit=1",
        }
    )


ATTACK_SCHEDULE = {
    "schedule_id": "attack",
    "workflow": "Review",
    "interval": "1s",
    "input": {"order_id": "x"},
}
# (method, path, body): every route of chapter 67 that needs a credential,
# with a body that would do harm if the request got through.
ADMIN_ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/v1/metrics", None),
    ("POST", "/v1/workflows", server_ir.greet()),
    ("GET", "/v1/workflows", None),
    ("GET", "/v1/workflows/Review", None),
    ("GET", "/v1/workflows/Review/1.0.0", None),
    ("POST", "/v1/executions", {"workflow": "Review", "execution_id": "attack", "input": {}}),
    ("GET", "/v1/executions", None),
    ("GET", f"/v1/executions/{VICTIM}", None),
    ("GET", f"/v1/executions/{VICTIM}/history", None),
    ("GET", f"/v1/executions/{VICTIM}/wait?timeout_ms=0", None),
    ("POST", f"/v1/executions/{VICTIM}/cancel", {"reason": "attack"}),
    ("POST", f"/v1/executions/{VICTIM}/signals/decision", {"approved": True}),
    ("GET", f"/v1/executions/{VICTIM}/queries/status", None),
    ("GET", "/v1/workers", None),
    ("POST", "/v1/schedules", ATTACK_SCHEDULE),
    ("GET", "/v1/schedules", None),
    ("GET", "/v1/schedules/attack", None),
    ("PATCH", "/v1/schedules/attack", {"paused": False}),
    ("DELETE", "/v1/schedules/attack", None),
    ("POST", "/v1/schedules/attack/pause", None),
    ("POST", "/v1/schedules/attack/resume", None),
    ("POST", "/v1/schedules/attack/trigger", None),
]
WORKER_ROUTES: list[tuple[str, str, Any]] = [
    (
        "POST",
        "/v1/workers/register",
        {
            "worker_id": "intruder",
            "runtime": "python",
            "contracts": [{"task_name": "reviews.record", "contract_version": "1.0.0"}],
        },
    ),
    ("POST", "/v1/workers/heartbeat", {"worker_session_id": "s"}),
    ("POST", "/v1/workers/poll", {"worker_session_id": "s", "wait_ms": 0}),
    ("POST", "/v1/workers/unregister", {"worker_session_id": "s"}),
    ("POST", "/v1/tasks/complete", {"token": "t", "output": {}}),
    ("POST", "/v1/tasks/fail", {"token": "t", "error_code": "E"}),
]


def _attempts() -> Iterator[tuple[str, str, Any, str | None, set[int]]]:
    """(method, target, body, credential, statuses allowed as the answer)."""
    for method, path, body in ADMIN_ROUTES:
        for token, refusal in ((None, 401), (WORKER, 403)):
            for target in _spellings(path):
                yield method, target, body, token, {refusal, 404}
    for method, path, body in WORKER_ROUTES:
        for target in _spellings(path):
            for token in (None, "wrong-token") if target == path else (None,):
                yield method, target, body, token, {401, 404}


def test_no_spelling_of_a_route_passes_without_its_credential(server: ServerProcess) -> None:
    host, port = server.addr.rsplit(":", 1)
    refused = 0
    for method, target, body, token, allowed in _attempts():
        request = _request(method, target, token, body)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            # The first request of a connection goes through gunicorn's
            # parser, the second (kept alive) through the worker's own.
            for path in ("gunicorn", "short path"):
                status, answer = _exchange(sock, request)
                assert status in allowed, (path, method, target, token, status, answer)
                if status in (401, 403):
                    refused += 1
                    code = "UNAUTHENTICATED" if status == 401 else "FORBIDDEN"
                    assert orjson.loads(answer)["error"]["code"] == code
    assert refused > 300
    api = server.http(ADMIN)
    assert [w["name"] for w in api.get("/v1/workflows").body["workflows"]] == ["Review"]
    assert api.get("/v1/executions/attack").status == 404
    assert api.get(f"/v1/executions/{VICTIM}").body["status"] == "RUNNING"
    kinds = [event["type"] for event in api.get(f"/v1/executions/{VICTIM}/history").body["events"]]
    assert kinds == ["WorkflowCreated", "WorkflowStarted", "SignalAwaitStarted"]
    assert api.get("/v1/workers").body["workers"] == []
    assert api.get("/v1/schedules").body == {"schedules": []}


def test_the_right_credential_works_in_any_spelling_that_routes(server: ServerProcess) -> None:
    """The refusals above are the check's doing: the same odd spellings with
    the right token reach the resource."""
    host, port = server.addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        for target in (f"//v1/executions/{VICTIM}", f"/%2Fv1/executions/{VICTIM}"):
            status, answer = _exchange(sock, _request("GET", target, ADMIN, None))
            assert status == 200, answer
            assert orjson.loads(answer)["id"] == VICTIM
        status, _ = _exchange(sock, _request("GET", "//v1/workers", WORKER, None))
        assert status == 403
        heartbeat = {"worker_session_id": "nope"}
        status, _ = _exchange(sock, _request("POST", "//v1/workers/heartbeat", WORKER, heartbeat))
        assert status == 404  # UNKNOWN_SESSION: the worker token reached the protocol


def test_open_routes_stay_open(server: ServerProcess) -> None:
    anonymous = Http(server.addr)
    try:
        assert anonymous.get("/v1/health").status == 200
        assert anonymous.get("//v1/ready").status == 200
        assert anonymous.get("/ui/").status == 200
    finally:
        anonymous.close()
