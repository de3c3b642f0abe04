"""Chapter 67 against a real `orbit server`: every route, status, error code
and JSON shape, with the admin and shared worker tokens."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import server_ir
from server_harness import Http, RawWorker, ServerProcess

from orbit_core import ir

ADMIN, WORKER = "admin-secret", "worker-secret"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("api") / "orbit.db"
    with ServerProcess(db, "--token", ADMIN, "--worker-token", WORKER) as proc:
        api = proc.http(ADMIN)
        for document in (server_ir.greet(), server_ir.review(), server_ir.countdown()):
            assert api.post("/v1/workflows", document).status == 201
        yield proc


@pytest.fixture
def api(server: ServerProcess) -> Http:
    return server.http(ADMIN)


def _start(api: Http, workflow: str, execution_id: str, **input: Any) -> None:
    reply = api.post(
        "/v1/executions", {"workflow": workflow, "execution_id": execution_id, "input": input}
    )
    assert reply.status == 201, reply


# ---------------------------------------------------------------- health, auth


def test_health_is_open_and_exact(server: ServerProcess) -> None:
    reply = server.http().get("/v1/health")
    assert reply.status == 200
    assert reply.headers["x-orbit-api-version"] == "orbit-api/1"
    assert reply.headers["content-type"] == "application/json"
    assert list(reply.body) == [
        "status",
        "api_version",
        "runtime_version",
        "ir_versions",
        "active_executions",
        "worker_sessions",
        "role",
        "node_id",
        "term",
        "leader",
    ]
    assert reply.body["runtime_version"] == "0.5.0"
    assert reply.body["ir_versions"] == ["orbit-ir/1", "orbit-ir/2"]
    assert (reply.body["status"], reply.body["role"], reply.body["leader"]) == (
        "ok",
        "single",
        None,
    )


def test_ready_is_open(server: ServerProcess) -> None:
    reply = server.http().get("/v1/ready")
    assert (reply.status, reply.raw) == (200, b'{"role":"single","ready":true}')


def test_missing_or_wrong_credentials_are_401_without_the_version_header(
    server: ServerProcess,
) -> None:
    for token in (None, "nope"):
        reply = server.http(token).get("/v1/executions")
        assert reply.status == 401
        assert reply.raw == (
            b'{"error":{"code":"UNAUTHENTICATED","message":"missing or invalid credentials"}}'
        )
        assert "x-orbit-api-version" not in reply.headers
    reply = server.http().get("/v1/executions", headers={"authorization": "Basic abc"})
    assert reply.status == 401


def test_worker_token_is_limited_to_the_worker_protocol(server: ServerProcess) -> None:
    worker = server.http(WORKER)
    forbidden = (
        b'{"error":{"code":"FORBIDDEN","message":'
        b'"worker credentials may only call /v1/workers/* and /v1/tasks/*"}}'
    )
    for method, path in (
        ("GET", "/v1/executions"),
        ("GET", "/v1/workers"),
        ("GET", "/v1/metrics"),
        ("POST", "/v1/workflows"),
    ):
        reply = worker.request(method, path)
        assert (reply.status, reply.raw) == (403, forbidden), path
    reply = RawWorker(worker, "w-auth", [("greeting.compose", "1.0.0")]).register()
    assert reply.status == 200
    assert reply.headers["x-orbit-api-version"] == "orbit-api/1"
    assert worker.post("/v1/tasks/complete", {"token": "zzz"}).body == {
        "accepted": False,
        "reason": "unknown token (execution finished or token invalid)",
    }


def test_admin_token_may_call_the_worker_protocol(api: Http) -> None:
    assert RawWorker(api, "w-admin", [("greeting.compose", "1.0.0")]).register().status == 200


def test_metrics_are_prometheus_text(server: ServerProcess, api: Http) -> None:
    assert server.http().get("/v1/metrics").status == 401
    reply = api.get("/v1/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/plain; version=0.0.4"
    text = reply.text
    assert "# TYPE orbit_executions_started_total counter\n" in text
    assert "# HELP orbit_active_executions Executions not yet finished\n" in text
    # prometheus-client writes every value as a float.
    assert 'orbit_schedules_skipped_total{reason="overlap"} 0.0\n' in text


# ---------------------------------------------------------------- routing


def test_unknown_paths_are_json_not_found(api: Http) -> None:
    reply = api.get("/v1/nope")
    assert reply.status == 404
    assert reply.body["error"]["code"] == "NOT_FOUND"
    assert reply.headers["x-orbit-api-version"] == "orbit-api/1"
    assert api.get("/v1/workers/nope").status == 404


def test_wrong_method_is_405_with_allow(api: Http) -> None:
    reply = api.request("DELETE", "/v1/executions")
    assert reply.status == 405
    assert "GET" in reply.headers["allow"] and "POST" in reply.headers["allow"]
    assert api.get("/v1/workers/poll").status == 405


def test_root_redirects_browsers_to_the_ui(server: ServerProcess) -> None:
    anonymous = server.http()
    reply = anonymous.get("/", headers={"accept": "text/html,application/xhtml+xml"})
    assert (reply.status, reply.headers["location"]) == (302, "/ui/")
    reply = anonymous.get("/", headers={"accept": "application/json"})
    assert (reply.status, reply.body["error"]) == (
        404,
        {
            "code": "NOT_FOUND",
            "message": "no such endpoint; the API is under /v1/ and the web UI under /ui/",
        },
    )
    ui = anonymous.get("/ui/")
    assert ui.status == 200
    assert ui.headers["content-type"].startswith("text/html")
    assert ui.headers["x-frame-options"] == "DENY"


# ---------------------------------------------------------------- definitions


def test_deploy_is_idempotent_and_definitions_immutable(api: Http) -> None:
    document = server_ir.greet()
    reply = api.post("/v1/workflows", document)
    assert (reply.status, reply.body) == (
        200,
        {
            "name": "Greet",
            "version": "1.0.0",
            "definition_hash": document["definition_hash"],
            "created": False,
        },
    )
    other = server_ir.greet(timeout_ms=5000)
    reply = api.post("/v1/workflows", other)
    assert reply.status == 409
    assert reply.body["error"]["code"] == "DEFINITION_CONFLICT"
    tampered = dict(document, description="changed")
    reply = api.post("/v1/workflows", tampered)
    assert (reply.status, reply.body["error"]) == (
        400,
        {
            "code": "INVALID_IR",
            "message": "definition_hash does not match the IR content (was the file modified?)",
        },
    )
    assert api.post("/v1/workflows", [1, 2]).body["error"]["code"] == "INVALID_IR"
    bad = api.post("/v1/workflows", {"ir_version": "orbit-ir/9"})
    assert (bad.status, bad.body["error"]["code"]) == (400, "INVALID_IR")


def test_names_in_deployed_ir_must_be_identifiers(api: Http) -> None:
    """A document the compiler could not have written, hash and all, is
    refused like any malformed IR (issue 36.11a)."""
    document = server_ir.greet()
    document["name"] = "<img src=x onerror=alert(1)>"
    document["definition_hash"] = ir.hash_document(document)
    reply = api.post("/v1/workflows", document)
    assert (reply.status, reply.body["error"]) == (
        400,
        {
            "code": "INVALID_IR",
            "message": '$.name: workflow name "<img src=x onerror=alert(1)>" is not an '
            "identifier (a letter or _, then letters, digits or _)",
        },
    )
    assert api.get("/v1/workflows/%3Cimg%20src=x%20onerror=alert(1)%3E").status == 404


def test_a_parent_before_its_child_is_refused(api: Http) -> None:
    greet = ir.from_json(server_ir.greet())
    child = ir.ChildContract("Ghost", "1.0.0", "sha256:" + "0" * 64, greet.input, greet.output)
    parent = attrs.evolve(
        greet,
        name="Parent",
        steps=(ir.Step("run", "workflow", workflow="Ghost", with_=greet.steps[0].with_),),
        contracts={"workflow:Ghost": child},
    )
    parent = attrs.evolve(parent, definition_hash=ir.definition_hash(parent))
    reply = api.post("/v1/workflows", ir.to_json(parent))
    assert (reply.status, reply.body["error"]["code"]) == (400, "CHILD_NOT_REGISTERED")


def test_list_and_get_definitions(api: Http) -> None:
    for version in ("1.9.0", "1.10.0"):
        api.post("/v1/workflows", server_ir.greet(version=version))
    listed = api.get("/v1/workflows").body["workflows"]
    greets = [w for w in listed if w["name"] == "Greet"]
    assert [w["version"] for w in greets] == ["1.0.0", "1.9.0", "1.10.0"]
    assert [w["name"] for w in listed] == sorted(w["name"] for w in listed)
    assert greets[0] == {
        "name": "Greet",
        "version": "1.0.0",
        "description": None,
        "definition_hash": server_ir.greet()["definition_hash"],
        "steps": ["compose"],
        "tasks": ["greeting.compose"],
    }
    latest = api.get("/v1/workflows/Greet")
    assert (latest.status, latest.body["version"]) == (200, "1.10.0")
    one = api.get("/v1/workflows/Greet/1.0.0")
    assert one.body == server_ir.greet()
    for path, message in (
        ("/v1/workflows/Nope", "workflow Nope is not registered"),
        ("/v1/workflows/Greet/9.9.9", "workflow Greet@9.9.9 is not registered"),
    ):
        reply = api.get(path)
        assert (reply.status, reply.body["error"]) == (
            404,
            {"code": "WORKFLOW_NOT_FOUND", "message": message},
        )


# ---------------------------------------------------------------- executions


def test_start_is_idempotent_and_checked(api: Http) -> None:
    body = {
        "workflow": "Greet",
        "version": "1.0.0",
        "execution_id": "start-1",
        "input": {"name": "Ada"},
    }
    first = api.post("/v1/executions", body)
    assert (first.status, first.raw) == (201, b'{"execution_id":"start-1","created":true}')
    again = api.post("/v1/executions", body)
    assert (again.status, again.raw) == (200, b'{"execution_id":"start-1","created":false}')
    other = api.post("/v1/executions", {**body, "workflow": "Review", "version": None})
    assert (other.status, other.body["error"]) == (
        409,
        {
            "code": "EXECUTION_EXISTS",
            "message": "execution `start-1` already exists for a different workflow",
        },
    )
    bad_id = api.post("/v1/executions", {**body, "execution_id": "a b"})
    assert (bad_id.status, bad_id.body["error"]["code"]) == (400, "INVALID_EXECUTION_ID")
    missing = api.post("/v1/executions", {**body, "version": "9.9.9", "execution_id": "x"})
    assert (missing.status, missing.body["error"]["message"]) == (
        404,
        "workflow Greet@9.9.9 is not registered",
    )
    invalid = api.post("/v1/executions", {**body, "execution_id": "x", "input": {"name": 1}})
    assert (invalid.status, invalid.body["error"]) == (
        400,
        {
            "code": "INVALID_INPUT",
            "message": "workflow input is invalid at $.name: expected String, found an integer",
        },
    )
    generated = api.post("/v1/executions", {"workflow": "Greet", "input": {"name": "Bo"}})
    assert generated.status == 201
    assert len(generated.body["execution_id"]) == 36


def test_http_layer_refusals_are_plain_text(api: Http) -> None:
    no_type = api.post("/v1/executions", raw=b'{"workflow":"Greet"}')
    assert no_type.status == 415
    assert no_type.headers["content-type"].startswith("text/plain")
    json_type = {"content-type": "application/json"}
    broken = api.post("/v1/executions", raw=b"{nope", headers=json_type)
    assert broken.status == 400
    assert broken.text.startswith("Failed to parse the request body as JSON: ")
    missing = api.post("/v1/executions", {"input": {}})
    assert (missing.status, missing.text) == (
        422,
        "Failed to deserialize the JSON body into the target type: missing field `workflow`",
    )
    mistyped = api.post("/v1/executions", {"workflow": 5})
    assert mistyped.status == 422
    assert api.post("/v1/executions", [1]).status == 422
    bad_limit = api.get("/v1/executions?limit=ten")
    assert bad_limit.status == 400
    assert bad_limit.headers["content-type"].startswith("text/plain")


def test_list_executions_filters_and_limits(api: Http) -> None:
    _start(api, "Review", "list-1", order_id="1")
    _start(api, "Review", "list-2", order_id="2")
    rows = api.get("/v1/executions?workflow=Review&status=running&limit=1000").body["executions"]
    ids = [r["execution_id"] for r in rows]
    assert ids.index("list-2") < ids.index("list-1")
    assert set(rows[0]) == {
        "execution_id",
        "workflow",
        "version",
        "status",
        "created_at_ms",
        "updated_at_ms",
    }
    assert {r["status"] for r in rows} == {"RUNNING"}
    assert len(api.get("/v1/executions?limit=1").body["executions"]) == 1
    assert len(api.get("/v1/executions?limit=0").body["executions"]) == 1
    assert api.get("/v1/executions?status=FAILED&workflow=Review").body == {"executions": []}


def test_get_history_and_not_found(api: Http) -> None:
    _start(api, "Review", "state-1", order_id="7")
    state = api.get("/v1/executions/state-1").body
    assert (state["id"], state["workflow"], state["version"], state["status"]) == (
        "state-1",
        "Review",
        "1.0.0",
        "RUNNING",
    )
    assert state["input"] == {"order_id": "7"}
    assert state["units"]["decision"]["status"] == "WAITING"
    history = api.get("/v1/executions/state-1/history").body
    assert list(history) == ["execution_id", "events"]
    assert [e["type"] for e in history["events"][:2]] == ["WorkflowCreated", "WorkflowStarted"]
    assert history["events"][-1]["seq"] == state["last_seq"]
    for path in (
        "/v1/executions/ghost",
        "/v1/executions/ghost/history",
        "/v1/executions/ghost/wait?timeout_ms=10",
        "/v1/executions/ghost/queries/status",
    ):
        reply = api.get(path)
        assert (reply.status, reply.body["error"]) == (
            404,
            {"code": "NOT_FOUND", "message": "execution `ghost` not found"},
        )
    assert api.post("/v1/executions/ghost/cancel").status == 404
    assert api.post("/v1/executions/ghost/signals/decision", {}).status == 404


def test_history_of_runs(api: Http) -> None:
    _start(api, "Countdown", "count-1", n=3)
    final = api.get("/v1/executions/count-1/wait?timeout_ms=10000").body
    assert (final["status"], final["run"]) == ("COMPLETED", 3)
    first = api.get("/v1/executions/count-1/history?run=1").body
    assert first["run"] == 1
    assert first["events"][-1]["type"] == "WorkflowContinuedAsNew"
    assert first["events"][-1]["next_run"] == 2
    assert api.get("/v1/executions/count-1/history").body["run"] == 3
    missing = api.get("/v1/executions/count-1/history?run=7")
    assert (missing.status, missing.raw) == (
        404,
        b'{"error":{"code":"RUN_NOT_FOUND","message":'
        b'"execution `count-1` has runs 1 to 3; there is no run 7"}}',
    )
    assert api.get("/v1/executions/count-1/history?run=x").status == 400


def test_wait_returns_at_the_timeout_or_the_end(api: Http) -> None:
    _start(api, "Review", "wait-1", order_id="1")
    began = time.monotonic()
    reply = api.get("/v1/executions/wait-1/wait?timeout_ms=300")
    assert 0.25 <= time.monotonic() - began < 5
    assert reply.body["status"] == "RUNNING"
    api.post("/v1/executions/wait-1/cancel")
    done = api.get("/v1/executions/wait-1/wait?timeout_ms=10000")
    assert done.body["status"] == "CANCELLED"


def test_cancel(api: Http) -> None:
    _start(api, "Review", "cancel-1", order_id="1")
    reply = api.post("/v1/executions/cancel-1/cancel", {"reason": "customer withdrew"})
    assert reply.status == 200
    assert (reply.body["id"], reply.body["status"]) == ("cancel-1", "CANCELLED")
    assert reply.body["compensation"] == "none"
    events = api.get("/v1/executions/cancel-1/history").body["events"]
    assert {"type": "CancelRequested", "reason": "customer withdrew"}.items() <= next(
        e for e in events if e["type"] == "CancelRequested"
    ).items()
    again = api.post("/v1/executions/cancel-1/cancel")
    assert (again.status, again.raw) == (
        409,
        b'{"error":{"code":"EXECUTION_FINISHED","message":"execution is already CANCELLED"}}',
    )
    _start(api, "Review", "cancel-2", order_id="2")
    plain = api.post("/v1/executions/cancel-2/cancel")
    events = api.get("/v1/executions/cancel-2/history").body["events"]
    assert plain.status == 200
    assert any(e.get("reason") == "requested via API" for e in events)


def test_signals(api: Http) -> None:
    _start(api, "Review", "sig-1", order_id="1")
    unknown = api.post("/v1/executions/sig-1/signals/decisoin", {"approved": True})
    assert (unknown.status, unknown.body["error"]) == (
        404,
        {
            "code": "UNKNOWN_SIGNAL",
            "message": "Review@1.0.0 has no signal `decisoin`; declared: decision",
        },
    )
    invalid = api.post("/v1/executions/sig-1/signals/decision", {"approved": "yes"})
    assert (invalid.status, invalid.body["error"]) == (
        422,
        {
            "code": "SIGNAL_PAYLOAD_INVALID",
            "message": "payload for signal `decision` is invalid at $.approved: "
            "expected Bool, found a string",
        },
    )
    empty = api.post("/v1/executions/sig-1/signals/decision")
    assert (empty.status, empty.body["error"]["code"]) == (422, "SIGNAL_PAYLOAD_INVALID")
    no_type = api.post("/v1/executions/sig-1/signals/decision", raw=b'{"approved":true}')
    assert no_type.status == 415
    broken = api.post(
        "/v1/executions/sig-1/signals/decision",
        raw=b"{",
        headers={"content-type": "application/json"},
    )
    assert broken.status == 400
    ok = api.post("/v1/executions/sig-1/signals/decision", {"approved": True, "note": "fine"})
    assert ok.status == 200
    seq = ok.body["seq"]
    assert ok.body == {"execution_id": "sig-1", "signal": "decision", "accepted": True, "seq": seq}
    state = api.get("/v1/executions/sig-1").body
    assert state["signals"][0]["seq"] == seq
    assert state["signals"][0]["delivered_to"] == "decision"
    api.post("/v1/executions/sig-1/cancel")
    finished = api.post("/v1/executions/sig-1/signals/whatever", {})
    assert (finished.status, finished.body["error"]["code"]) == (409, "EXECUTION_FINISHED")


def test_queries(api: Http) -> None:
    _start(api, "Review", "query-1", order_id="1")
    reply = api.get("/v1/executions/query-1/queries/status")
    assert reply.raw == (b'{"execution_id":"query-1","query":"status","value":{"approved":null}}')
    unknown = api.get("/v1/executions/query-1/queries/stat")
    assert (unknown.status, unknown.body["error"]) == (
        404,
        {
            "code": "UNKNOWN_QUERY",
            "message": "Review@1.0.0 has no query `stat`; declared: status, broken",
        },
    )
    failed = api.get("/v1/executions/query-1/queries/broken")
    assert (failed.status, failed.body["error"]["code"]) == (422, "QUERY_FAILED")
    assert failed.body["error"]["message"].startswith("evaluating query `broken`: ")


def test_workers_list(api: Http) -> None:
    worker = RawWorker(api, "ts-1", [("greeting.compose", "1.0.0")], runtime="TypeScript")
    worker.register()
    rows = {w["worker_id"]: w for w in api.get("/v1/workers").body["workers"]}
    row = rows["ts-1"]
    assert row["runtime"] == "typescript"
    assert row["sdk"] == "raw-test"
    assert row["contracts"] == [{"task_name": "greeting.compose", "contract_version": "1.0.0"}]
    assert (row["online"], row["sessions"], row["inflight"]) == (True, 1, 0)
    assert set(row) == {
        "worker_id",
        "runtime",
        "sdk",
        "contracts",
        "last_seen_ms",
        "registered_at_ms",
        "online",
        "sessions",
        "inflight",
    }
