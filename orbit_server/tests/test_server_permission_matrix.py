"""Chapter 45's permission matrix, every cell (issue 25).

Every route and method of the app, taken from the app's own route table, is
called with every kind of credential against a real engine, and each answer
is compared with this test's own copy of the book's table (`BOOK`, keyed by
the responder that serves the route; a route it does not know fails the
test): the exact status, error code and message of each refusal, and for
each allowed call an answer from the resource itself (never 401 or 403).
List routes are checked for what a client identity sees in them.

Credential kinds: no authentication configured; the admin token; the shared
worker token; a per-worker identity by token and by certificate; client
identities by token and by certificate, one granted each single action, one
granted everything but on other workflows; no credential, a wrong token, a
non-bearer scheme, and a well-formed token of an identity this server does
not know; a verified certificate that matches no entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import attrs
import falcon
import falcon.inspect
import falcon.testing
import pytest

from orbit_core import ir
from orbit_core.engine import Engine
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_server import identities
from orbit_server.app import create_app
from orbit_server.config import ServerConfig

ADMIN, SHARED = "admin-token-0123456789", "shared-worker-token-0123456789"
WORKFLOW, OTHER = "PrintLabels", "Review"
EXECUTION = "labels-1"


def _token(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


SINGLE_ACTIONS = ("start", "signal", "query", "read", "cancel", "schedule")
WORKERS_FILE: dict[str, Any] = {
    "worker": [
        {
            "id": "payments-1",
            "token_sha256": _digest(_token("payments-1")),
            "tasks": ["payments.*"],
            "runtime": "python",
        },
        {"id": "inventory", "client_cert": "inventory.workers.internal", "tasks": ["*"]},
    ],
    "client": [
        *(
            {
                "id": f"only-{action}",
                "token_sha256": _digest(_token(f"only-{action}")),
                "workflows": ["Print*"],
                "actions": [action],
            }
            for action in SINGLE_ACTIONS
        ),
        {
            "id": "everything",
            "token_sha256": _digest(_token("everything")),
            "workflows": [WORKFLOW],
            "actions": list(SINGLE_ACTIONS),
        },
        {
            "id": "elsewhere",
            "token_sha256": _digest(_token("elsewhere")),
            "workflows": [OTHER],
            "actions": list(SINGLE_ACTIONS),
        },
        {
            "id": "ops-console",
            "client_cert": "ops-console.clients.internal",
            "workflows": ["*"],
            "actions": ["read", "cancel"],
        },
    ],
}


class _Peer:
    """A TLS socket whose client presented a verified certificate."""

    def __init__(self, name: str) -> None:
        self._cert = {
            "subject": ((("commonName", name),),),
            "subjectAltName": (("DNS", name),),
        }

    def getpeercert(self) -> dict[str, Any]:
        return self._cert


@attrs.frozen
class Credential:
    headers: dict[str, str] = attrs.field(factory=dict)
    peer: str | None = None
    # What the book calls the caller: admin, shared, worker, client, none, unmatched.
    column: str = "none"
    client: str | None = None  # the client identity's id
    actions: tuple[str, ...] = ()
    workflows: tuple[str, ...] = ()
    worker_id: str = "payments-1"  # the id it registers under


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


CREDENTIALS: dict[str, Credential] = {
    "none": Credential(),
    "wrong token": Credential(_bearer("not-a-token")),
    "basic scheme": Credential({"authorization": f"Basic {ADMIN}"}),
    "unknown identity": Credential(_bearer(_token("someone-elses-worker"))),
    "admin": Credential(_bearer(ADMIN), column="admin"),
    "shared worker": Credential(_bearer(SHARED), column="shared"),
    "worker token": Credential(_bearer(_token("payments-1")), column="worker"),
    "worker certificate": Credential(
        peer="inventory.workers.internal", column="worker", worker_id="inventory"
    ),
    "unmatched certificate": Credential(peer="nobody.example", column="unmatched"),
    "client everything": Credential(
        _bearer(_token("everything")),
        column="client",
        client="everything",
        actions=SINGLE_ACTIONS,
        workflows=(WORKFLOW,),
    ),
    "client elsewhere": Credential(
        _bearer(_token("elsewhere")),
        column="client",
        client="elsewhere",
        actions=SINGLE_ACTIONS,
        workflows=(OTHER,),
    ),
    "client certificate": Credential(
        peer="OPS-CONSOLE.clients.internal",
        column="client",
        client="ops-console",
        actions=("read", "cancel"),
        workflows=(WORKFLOW, OTHER),
    ),
    # A token comes with the certificate: the token decides.
    "admin token and unmatched certificate": Credential(
        _bearer(ADMIN), peer="nobody.example", column="admin"
    ),
    **{
        f"client with only {action}": Credential(
            _bearer(_token(f"only-{action}")),
            column="client",
            client=f"only-{action}",
            actions=(action,),
            workflows=(WORKFLOW,),
        )
        for action in SINGLE_ACTIONS
    },
}

# The book's matrix, by responder: ("open" | "admin" | "worker" | an action
# a client identity needs | "list": a client sees the workflows it may read).
BOOK: dict[tuple[str, str], str] = {
    ("Health", "on_get"): "open",
    ("Ready", "on_get"): "open",
    ("Root", "on_get"): "open",
    ("Ui", "on_get"): "open",
    ("Ui", "on_get_asset"): "open",
    ("Ui", "on_head"): "open",
    ("Ui", "on_head_asset"): "open",
    ("Metrics", "on_get"): "admin",
    ("OpenApi", "on_get"): "admin",
    ("Workflows", "on_post"): "admin",
    ("Workflows", "on_get"): "list",
    ("Workflows", "on_get_latest"): "read definition",
    ("Workflows", "on_get_version"): "read definition",
    ("Executions", "on_post"): "start",
    ("Executions", "on_get"): "list",
    ("Executions", "on_get_one"): "read",
    ("Executions", "on_get_history"): "read",
    ("Executions", "on_get_wait"): "read",
    ("Executions", "on_post_cancel"): "cancel",
    ("Executions", "on_post_signal"): "signal",
    ("Executions", "on_get_query"): "query",
    ("Schedules", "on_post"): "schedule",
    ("Schedules", "on_get"): "schedule list",
    ("Schedules", "on_get_one"): "schedule",
    ("Schedules", "on_patch_one"): "schedule",
    ("Schedules", "on_delete_one"): "schedule",
    ("Schedules", "on_post_pause"): "schedule",
    ("Schedules", "on_post_resume"): "schedule",
    ("Schedules", "on_post_trigger"): "schedule",
    ("Workers", "on_get"): "admin",
    ("WorkerProtocol", "on_post_register"): "worker",
    ("WorkerProtocol", "on_post_heartbeat"): "worker",
    ("WorkerProtocol", "on_post_poll"): "worker",
    ("WorkerProtocol", "on_post_unregister"): "worker",
    ("WorkerProtocol", "on_post_complete"): "worker",
    ("WorkerProtocol", "on_post_fail"): "worker",
    # Beyond the book: pausing, resuming and restarting act on a run
    # (cancel), a fork starts an execution (start); the census and a
    # migration plan read the workflow, moving executions is the operator's.
    ("Executions", "on_post_pause"): "cancel",
    ("Executions", "on_post_resume"): "cancel",
    ("Executions", "on_post_restart"): "cancel",
    ("Executions", "on_post_fork"): "start",
    ("Versions", "on_get"): "read definition",
    ("Versions", "on_get_plan"): "read definition",
    ("Versions", "on_post_plan"): "admin",
}
VALUES = {
    "execution_id": EXECUTION,
    "name": WORKFLOW,
    "version": "1.0.0",
    "schedule_id": "nightly",
}
BODIES: dict[tuple[str, str], Any] = {
    ("Workflows", "on_post"): {},
    ("Executions", "on_post"): {"workflow": WORKFLOW, "input": {}},
    ("Executions", "on_post_cancel"): {},
    ("Executions", "on_post_signal"): {},
    ("Executions", "on_post_pause"): {},
    ("Executions", "on_post_resume"): {},
    ("Executions", "on_post_restart"): {"from": "work", "dry_run": True},
    ("Executions", "on_post_fork"): {"from": "work", "dry_run": True},
    ("Versions", "on_post_plan"): {"from": "1.0.0", "to": "1.0.0", "dry_run": True},
    ("Schedules", "on_post"): {"schedule_id": "n2", "workflow": WORKFLOW, "interval": "1h"},
    ("Schedules", "on_patch_one"): {"interval": "2h"},
    ("Schedules", "on_post_pause"): {},
    ("Schedules", "on_post_resume"): {},
    ("Schedules", "on_post_trigger"): {},
    ("WorkerProtocol", "on_post_register"): {
        "worker_id": "payments-1",
        "runtime": "python",
        "contracts": [{"task_name": "payments.charge", "contract_version": "1.0.0"}],
    },
    ("WorkerProtocol", "on_post_heartbeat"): {"worker_session_id": "nope"},
    ("WorkerProtocol", "on_post_poll"): {"worker_session_id": "nope", "wait_ms": 0},
    ("WorkerProtocol", "on_post_unregister"): {"worker_session_id": "nope"},
    ("WorkerProtocol", "on_post_complete"): {"token": "nope", "output": {}},
    ("WorkerProtocol", "on_post_fail"): {"token": "nope", "error_code": "X"},
}
QUERIES = {
    ("Executions", "on_get_wait"): "timeout_ms=1",
    ("Versions", "on_get_plan"): "from=1.0.0&to=1.0.0",
}
CLIENT_ONLY = (
    "client `{}` may only use the execution API (start, signal, query, read, cancel) and schedules"
)
VERBS = {
    "start": "start executions of",
    "signal": "signal executions of",
    "query": "query executions of",
    "read": "read executions of",
    "cancel": "cancel executions of",
    "read definition": "read the workflow",
    "schedule": "manage schedules of",
}


def _body(responder: tuple[str, str], credential: Credential) -> Any:
    if responder == ("WorkerProtocol", "on_post_register"):
        return {**BODIES[responder], "worker_id": credential.worker_id}
    return BODIES.get(responder)


def _definition(name: str) -> ir.Definition:
    empty = t.RecordType(())
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name=name,
        version="1.0.0",
        input=empty,
        output=empty,
        steps=(ir.Step("work", "task", task="payments.charge", with_=e.Object(())),),
        result=e.Object(()),
        contracts={"payments.charge": ir.TaskContract("payments.charge", "1.0.0", empty, empty)},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine(auto_tick=False)
    engine.deploy(_definition(WORKFLOW))
    engine.deploy(_definition(OTHER))
    engine.start(WORKFLOW, input={}, execution_id=EXECUTION)
    engine.start(OTHER, input={}, execution_id="review-1")
    for schedule, workflow in (("nightly", WORKFLOW), ("weekly", OTHER)):
        engine.schedules.create({"schedule_id": schedule, "workflow": workflow, "interval": "1h"})
    yield engine
    engine.close()


def _client(engine: Engine, *, auth: bool = True) -> falcon.testing.TestClient:
    config = ServerConfig()
    if auth:
        config = ServerConfig(
            token=ADMIN,
            worker_token=SHARED,
            identities=identities.parse(WORKERS_FILE),
            tls_cert="server.pem",
            tls_key="server.key",
            tls_client_ca="ca.pem",
        )
    return falcon.testing.TestClient(create_app(engine, config))


def _cells(engine: Engine) -> list[tuple[str, str, str, tuple[str, str]]]:
    """(method, path, query, responder) for every responder of the app."""
    app = create_app(engine, ServerConfig())
    cells = []
    for route in falcon.inspect.inspect_routes(app):
        path = route.path
        for key, value in VALUES.items():
            path = path.replace("{" + key + "}", value)
        for method in route.methods:
            if not method.internal:
                responder = (route.class_name, method.function_name)
                cells.append((method.method, path, QUERIES.get(responder, ""), responder))
    return cells


def expected(credential: Credential, rule: str) -> tuple[int, str, str] | None:
    """The refusal the book gives this credential on a route of this kind
    (status, code, message), or None when the call is allowed."""
    column = credential.column
    if column == "unmatched":
        return (
            403,
            "FORBIDDEN",
            "the client certificate is valid but matches no worker or client in the workers file",
        )
    if rule == "open" or column == "admin":
        return None
    if column == "none":
        return 401, "UNAUTHENTICATED", "missing or invalid credentials"
    if column in ("shared", "worker"):
        if rule == "worker":
            return None
        return 403, "FORBIDDEN", "worker credentials may only call /v1/workers/* and /v1/tasks/*"
    assert column == "client" and credential.client is not None
    if rule in ("admin", "worker"):
        return 403, "FORBIDDEN", CLIENT_ONLY.format(credential.client)
    if rule in ("list", "schedule list"):
        return None
    action = "read" if rule == "read definition" else rule
    if action in credential.actions and WORKFLOW in credential.workflows:
        return None
    return 403, "FORBIDDEN", f"client `{credential.client}` may not {VERBS[rule]} `{WORKFLOW}`"


def test_the_book_table_covers_every_route_of_the_app(engine: Engine) -> None:
    assert {responder for *_, responder in _cells(engine)} == set(BOOK)


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
def test_every_route_answers_each_credential_as_the_book_says(engine: Engine, name: str) -> None:
    credential = CREDENTIALS[name]
    client = _client(engine)
    extras = {"gunicorn.socket": _Peer(credential.peer)} if credential.peer else None
    for method, path, query, responder in _cells(engine):
        rule = BOOK[responder]
        reply = client.simulate_request(
            method,
            path,
            query_string=query or None,
            headers={**credential.headers, "accept": "text/html"},
            json=_body(responder, credential),
            extras=extras,
        )
        refusal = expected(credential, rule)
        cell = (name, method, path)
        if refusal is None:
            assert reply.status_code not in (401, 403), (cell, reply.text)
        else:
            assert reply.status_code == refusal[0], (cell, reply.text)
            if method == "HEAD":  # the same answer without its body
                continue
            assert reply.json == {"error": {"code": refusal[1], "message": refusal[2]}}, cell


def test_a_certificate_that_matches_nobody_is_refused_on_unknown_paths_too(engine: Engine) -> None:
    reply = _client(engine).simulate_get("/nowhere", extras={"gunicorn.socket": _Peer("x.y")})
    assert reply.status_code == 403
    assert reply.json["error"]["code"] == "FORBIDDEN"


@pytest.mark.parametrize("name", ["none", "wrong token", "worker token", "client everything"])
def test_without_authentication_configured_every_route_is_open(engine: Engine, name: str) -> None:
    client = _client(engine, auth=False)
    credential = CREDENTIALS[name]
    for method, path, query, responder in _cells(engine):
        reply = client.simulate_request(
            method,
            path,
            query_string=query or None,
            headers=credential.headers,
            json=BODIES.get(responder),
        )
        assert reply.status_code not in (401, 403), (name, method, path, reply.text)


@pytest.mark.parametrize(
    "name", sorted(n for n, c in CREDENTIALS.items() if c.column in ("client", "admin"))
)
def test_lists_show_a_client_only_the_workflows_it_may_read(engine: Engine, name: str) -> None:
    credential = CREDENTIALS[name]
    client = _client(engine)
    extras = {"gunicorn.socket": _Peer(credential.peer)} if credential.peer else None
    if credential.column == "admin":
        readable = {WORKFLOW, OTHER}
    else:
        readable = set(credential.workflows) if "read" in credential.actions else set()
    listed = client.simulate_get("/v1/workflows", headers=credential.headers, extras=extras)
    assert {w["name"] for w in listed.json["workflows"]} == readable
    rows = client.simulate_get("/v1/executions", headers=credential.headers, extras=extras)
    assert {r["workflow"] for r in rows.json["executions"]} == readable
    if credential.column == "admin":
        managed = {WORKFLOW, OTHER}
    else:
        managed = set(credential.workflows) if "schedule" in credential.actions else set()
    listed = client.simulate_get("/v1/schedules", headers=credential.headers, extras=extras)
    assert {s["workflow"] for s in listed.json["schedules"]} == managed


def test_a_client_moves_a_schedule_only_between_workflows_it_may_schedule(
    engine: Engine,
) -> None:
    client = _client(engine)
    headers = CREDENTIALS["client with only schedule"].headers
    moved = client.simulate_patch(
        "/v1/schedules/nightly", headers=headers, json={"workflow": OTHER}
    )
    assert moved.status_code == 403
    assert moved.json["error"]["message"] == (
        f"client `only-schedule` may not manage schedules of `{OTHER}`"
    )
    created = client.simulate_post(
        "/v1/schedules",
        headers=headers,
        json={"schedule_id": "n3", "workflow": OTHER, "interval": "1h"},
    )
    assert created.status_code == 403
    assert "n3" not in engine.schedules.list_schedules()
    unknown = client.simulate_get("/v1/schedules/missing", headers=headers)
    assert unknown.status_code == 404
    assert unknown.json["error"]["code"] == "SCHEDULE_NOT_FOUND"


def test_a_client_page_holds_up_to_limit_readable_executions(engine: Engine) -> None:
    for i in range(5):
        engine.start(OTHER, input={}, execution_id=f"review-x{i}")
    for i in range(3):
        engine.start(WORKFLOW, input={}, execution_id=f"labels-x{i}")
    for i in range(5):
        engine.start(OTHER, input={}, execution_id=f"review-y{i}")
    client = _client(engine)
    headers = CREDENTIALS["client with only read"].headers
    page = client.simulate_get("/v1/executions", params={"limit": 3}, headers=headers)
    assert [r["workflow"] for r in page.json["executions"]] == [WORKFLOW] * 3


def test_a_client_start_of_a_workflow_it_may_not_start_records_nothing(engine: Engine) -> None:
    client = _client(engine)
    headers = CREDENTIALS["client with only start"].headers
    refused = client.simulate_post(
        "/v1/executions",
        headers=headers,
        json={"workflow": OTHER, "execution_id": "r-9", "input": {}},
    )
    assert refused.status_code == 403
    assert refused.json["error"]["message"] == (
        f"client `only-start` may not start executions of `{OTHER}`"
    )
    admin = CREDENTIALS["admin"].headers
    assert client.simulate_get("/v1/executions/r-9", headers=admin).status_code == 404
    started = client.simulate_post(
        "/v1/executions",
        headers=headers,
        json={"workflow": WORKFLOW, "execution_id": "l-9", "input": {}},
    )
    assert started.status_code == 201


def test_a_client_asking_about_an_unknown_execution_gets_not_found(engine: Engine) -> None:
    client = _client(engine)
    reply = client.simulate_get(
        "/v1/executions/missing", headers=CREDENTIALS["client with only read"].headers
    )
    assert reply.status_code == 404
    assert reply.json["error"]["code"] == "NOT_FOUND"
