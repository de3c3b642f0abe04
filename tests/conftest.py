"""PostgreSQL fixtures for the cross-package tests (tests/pgkit.py):
`pg_server` (the shared server), `pg_url` (a new database on it) and
`pg_cluster` (a server of the test's own, to stop and start); and
`orders_servers`, real servers for issue 44's example, and `three_shared`,
three real shared-mode servers on one database (fixtures_orbit.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fixtures_orbit
import pgkit
import pytest
from server_harness import ServerProcess

from orbit_lang.process import allow_deep_sources


@pytest.fixture(autouse=True)
def _deep_sources() -> Iterator[None]:
    """The recursion limit `orbit` raises at start-up (orbit_lang.process),
    put back after the test for the other packages' tests."""
    limit = sys.getrecursionlimit()
    allow_deep_sources()
    yield
    sys.setrecursionlimit(limit)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pgkit.Cluster | pgkit.External]:
    yield from pgkit.session_server()


@pytest.fixture
def pg_url(pg_server: pgkit.Cluster | pgkit.External) -> str:
    return pg_server.url(pg_server.create_database())


@pytest.fixture
def pg_cluster() -> Iterator[pgkit.Cluster]:
    yield from pgkit.own_cluster()


@pytest.fixture(params=["sqlite", "postgres", "shared"])
def orders_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    yield from fixtures_orbit.orders_servers(request, tmp_path)


def pytest_collection_modifyitems(items: list[Any]) -> None:
    pgkit.mark_postgres_items(items)


@pytest.fixture
def three_shared(pg_url: str) -> Iterator[list[ServerProcess]]:
    yield from fixtures_orbit.shared_trio(pg_url)
