"""Who reaches which responder, whatever the spelling of the path (issue 11 #1).

The WSGI app in process, every responder replaced by a recorder: for every
route and method of the app, with no credential, a wrong one, the worker
token and the admin token, in the canonical spelling and in every variant a
client can send (extra slashes, `%2F`, dot segments, trailing slashes, case),
a responder runs only for a caller that chapter 67's route table allows.
The table below is this test's own copy of the book's, keyed by responder, so
it does not trust the app's declarations; a route the table does not know
fails the test. (Routes a client identity may use behave as admin routes for
these credentials; test_server_permission_matrix.py covers every credential
kind.)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import falcon
import falcon.inspect
import falcon.testing
import pytest

from orbit_core.engine import Engine
from orbit_server import app as app_module
from orbit_server import errors, openapi
from orbit_server.app import create_app
from orbit_server.auth import Access, Gate, Rule
from orbit_server.config import ServerConfig
from orbit_server.resources import executions, health, schedules, ui, versions, workers, workflows

ADMIN_TOKEN, WORKER_TOKEN = "admin-token-0123456789", "worker-token-0123456789"
CREDENTIALS: dict[str, dict[str, str]] = {
    "none": {},
    "wrong": {"authorization": "Bearer not-a-token"},
    "basic": {"authorization": f"Basic {ADMIN_TOKEN}"},
    "worker": {"authorization": f"Bearer {WORKER_TOKEN}"},
    "admin": {"authorization": f"Bearer {ADMIN_TOKEN}"},
}
ALLOWED = {
    Access.OPEN: {"none", "wrong", "basic", "worker", "admin"},
    Access.WORKER: {"worker", "admin"},
    Access.ADMIN: {"admin"},
}

# Chapter 67's route table, by the responder that serves each route.
BOOK: dict[tuple[str, str], Access] = {
    ("Health", "on_get"): Access.OPEN,
    ("Ready", "on_get"): Access.OPEN,
    ("Root", "on_get"): Access.OPEN,
    ("Ui", "on_get"): Access.OPEN,
    ("Ui", "on_get_asset"): Access.OPEN,
    ("Ui", "on_head"): Access.OPEN,
    ("Ui", "on_head_asset"): Access.OPEN,
    ("Metrics", "on_get"): Access.ADMIN,
    ("OpenApi", "on_get"): Access.ADMIN,
    ("Workflows", "on_post"): Access.ADMIN,
    ("Workflows", "on_get"): Access.ADMIN,
    ("Workflows", "on_get_latest"): Access.ADMIN,
    ("Workflows", "on_get_version"): Access.ADMIN,
    ("Executions", "on_post"): Access.ADMIN,
    ("Executions", "on_get"): Access.ADMIN,
    ("Executions", "on_get_one"): Access.ADMIN,
    ("Executions", "on_get_history"): Access.ADMIN,
    ("Executions", "on_get_wait"): Access.ADMIN,
    ("Executions", "on_post_cancel"): Access.ADMIN,
    ("Executions", "on_post_signal"): Access.ADMIN,
    ("Executions", "on_get_query"): Access.ADMIN,
    ("Workers", "on_get"): Access.ADMIN,
    ("Schedules", "on_post"): Access.ADMIN,
    ("Schedules", "on_get"): Access.ADMIN,
    ("Schedules", "on_get_one"): Access.ADMIN,
    ("Schedules", "on_patch_one"): Access.ADMIN,
    ("Schedules", "on_delete_one"): Access.ADMIN,
    ("Schedules", "on_post_pause"): Access.ADMIN,
    ("Schedules", "on_post_resume"): Access.ADMIN,
    ("Schedules", "on_post_trigger"): Access.ADMIN,
    ("WorkerProtocol", "on_post_register"): Access.WORKER,
    ("WorkerProtocol", "on_post_heartbeat"): Access.WORKER,
    ("WorkerProtocol", "on_post_poll"): Access.WORKER,
    ("WorkerProtocol", "on_post_unregister"): Access.WORKER,
    ("WorkerProtocol", "on_post_complete"): Access.WORKER,
    ("WorkerProtocol", "on_post_fail"): Access.WORKER,
    # Beyond the book: pause and resume (docs/operating-executions.md),
    # restart and fork (docs/restart-and-fork.md), the
    # census and migrations (docs/language/migration.md).
    ("Executions", "on_post_pause"): Access.ADMIN,
    ("Executions", "on_post_resume"): Access.ADMIN,
    ("Executions", "on_post_restart"): Access.ADMIN,
    ("Executions", "on_post_fork"): Access.ADMIN,
    ("Versions", "on_get"): Access.ADMIN,
    ("Versions", "on_get_plan"): Access.ADMIN,
    ("Versions", "on_post_plan"): Access.ADMIN,
}
RESOURCES = (
    health.Health,
    health.Ready,
    health.Metrics,
    openapi.OpenApi,
    ui.Root,
    ui.Ui,
    workflows.Workflows,
    executions.Executions,
    schedules.Schedules,
    workers.Workers,
    workers.WorkerProtocol,
    versions.Versions,
)
REACHED = 299  # a status no real responder answers with


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every responder records its call and answers REACHED."""
    calls: list[tuple[str, str]] = []
    for cls in RESOURCES:
        for name in dir(cls):
            if name.startswith("on_"):

                def responder(
                    self: Any,
                    req: falcon.Request,
                    resp: falcon.Response,
                    _key: tuple[str, str] = (cls.__name__, name),
                    **params: Any,
                ) -> None:
                    calls.append(_key)
                    resp.status = REACHED

                monkeypatch.setattr(cls, name, responder)
    return calls


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine(auto_tick=False)
    yield engine
    engine.close()


