"""The WSGI app in process (Falcon's test client, an in-memory engine): the
error table, the HTTP layer's plain-text refusals and authentication."""

from __future__ import annotations

from collections.abc import Iterator

import falcon.testing
import pytest

from orbit_core.engine import Engine
from orbit_core.errors import OrbitError
from orbit_server.app import create_app
from orbit_server.config import ServerConfig
from orbit_server.errors import STATUS

ADMIN = {"authorization": "Bearer admin"}
WORKER = {"authorization": "Bearer worker"}
JSON = {"content-type": "application/json"}


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine(auto_tick=False)
    yield engine
    engine.close()


@pytest.fixture
def client(engine: Engine) -> falcon.testing.TestClient:
    config = ServerConfig(token="admin", worker_token="worker", max_body=1000)
    return falcon.testing.TestClient(create_app(engine, config))


def test_every_api_code_has_its_status() -> None:
    assert STATUS["UNKNOWN_SESSION"] == 404
    assert STATUS["PAYLOAD_TOO_LARGE"] == 413
    assert STATUS["RESOURCE_EXHAUSTED"] == 429
    assert STATUS["NOT_LEADER"] == 503
    # The book's 27 codes, and those of the extensions beyond it.
    extensions = {
        "INVALID_FILTER": 400,  # where= filters (docs/language/visibility.md)
        "UNKNOWN_STEP": 400,  # restart and fork (docs/restart-and-fork.md)
        "INCOMPATIBLE_VERSION": 409,
        "EFFECTS_REPEATED": 409,
        "CHILD_EXECUTION": 409,
        "ALREADY_PAUSED": 409,  # pause and resume (docs/operating-executions.md)
        "NOT_PAUSED": 409,
        "IDEMPOTENCY_KEY_REUSED": 409,  # idempotent starts (docs/language/flow-control.md)
        "RATE_LIMITED": 429,  # start rates with on_exceed: drop (docs/language/flow-control.md)
    }
    assert {code: STATUS[code] for code in extensions} == extensions
    assert len(STATUS) == 27 + len(extensions)


