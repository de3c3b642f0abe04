"""How a group's search rows are written (orbit_store.search): on
PostgreSQL, once the search table exists, they join the group's single
statement (one round trip, as a group without them); a group that carries
two values of one field of one execution keeps the later one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow, Store
from orbit_core.visibility.check import FieldCatalog, compile_filter
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.page import SearchQuery
from orbit_lang import compile_source
from orbit_store.postgres import PostgresStore
from orbit_store.sql import SqlStore
from orbit_store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        made: SqlStore = SqliteStore(tmp_path / "orbit.db")
    else:
        made = PostgresStore(request.getfixturevalue("pg_url"))
    yield made
    made.close()


def _change(eid: str, values: list[SearchValue], *, new: bool = True) -> ExecutionChange:
    row = ExecutionRow(eid, "Orders", "1.0.0", "h", "RUNNING", 1000, 1000, 0)
    return ExecutionChange(eid, row, [], new=new, search=values)


def _found(store: Store, text: str) -> list[str]:
    result = compile_source((ROOT / "examples" / "visibility.orbit").read_text(), "x.orbit")
    typed = compile_filter(text, FieldCatalog.of(list(result.definitions)))
    return [r.execution_id for r in store.search_executions(SearchQuery(typed, limit=10))]


def test_later_groups_write_their_rows_in_the_one_statement(store: SqlStore) -> None:
    alone: list[Any] = []
    original = store.one_statement

    def spy(*args: Any) -> Any:
        made = original(*args)
        alone.append((bool(args[3]), made is not None))
        return made

    store.one_statement = spy  # type: ignore[method-assign, assignment]
    store.commit(CommitBatch(executions=[_change("e-1", [SearchValue("customer", "c-1", None)])]))
    store.commit(CommitBatch(executions=[_change("e-2", [SearchValue("customer", "c-2", None)])]))
    assert _found(store, 'customer == "c-2"') == ["e-2"]
    assert _found(store, 'customer == "c-1"') == ["e-1"]
    # The first group creates the table in a transaction; the second joins
    # the one statement where the dialect has one (PostgreSQL).
    assert alone == ([(True, True)] if isinstance(store, PostgresStore) else [(True, False)])


def test_two_values_of_one_field_in_a_group_keep_the_later(store: SqlStore) -> None:
    store.commit(CommitBatch(executions=[_change("e-0", [SearchValue("amount", None, 1.0)])]))
    store.commit(
        CommitBatch(
            executions=[
                _change(
                    "e-1",
                    [SearchValue("amount", None, 100.0), SearchValue("amount", None, 600.0)],
                )
            ]
        )
    )
    assert _found(store, "amount > 500") == ["e-1"]
    assert _found(store, "amount < 500") == ["e-0"]


def test_two_values_of_one_field_in_one_statement_keep_the_later(store: SqlStore) -> None:
    # Four rows: one statement of four on SQLite, whose second row of
    # (e-1, amount) must replace the first.
    changes = [
        _change("e-1", [SearchValue("amount", None, 100.0)]),
        _change("e-2", [SearchValue("amount", None, 5.0)]),
        _change("e-3", [SearchValue("amount", None, 7.0)]),
    ]
    changes[0].search.append(SearchValue("amount", None, 600.0))
    store.commit(CommitBatch(executions=changes))
    assert _found(store, "amount > 500") == ["e-1"]
    assert sorted(_found(store, "amount < 500")) == ["e-2", "e-3"]


def _all(store: Store, text: str) -> set[str]:
    result = compile_source((ROOT / "examples" / "visibility.orbit").read_text(), "x.orbit")
    typed = compile_filter(text, FieldCatalog.of(list(result.definitions)))
    return {r.execution_id for r in store.search_executions(SearchQuery(typed, limit=1000))}


def test_a_large_group_writes_every_row_and_missing_values_stay_null(store: SqlStore) -> None:
    # 150 executions, 300 rows: SQLite binds a missing text as 0 and a
    # missing number as NaN; either must be stored as NULL, and the text
    # "0", the empty text and the number 0 as themselves.
    customers = ["0", "", "c-2"]
    changes = [
        _change(
            f"e-{i:03d}",
            [
                SearchValue("customer", customers[i % 3], None),
                SearchValue("amount", None, float(i % 5)),
            ],
        )
        for i in range(150)
    ]
    store.commit(CommitBatch(executions=changes))
    assert len(_all(store, "amount >= 0")) == 150
    assert _all(store, 'customer == "0"') == {f"e-{i:03d}" for i in range(0, 150, 3)}
    assert _all(store, 'customer == ""') == {f"e-{i:03d}" for i in range(1, 150, 3)}
    assert _all(store, "amount == 0") == {f"e-{i:03d}" for i in range(0, 150, 5)}
    with store.engine.connect() as conn:
        nulls = conn.exec_driver_sql(
            "SELECT field, count(*) FROM orbit_search_values "
            "JOIN orbit_search_fields USING (field_id) "
            "WHERE str_value IS NULL AND num_value IS NOT NULL "
            "OR num_value IS NULL AND str_value IS NOT NULL GROUP BY field ORDER BY field"
        ).fetchall()
    assert [tuple(r) for r in nulls] == [("amount", 150), ("customer", 150)]


def test_sqlite_upserts_a_groups_rows_in_chunks_with_the_journal_in_memory(
    tmp_path: Path,
) -> None:
    # Row by row, each row paid for a statement of its own; a statement of
    # several rows keeps a statement journal, which SQLite spills to a
    # temporary file past 64 KiB unless temporary storage is in memory
    # (orbit_store.search.SQLITE_UPSERT): the rows go in chunks of 64, 16,
    # 4 and 1, on a writing connection with `temp_store=MEMORY`.
    store = SqliteStore(tmp_path / "orbit.db")
    try:
        store.commit(CommitBatch(executions=[_change("e-0", [SearchValue("amount", None, 1.0)])]))
        traced: list[str] = []
        with store._writer.lock:
            raw = store._writer.raw()
            assert raw.execute("PRAGMA temp_store").fetchone()[0] == 2  # MEMORY
            raw.set_trace_callback(traced.append)
        changes = [
            _change(
                f"e-{i:03d}",
                [SearchValue("customer", f"c-{i % 7}", None), SearchValue("amount", None, 1.0)],
            )
            for i in range(1, 151)
        ]
        store.commit(CommitBatch(executions=changes))
        with store._writer.lock:
            store._writer.raw().set_trace_callback(None)
        upserts = [t for t in traced if t.startswith("INSERT INTO orbit_search_values")]
        sizes = [t.count("NULLIF(") for t in upserts]
        assert sizes == [64, 64, 64, 64, 16, 16, 4, 4, 4]  # 300 rows
        assert len(_all(store, "amount == 1")) == 151
    finally:
        store.close()