def _app(engine: Engine, **config: Any) -> falcon.App[falcon.Request, falcon.Response]:
    return create_app(engine, ServerConfig(**config))


def _routes(app: falcon.App[falcon.Request, falcon.Response]) -> list[tuple[str, str, str]]:
    """(method, concrete path, responder name) for every responder of the app."""
    found = []
    for route in falcon.inspect.inspect_routes(app):
        path = route.path.replace("{", "").replace("}", "")  # {name} -> name: any value
        for method in route.methods:
            if not method.internal:
                found.append((method.method, path, method.function_name))
    return found


def spellings(path: str) -> list[str]:
    """What a client can send for `path`, some of which route elsewhere or nowhere."""
    rest = path[1:]
    segments = rest.split("/")
    out = {
        path,
        "/" + path,
        "///" + rest,
        "/%2F" + rest,
        "/%2f%2f" + rest,
        "/" + rest.replace("/", "%2F"),
        "/" + rest.replace("/", "//"),
        "/" + rest.replace("/", "/./"),
        "/./" + rest,
        "/../" + rest,
        "/x/../" + rest,
        "/v1/../" + rest,
        "/%2e/" + rest,
        "/%2e%2e/" + rest,
        path + "/",
        path + "//",
        path + "/.",
        path + "%2F",
        path.upper(),
        "/" + rest.capitalize(),
        "/" + "".join(c.upper() if i % 2 else c for i, c in enumerate(rest)),
        "/%76" + rest[1:] if rest.startswith("v") else path,  # %76 is "v"
        path + "?x=1",
        "//" + rest + "?a=b",
    }
    for i in range(1, len(segments)):
        out.add("/" + "/".join(segments[:i]) + "//" + "/".join(segments[i:]))
        out.add("/" + "/".join(segments[:i]) + "/../" + "/".join(segments[i - 1 :]))
    return sorted(out)


def test_the_book_table_covers_every_responder_of_the_app(engine: Engine) -> None:
    responders = {
        (route.class_name, method.function_name)
        for route in falcon.inspect.inspect_routes(_app(engine))
        for method in route.methods
        if not method.internal
    }
    assert responders == set(BOOK)


