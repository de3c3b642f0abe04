"""`waiting_for` (docs/language/visibility.md, orbit_core.visibility.waiting):
what an execution waits for — a task, a timer, a signal, a child — is in the
search index in the commit that changes it, and filters read it in memory,
SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orbit_core.api import ExecutionPage
from orbit_core.engine import Engine
from orbit_core.errors import OrbitError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import Store
from orbit_core.testing import SimulatedClock
from orbit_lang import compile_source
from orbit_store.postgres import PostgresStore
from orbit_store.sqlite import SqliteStore

SOURCE = """\
task "orders.pack" {
    version "1.0.0"
    input { customer: String }
    output {}
}

workflow Gated {
    version "1.0.0"
    input { customer: String, nap: Bool }
    signal go_ahead { ok: Bool }
    search {
        customer: input.customer
    }
    step pack_box { worker "orders.pack" with { customer: input.customer } }
    step rest {
        sleep 1h
        when input.nap
    }
    step gate {
        await go_ahead
        after pack_box, rest
    }
}

workflow Plain {
    version "1.0.0"
    input { customer: String }
    step pack_box { worker "orders.pack" with { customer: input.customer } }
}
"""


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    store: Store
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "sqlite":
        store = SqliteStore(tmp_path / "orbit.db")
    else:
        store = PostgresStore(request.getfixturevalue("pg_url"))
    result = compile_source(SOURCE, "x.orbit")
    assert result.errors == 0, [d.message for d in result.diagnostics]
    made = Engine(store, SimulatedClock(1_700_000_000_000), auto_tick=False)
    for defn in result.definitions:
        made.deploy(defn)
    yield made
    made.close()
    store.close()


def _ids(page: ExecutionPage) -> list[str]:
    return sorted(e["execution_id"] for e in page["executions"])


def test_waiting_for_follows_tasks_timers_and_signals(engine: Engine) -> None:
    engine.start("Gated", input={"customer": "c-1", "nap": False}, execution_id="g-1")
    engine.start("Gated", input={"customer": "c-2", "nap": True}, execution_id="g-2")
    find = engine.search_executions
    assert _ids(find("waiting_for == task")) == ["g-1", "g-2"]
    assert _ids(find("waiting_for == timer")) == ["g-2"]
    assert _ids(find('waiting_for == "rest"')) == ["g-2"]
    assert _ids(find('waiting_for == task and customer == "c-1"')) == ["g-1"]
    # Task steps are indexed by kind alone (waiting.py says why).
    assert _ids(find('waiting_for == "pack_box"')) == []
    assert _ids(find("waiting_for == signal")) == []
    session = engine.workers.register("w", "python", [("orders.pack", "1.0.0")])
    for _ in range(2):
        task = engine.workers.poll(session["worker_session_id"], 0)
        assert task is not None
        engine.workers.complete(task["token"], {})
    # g-1 packed and now awaits the signal; g-2 still sleeps.
    assert _ids(find("waiting_for == signal")) == ["g-1"]
    assert _ids(find('waiting_for == "go_ahead"')) == ["g-1"]
    assert _ids(find("waiting_for == task")) == []
    assert _ids(find("waiting_for in [task, timer]")) == ["g-2"]
    assert _ids(find("waiting_for != signal")) == ["g-2"]
    assert _ids(find("waiting_for not in [signal, timer]")) == []
    engine.signal("g-1", "go_ahead", {"ok": True})
    assert _ids(find("waiting_for == signal")) == []
    assert _ids(find("status == COMPLETED and waiting_for != signal")) == ["g-1"]


def test_waiting_for_is_refused_where_it_is_not_indexed(engine: Engine) -> None:
    with pytest.raises(OrbitError) as info:
        engine.search_executions("waiting_for == task", workflow="Plain")
    assert info.value.code == "INVALID_FILTER"
    assert "workflow `Plain` has none" in info.value.message
    with pytest.raises(OrbitError) as info:
        engine.search_executions("waiting_for > task")
    assert "compares only with" in info.value.message
    with pytest.raises(OrbitError) as info:
        engine.search_executions("waiting_for == lunch")
    assert "is one of task, timer, signal, child" in info.value.message


OLD_GATED = """\
task "orders.pack" {
    version "1.0.0"
    input { customer: String }
    output {}
}

workflow Gated {
    version "0.9.0"
    input { customer: String }
    step pack_box { worker "orders.pack" with { customer: input.customer } }
}
"""


def _waiting_rows(store: Store) -> dict[str, str | None]:
    """The `@waiting` rows the store holds, by execution."""
    if isinstance(store, MemoryStore):
        return {
            eid: by["@waiting"].str_value for eid, by in store._search.items() if "@waiting" in by
        }
    assert isinstance(store, SqliteStore | PostgresStore)
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT execution_id, str_value FROM orbit_search_values "
            "JOIN orbit_search_fields USING (field_id) WHERE field = '@waiting'"
        ).all()
    return {str(eid): None if text is None else str(text) for eid, text in rows}


def test_a_start_onto_a_task_step_writes_no_waiting_row(engine: Engine) -> None:
    """The usual start (onto a task step) leaves `|task|` implied: its commit
    writes the declared fields only, and `waiting_for == task` still finds
    it, but not a running execution of a definition without a `search`
    block (another version of the same name, or another workflow)."""
    old = compile_source(OLD_GATED, "old.orbit")
    assert old.errors == 0, [d.message for d in old.diagnostics]
    for defn in old.definitions:
        engine.deploy(defn)
    engine.start("Gated", "1.0.0", {"customer": "c-1", "nap": False}, "g-1")
    engine.start("Gated", "1.0.0", {"customer": "c-2", "nap": True}, "g-2")
    engine.start("Gated", "0.9.0", {"customer": "c-3"}, "old-1")
    engine.start("Plain", None, {"customer": "c-4"}, "p-1")
    assert _waiting_rows(engine.store) == {"g-2": "|task|timer:rest|"}
    find = engine.search_executions
    assert _ids(find("waiting_for == task")) == ["g-1", "g-2"]
    assert _ids(find("waiting_for in [task, signal]")) == ["g-1", "g-2"]
    assert _ids(find('waiting_for == task and customer == "c-1"')) == ["g-1"]
    assert _ids(find("waiting_for == timer")) == ["g-2"]
    assert _ids(find("waiting_for != task")) == ["old-1", "p-1"]
    assert _ids(find('not (waiting_for == task) and workflow == "Gated"')) == ["old-1"]
    # Once it waits for something else the row is written, and read as is.
    session = engine.workers.register("w", "python", [("orders.pack", "1.0.0")])
    while (task := engine.workers.poll(session["worker_session_id"], 0)) is not None:
        engine.workers.complete(task["token"], {})
    assert _waiting_rows(engine.store)["g-1"] == "|signal:go_ahead|"
    assert _ids(find("waiting_for == task")) == []
    assert _ids(find("waiting_for == signal")) == ["g-1"]
