"""Typed visibility through the engine (docs/language/visibility.md): search
values are written in the commit of the event that makes them known, and a
filter runs in the store (memory, SQLite, PostgreSQL) with a stable cursor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orbit_core.api import ExecutionPage
from orbit_core.engine import Engine
from orbit_core.errors import OrbitError
from orbit_core.ir import Definition
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import Store
from orbit_core.testing import SimulatedClock
from orbit_lang import compile_source
from orbit_store.postgres import PostgresStore
from orbit_store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[1]

STEPS = """\
task "risk.score" {
    version "1.0.0"
    input { customer: String }
    output { level: String, score: Float }
}

workflow Scored {
    version "1.0.0"
    input { customer: String, at: Timestamp, vip: Bool }
    search {
        customer: input.customer
        at: input.at
        vip: input.vip
        risk: score.level
    }
    step score { worker "risk.score" with { customer: input.customer } }
}
"""


def _definitions() -> list[Definition]:
    example = (ROOT / "examples" / "visibility.orbit").read_text(encoding="utf-8")
    out: list[Definition] = []
    for text in (example, STEPS):
        result = compile_source(text, "x.orbit")
        assert result.errors == 0, [d.message for d in result.diagnostics]
        out += result.definitions
    return out


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        made: Store = SqliteStore(tmp_path / "orbit.db")
    else:
        made = PostgresStore(request.getfixturevalue("pg_url"))
    yield made
    made.close()


@pytest.fixture
def engine(store: Store) -> Iterator[Engine]:
    clock = SimulatedClock(1_700_000_000_000)
    engine = Engine(store, clock, auto_tick=False)
    for defn in _definitions():
        engine.deploy(defn)
    yield engine
    engine.close()


def _ids(page: ExecutionPage) -> list[str]:
    return [e["execution_id"] for e in page["executions"]]


def test_the_example_query_finds_exactly_the_second(engine: Engine) -> None:
    for eid, customer, amount in (
        ("o-1", "c-1", 100.0),
        ("o-2", "c-1", 600.0),
        ("o-3", "c-2", 700.0),
    ):
        engine.start("Orders", input={"customer": customer, "amount": amount}, execution_id=eid)
    # Read in the very next call: the values were committed with the start.
    page = engine.search_executions('customer == "c-1" and amount > 500')
    assert _ids(page) == ["o-2"]
    assert page["next_cursor"] is None
    assert _ids(engine.search_executions('customer in ["c-1", "c-2"] and not amount < 600')) == [
        "o-3",
        "o-2",
    ]
    assert _ids(
        engine.search_executions('amount >= 600 or customer == "zz"', workflow="Orders")
    ) == [
        "o-3",
        "o-2",
    ]
    assert _ids(
        engine.search_executions('status == RUNNING and workflow == "Orders"', limit=1)
    ) == ["o-3"]
    assert _ids(engine.search_executions("status == COMPLETED")) == []


def test_unknown_field_and_wrong_type_are_refused_naming_the_field(engine: Engine) -> None:
    with pytest.raises(OrbitError) as info:
        engine.search_executions("nosuch == 1")
    assert info.value.code == "INVALID_FILTER"
    assert "unknown field `nosuch`" in info.value.message
    with pytest.raises(OrbitError) as info:
        engine.search_executions('amount > "big"')
    assert info.value.message == (
        'invalid filter at column 10: field `amount` is a Float and cannot be compared with "big" '
        "(a String)"
    )
    with pytest.raises(OrbitError) as info:
        engine.search_executions("risk == 1", workflow="Orders")
    assert "workflow `Orders` declares no search field `risk`" in info.value.message


def test_step_fields_are_written_when_the_step_completes(engine: Engine) -> None:
    engine.start(
        "Scored",
        input={"customer": "c-9", "at": "2024-05-01T10:00:00Z", "vip": True},
        execution_id="s-1",
    )
    assert _ids(engine.search_executions('risk == "high"')) == []
    assert _ids(engine.search_executions('at >= "2024-05-01" and at < "2024-05-02"')) == ["s-1"]
    assert _ids(engine.search_executions("vip == true")) == ["s-1"]
    session = engine.workers.register("w", "python", [("risk.score", "1.0.0")])
    task = engine.workers.poll(session["worker_session_id"], 0)
    assert task is not None
    engine.workers.complete(task["token"], {"level": "high", "score": 0.9})
    assert _ids(engine.search_executions('risk == "high" and customer == "c-9"')) == ["s-1"]
    assert _ids(engine.search_executions("status == COMPLETED")) == ["s-1"]


def test_pages_follow_a_stable_cursor(engine: Engine) -> None:
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
    for i in range(7):
        clock.advance(1)
        engine.start("Orders", input={"customer": "c", "amount": float(i)}, execution_id=f"p-{i}")
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = engine.search_executions('customer == "c"', limit=3, cursor=cursor)
        seen += _ids(page)
        # A start between pages does not move what is left to read.
        engine.start(
            "Orders", input={"customer": "c", "amount": 1.0}, execution_id=f"n-{len(seen)}"
        )
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"p-{i}" for i in reversed(range(7))]