@pytest.mark.parametrize("credential", sorted(CREDENTIALS))
def test_no_spelling_reaches_a_responder_without_its_credential(
    engine: Engine, reached: list[tuple[str, str]], credential: str
) -> None:
    app = _app(engine, token=ADMIN_TOKEN, worker_token=WORKER_TOKEN)
    client = falcon.testing.TestClient(app)
    headers = CREDENTIALS[credential]
    canonical_reached = set()
    for method, path, _ in _routes(app):
        for spelling in spellings(path):
            reached.clear()
            reply = client.simulate_request(method, spelling, headers=headers)
            assert len(reached) <= 1
            if reached:
                access = BOOK[reached[0]]
                assert credential in ALLOWED[access], (method, spelling, reached)
                assert reply.status_code == REACHED
                if spelling == path:
                    canonical_reached.add(reached[0])
            else:
                assert reply.status_code in (401, 403, 404, 405), (method, spelling, reply.text)
                if reply.status_code in (401, 403) and method != "HEAD":  # HEAD has no body
                    code = "UNAUTHENTICATED" if reply.status_code == 401 else "FORBIDDEN"
                    assert reply.json["error"]["code"] == code
                    assert "x-orbit-api-version" not in reply.headers
    # And every responder the credential allows is reachable by its own path.
    assert canonical_reached == {
        key for key, access in BOOK.items() if credential in ALLOWED[access]
    }


def test_a_deploy_in_any_spelling_is_refused_to_anonymous_and_worker_callers(
    engine: Engine, reached: list[tuple[str, str]]
) -> None:
    client = falcon.testing.TestClient(_app(engine, token=ADMIN_TOKEN, worker_token=WORKER_TOKEN))
    for spelling in spellings("/v1/workflows"):
        for credential, status in (("none", 401), ("worker", 403)):
            reply = client.simulate_post(spelling, headers=CREDENTIALS[credential], body="{}")
            assert reply.status_code in (status, 404, 405), spelling
    assert reached == []


def test_wrong_methods_are_refused_before_they_are_answered(
    engine: Engine, reached: list[tuple[str, str]]
) -> None:
    client = falcon.testing.TestClient(_app(engine, token=ADMIN_TOKEN))
    for method, path in itertools.product(
        ("DELETE", "PUT", "PATCH", "OPTIONS"), ("/v1/workflows", "//v1/executions")
    ):
        assert client.simulate_request(method, path).status_code == 401
        assert client.simulate_request(method, path, headers=CREDENTIALS["admin"]).status_code in (
            200,
            405,
        )
    assert reached == []


def test_without_a_token_every_declared_route_is_open(
    engine: Engine, reached: list[tuple[str, str]]
) -> None:
    app = _app(engine)
    client = falcon.testing.TestClient(app)
    for method, path, _ in _routes(app):
        assert client.simulate_request(method, path).status_code == REACHED
    assert set(reached) == set(BOOK)


def test_an_undeclared_route_is_refused_at_build_time(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = app_module._Routes.add

    def forgetful(self: Any, template: str, resource: object, rules: Any, suffix: str = "") -> None:
        original(self, template, resource, rules, suffix)
        if template == "/v1/metrics":
            del self.rules[(template, "GET")]

    monkeypatch.setattr(app_module._Routes, "add", forgetful)
    with pytest.raises(RuntimeError, match=r"routes without an access rule.*/v1/metrics"):
        _app(engine, token=ADMIN_TOKEN)


def test_an_undeclared_route_is_refused_at_run_time() -> None:
    class Anything:
        def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
            resp.media = {}

    for token in (None, ADMIN_TOKEN):
        app = falcon.App(
            middleware=[Gate(token, None, 1000, {("/declared", "GET"): Rule(Access.OPEN)})]
        )
        errors.install(app)
        app.add_route("/declared", Anything())
        app.add_route("/undeclared", Anything())
        client = falcon.testing.TestClient(app)
        assert client.simulate_get("/declared").status_code == 200
        for headers in ({}, CREDENTIALS["admin"]):
            reply = client.simulate_get("/undeclared", headers=headers)
            assert reply.status_code == 403
            assert reply.json["error"]["code"] == "FORBIDDEN"
