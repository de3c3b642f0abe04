"""The OpenAPI document cannot drift from the server: it lists exactly the
app's routes and methods, each operation's `x-orbit-access` is what the
server enforces, docs/openapi.json is the document the server serves, and
the document is valid OpenAPI 3.1 (schemathesis, in
test_server_openapi_fuzz.py, checks live responses against it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falcon.inspect
import falcon.testing
import pytest

from orbit_core.engine import Engine
from orbit_core.memory_store import MemoryStore
from orbit_server import openapi
from orbit_server.app import create_app
from orbit_server.archive import NoArchive
from orbit_server.config import ServerConfig
from orbit_server.retention import Sweeper

ROOT = Path(__file__).resolve().parent.parent
ADMIN, WORKER = "admin-token-for-tests", "worker-token-for-tests"
METHODS = {"get", "post", "put", "patch", "delete", "head"}


def _sweeper() -> Sweeper:
    """What gives an app the archive routes (`--retention`); never started."""
    return Sweeper(MemoryStore(), NoArchive(), 60_000)


@pytest.fixture(scope="module")
def client() -> Iterator[falcon.testing.TestClient]:
    engine = Engine()
    try:
        yield falcon.testing.TestClient(
            create_app(engine, ServerConfig(token=ADMIN, worker_token=WORKER), retention=_sweeper())
        )
    finally:
        engine.close()


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method.upper(), operation)
        for path, item in openapi.document()["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def _served(retention: Sweeper | None) -> set[tuple[str, str]]:
    engine = Engine()
    try:
        app = create_app(engine, ServerConfig(), retention=retention)
    finally:
        engine.close()
    return {
        (route.path, method.method)
        for route in falcon.inspect.inspect_routes(app)
        for method in route.methods
        if not method.internal
    }


def test_the_document_lists_exactly_the_routes_of_the_app() -> None:
    """Those of a server with --retention: the archive routes are only there."""
    served = _served(_sweeper())
    documented = {(path, method) for path, method, _ in _operations()}
    assert served - documented == set(), "routes missing from orbit_server/openapi.py"
    assert documented - served == set(), "documented routes the server does not have"
    archive = {(path, method) for path, method in documented if path.startswith("/v1/archive/")}
    assert len(archive) == 3
    assert _served(None) == documented - archive


@pytest.mark.parametrize(("path", "method", "operation"), _operations())
def test_each_operation_declares_the_access_the_server_enforces(
    client: falcon.testing.TestClient, path: str, method: str, operation: dict[str, Any]
) -> None:
    concrete = path.replace("{", "x").replace("}", "")
    access = operation["x-orbit-access"]
    assert operation["security"] == openapi.SECURITY[access]

    def status(token: str | None) -> int:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return client.simulate_request(method, concrete, headers=headers).status_code

    anonymous, worker = status(None), status(WORKER)
    if access == "open":
        assert anonymous not in {401, 403}
    elif access == "worker":
        assert anonymous == 401
        assert worker not in {401, 403}
    else:
        assert access == "admin"
        assert anonymous == 401
        assert worker == 403
    assert status(ADMIN) not in {401, 403}


def test_docs_hold_the_document_the_server_serves(client: falcon.testing.TestClient) -> None:
    committed = (ROOT / "docs" / "openapi.json").read_text()
    assert committed == openapi.dumps(), (
        "docs/openapi.json is stale: python -m orbit_server.openapi docs/openapi.json"
    )
    reply = client.simulate_get(openapi.PATH, headers={"authorization": f"Bearer {ADMIN}"})
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    assert json.loads(reply.content) == openapi.document()


def test_the_document_is_valid_openapi_3_1() -> None:
    schemathesis = pytest.importorskip("schemathesis")
    schema = schemathesis.openapi.from_dict(openapi.document())
    assert schema.specification.version == "3.1.0"
    assert len(list(schema.get_all_operations())) == len(_operations())


def test_every_reference_resolves() -> None:
    text = openapi.dumps()
    schemas = openapi.document()["components"]["schemas"]
    for name in {part.split('"')[0] for part in text.split("#/components/schemas/")[1:]}:
        assert name in schemas, name
