"""Idempotent starts (issue 39): a start's idempotency key names one
execution for the retention window, on the memory, SQLite and PostgreSQL
stores, across a restart of the engine on the same store; a different
input with the key is refused with IDEMPOTENCY_KEY_REUSED; an expired key
starts a new execution."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_flow_admission import example

from orbit_core.engine import Engine
from orbit_core.errors import ConflictError
from orbit_core.jsontypes import JsonValue
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import Store, UuidIds
from orbit_core.testing import SimulatedClock, simulated_engine
from orbit_store.postgres import PostgresStore
from orbit_store.sqlite import SqliteStore

HOUR = 3600 * 1000


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    shared = MemoryStore()
    opened: list[Store] = []

    def open_store() -> Store:
        store: Store
        if request.param == "memory":
            store = shared
        elif request.param == "sqlite":
            store = SqliteStore(str(tmp_path / "orbit.db"))
        else:
            store = PostgresStore(str(request.getfixturevalue("pg_url")))
        opened.append(store)
        return store

    yield open_store


def engine_on(store: Store, clock: SimulatedClock) -> Engine:
    # Random ids: a second engine on the same store must not reuse the first's.
    engine = simulated_engine(store, clock, ids=UuidIds(), idempotency_retention_ms=HOUR)
    engine.deploy(example())
    return engine


def test_a_key_names_one_execution_until_it_expires(opener: object) -> None:
    open_store = opener
    assert callable(open_store)
    clock = SimulatedClock()
    engine = engine_on(open_store(), clock)
    c1: JsonValue = {"customer_id": "c-1"}
    first = engine.start("PerCustomer", input=c1, idempotency_key="order-1")
    assert first["created"]
    again = engine.start("PerCustomer", input={"customer_id": "c-1"}, idempotency_key="order-1")
    assert again == {"execution_id": first["execution_id"], "created": False}
    with pytest.raises(ConflictError) as refused:
        engine.start("PerCustomer", input={"customer_id": "c-2"}, idempotency_key="order-1")
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
    # Another key is another execution.
    other = engine.start("PerCustomer", input=c1, idempotency_key="order-2")
    assert other["created"] and other["execution_id"] != first["execution_id"]
    engine.close()

    # A new engine on the same store (a restart) reads the key back.
    clock.advance(HOUR - 1)
    engine = engine_on(open_store(), clock)
    again = engine.start("PerCustomer", input=c1, idempotency_key="order-1")
    assert again == {"execution_id": first["execution_id"], "created": False}
    # Past the retention window the key is free again.
    clock.advance(2)
    later = engine.start("PerCustomer", input=c1, idempotency_key="order-1")
    assert later["created"] and later["execution_id"] != first["execution_id"]
    assert engine.start("PerCustomer", input=c1, idempotency_key="order-1") == {
        "execution_id": later["execution_id"],
        "created": False,
    }
    engine.close()


def test_a_key_and_an_execution_id_must_agree() -> None:
    engine = engine_on(MemoryStore(), SimulatedClock())
    c1: JsonValue = {"customer_id": "c-1"}
    engine.start("PerCustomer", input=c1, execution_id="e1", idempotency_key="k")
    assert engine.start("PerCustomer", input=c1, execution_id="e1", idempotency_key="k") == {
        "execution_id": "e1",
        "created": False,
    }
    # Without an id the key answers for e1; with another id it is refused.
    assert engine.start("PerCustomer", input=c1, idempotency_key="k")["execution_id"] == "e1"
    with pytest.raises(ConflictError):
        engine.start("PerCustomer", input=c1, execution_id="e2", idempotency_key="k")
    engine.close()


def test_starts_without_a_key_leave_no_key_table(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "orbit.db"))
    engine = engine_on(store, SimulatedClock())
    engine.start("PerCustomer", input={"customer_id": "c-1"})
    engine.close()
    import sqlite3

    tables = {
        r[0]
        for r in sqlite3.connect(tmp_path / "orbit.db").execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        )
    }
    assert "orbit_idempotency_keys" not in tables
