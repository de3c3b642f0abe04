"""PostgreSQL for the store tests: the repository's tests/pgkit.py (through
sys.path, as the engine tests reach orbit_core/tests/engine_kit.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import pgkit


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pgkit.Cluster | pgkit.External]:
    yield from pgkit.session_server()


@pytest.fixture
def pg_url(pg_server: pgkit.Cluster | pgkit.External) -> str:
    """A new empty database on the shared server."""
    return pg_server.url(pg_server.create_database())


def pytest_collection_modifyitems(items: list[Any]) -> None:
    pgkit.mark_postgres_items(items)