def test_engine_errors_become_the_envelope(
    engine: Engine, client: falcon.testing.TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for code, status in STATUS.items():

        def fail(code: str = code) -> None:
            raise OrbitError(f"{code} happened", code)

        monkeypatch.setattr(engine, "list_workflows", fail)
        reply = client.simulate_get("/v1/workflows", headers=ADMIN)
        assert reply.status_code == status
        assert reply.json == {"error": {"code": code, "message": f"{code} happened"}}


def test_unexpected_errors_are_500(
    engine: Engine, client: falcon.testing.TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom() -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(engine, "list_workflows", boom)
    reply = client.simulate_get("/v1/workflows", headers=ADMIN)
    assert (reply.status_code, reply.json["error"]["code"]) == (500, "INTERNAL")


def test_authentication(client: falcon.testing.TestClient) -> None:
    assert client.simulate_get("/v1/health").status_code == 200
    assert client.simulate_get("/v1/ready").status_code == 200
    assert client.simulate_get("/v1/executions").status_code == 401
    assert client.simulate_get("/v1/executions", headers=WORKER).status_code == 403
    assert client.simulate_get("/v1/workers", headers=WORKER).status_code == 403
    assert client.simulate_get("/v1/executions", headers=ADMIN).status_code == 200
    assert client.simulate_get("/v1/executions", headers={"authorization": "bearer admin"}).json
    reply = client.simulate_post("/v1/workers/heartbeat", headers={**WORKER, **JSON}, body="{}")
    assert reply.status_code == 422
    assert reply.headers["x-orbit-api-version"] == "orbit-api/1"


def test_open_server_needs_no_credentials(engine: Engine) -> None:
    open_app = falcon.testing.TestClient(create_app(engine, ServerConfig()))
    assert open_app.simulate_get("/v1/executions").status_code == 200


@pytest.mark.parametrize(
    ("body", "headers", "status", "text"),
    [
        ('{"workflow":"W"}', {}, 415, "Expected request with `Content-Type: application/json`"),
        ("", JSON, 400, "Failed to parse the request body as JSON: EOF while parsing a value"),
        ("{", JSON, 400, "Failed to parse the request body as JSON: "),
        ("{}", JSON, 422, "Failed to deserialize the JSON body into the target type: missing"),
        ('{"workflow":1}', JSON, 422, "workflow: invalid type: integer `1`, expected a string"),
        ("[]", JSON, 422, "invalid type: sequence, expected a JSON object"),
        ("{" + " " * 1000 + "}", JSON, 413, "Failed to buffer the request body"),
    ],
)
def test_http_layer_refusals(
    client: falcon.testing.TestClient, body: str, headers: dict[str, str], status: int, text: str
) -> None:
    reply = client.simulate_post("/v1/executions", headers={**ADMIN, **headers}, body=body)
    assert reply.status_code == status
    assert reply.headers["content-type"].startswith("text/plain")
    assert text in reply.text


def test_worker_protocol_shapes(client: falcon.testing.TestClient) -> None:
    headers = {**WORKER, **JSON}
    register = {
        "worker_id": "w",
        "runtime": "Python",
        "contracts": [{"task_name": "a.b", "contract_version": "1.0.0"}],
        "unknown": "ignored",
    }
    session = client.simulate_post("/v1/workers/register", headers=headers, json=register).json
    sid = session["worker_session_id"]
    poll = client.simulate_post(
        "/v1/workers/poll", headers=headers, json={"worker_session_id": sid, "wait_ms": 0}
    )
    assert (poll.status_code, poll.content) == (204, b"")
    bad = client.simulate_post(
        "/v1/workers/poll", headers=headers, json={"worker_session_id": sid, "wait_ms": -1}
    )
    assert bad.status_code == 422
    contracts = {**register, "contracts": [{"task_name": "a.b"}]}
    missing = client.simulate_post("/v1/workers/register", headers=headers, json=contracts)
    assert (missing.status_code, missing.text) == (
        422,
        "Failed to deserialize the JSON body into the target type: "
        "contracts[0]: missing field `contract_version`",
    )
    fail = client.simulate_post(
        "/v1/tasks/fail", headers=headers, json={"token": "nope", "error_code": "X"}
    )
    assert fail.json == {
        "accepted": False,
        "reason": "unknown token (execution finished or token invalid)",
    }


def test_ui_routes_follow_the_flag(engine: Engine) -> None:
    with_ui = falcon.testing.TestClient(create_app(engine, ServerConfig()))
    reply = with_ui.simulate_get("/", headers={"accept": "text/html"})
    assert (reply.status_code, reply.headers["location"]) == (302, "/ui/")
    assert with_ui.simulate_get("/ui/").status_code == 200
    without = falcon.testing.TestClient(create_app(engine, ServerConfig(ui=False)))
    assert without.simulate_get("/ui/").status_code == 404
    assert without.simulate_get("/", headers={"accept": "text/html"}).status_code == 404
    assert without.simulate_get("/ui/app.js").status_code == 404


def test_ui_files_are_served_with_the_security_headers(engine: Engine) -> None:
    client = falcon.testing.TestClient(create_app(engine, ServerConfig()))
    for path, kind in (
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ):
        reply = client.simulate_get(path)
        assert reply.status_code == 200, path
        assert reply.headers["content-type"].startswith(kind)
        assert "script-src 'self'" in reply.headers["content-security-policy"]
        assert reply.headers["x-frame-options"] == "DENY"
        assert reply.headers["x-content-type-options"] == "nosniff"
    # Only the UI's own files, and index.html only as /ui/ itself.
    for path in ("/ui/index.html", "/ui/..%2Fapp.py", "/ui/secret.txt"):
        assert client.simulate_get(path).status_code == 404, path


def test_head_of_a_ui_file_answers_its_headers_without_the_body(engine: Engine) -> None:
    """`curl -sI /ui/` as chapter 47 shows it: 200 and the same headers as GET."""
    client = falcon.testing.TestClient(create_app(engine, ServerConfig()))
    for path in ("/ui/", "/ui/app.js"):
        got, head = client.simulate_get(path), client.simulate_head(path)
        assert head.status_code == 200, path
        assert head.content == b""
        for name in ("content-type", "content-security-policy", "x-frame-options"):
            assert head.headers[name] == got.headers[name], (path, name)
    assert client.simulate_head("/ui/secret.txt").status_code == 404


def test_the_ui_page_has_no_inline_script_or_style(engine: Engine) -> None:
    """The CSP allows neither; an inline one would silently not run."""
    page = falcon.testing.TestClient(create_app(engine, ServerConfig())).simulate_get("/ui/").text
    assert "<script>" not in page and "<style" not in page and "style=" not in page
    assert '<script src="/ui/app.js"' in page


def test_the_ui_assets_stay_under_300_kb_compressed() -> None:
    """Chapter 47's budget for the UI's files, gzip-compressed."""
    import gzip

    from orbit_server.resources.ui import load_assets

    total = sum(len(gzip.compress(data, 9)) for data in load_assets().values())
    assert total < 300 * 1024, f"the web UI's files are {total} bytes compressed"
