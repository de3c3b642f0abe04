"""Every filter form reads the search index through an index, on SQLite and
PostgreSQL (orbit_store.search, docs/language/visibility.md "How it is
stored"). The two value indexes are partial (a row fills one of the two
value columns), which a planner uses only when it can tell from the query
that the column is not null: each form's statement is explained here and
must touch `orbit_search_values` only by `orbit_search_str`,
`orbit_search_num` or its primary key (execution, field id), never by a
scan of the table (the field ids come from `orbit_search_fields`, a row per
declared field). On PostgreSQL, sequential scans are turned off for the
explanation: on a table this small a scan would win on cost, and the
question asked is whether an index can answer at all."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event

from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow
from orbit_core.visibility.check import FieldCatalog, compile_filter
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.page import SearchQuery
from orbit_lang import compile_source
from orbit_store.postgres import PostgresStore
from orbit_store.sql import SqlStore
from orbit_store.sqlite import SqliteStore

SOURCE = """\
task "orders.work" {
    version "1.0.0"
    input { customer: String }
    output {}
}

workflow Orders {
    version "1.0.0"
    input { customer: String, amount: Float, placed: Timestamp, rush: Bool }
    signal approve { ok: Bool }
    search {
        customer: input.customer
        amount: input.amount
        placed: input.placed
        rush: input.rush
    }
    step work { worker "orders.work" with { customer: input.customer } }
    step gate { await approve after work }
}
"""

STR, NUM, KEY = "orbit_search_str", "orbit_search_num", "key"
# Each filter form and the indexes its reads of the search table may use
# (at least the first, and no others).
FORMS: list[tuple[str, tuple[str, ...]]] = [
    ('customer == "c-1"', (STR,)),
    ('customer != "c-1"', (STR,)),
    ('customer in ["c-1", "c-2"]', (STR,)),
    ('customer not in ["c-1", "c-2"]', (STR,)),
    ('customer < "c-2"', (STR,)),
    ("amount == 500", (NUM,)),
    ("amount < 500", (NUM,)),
    ("amount > 500", (NUM,)),
    ("amount >= 100 and amount <= 200", (NUM,)),
    ("amount in [100, 200]", (NUM,)),
    ("rush == true", (NUM,)),
    ('placed >= "2024-05-01" and placed < "2024-06-01"', (NUM,)),
    ("waiting_for == signal", (STR,)),
    ('waiting_for == "approve"', (STR,)),
    ("waiting_for != signal", (STR,)),
    # No row reads as `|task|`: that test goes by the primary key.
    ("waiting_for == task", (STR, KEY)),
    # A second field is tested per candidate through the primary key.
    ('customer == "c-1" and amount > 500', (STR, KEY)),
    ('customer == "c-1" or amount > 500', (STR, NUM)),
    ('not customer == "c-1"', (STR,)),
]


def _rows(store: SqlStore, count: int) -> None:
    """`count` executions of Orders with all four fields, a fifth of them
    waiting for the signal."""
    changes = []
    for i in range(count):
        eid = f"e-{i:04d}"
        row = ExecutionRow(eid, "Orders", "1.0.0", "h", "RUNNING", 1000 + i, 1000 + i, 0)
        values = [
            SearchValue("customer", f"c-{i % 50}", None),
            SearchValue("amount", None, float(i % 1000)),
            SearchValue("placed", "2024-05-02T00:00:00Z", 1714608000000.0 + i),
            SearchValue("rush", None, float(i % 2)),
        ]
        if i % 5 == 0:
            values.append(SearchValue("@waiting", "|signal:approve|", None))
        changes.append(ExecutionChange(eid, row, [], new=True, search=values))
    store.commit(CommitBatch(executions=changes))


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    made: SqlStore
    if request.param == "sqlite":
        made = SqliteStore(tmp_path / "orbit.db")
    else:
        made = PostgresStore(request.getfixturevalue("pg_url"))
    _rows(made, 400)
    yield made
    made.close()


def _statement(store: SqlStore, text: str) -> tuple[str, Any]:
    """The SELECT the store runs for `text`, and its parameters."""
    result = compile_source(SOURCE, "x.orbit")
    assert result.errors == 0, [d.message for d in result.diagnostics]
    typed = compile_filter(text, FieldCatalog.of(list(result.definitions)))
    seen: list[tuple[str, Any]] = []

    def spy(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "orbit_search_values" in statement:
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", spy)
    try:
        store.search_executions(SearchQuery(typed, limit=10))
    finally:
        event.remove(store.engine, "before_cursor_execute", spy)
    (found,) = seen
    return found


def _sqlite_reads(store: SqliteStore, statement: str, parameters: Any) -> list[str]:
    """How each read of the search table goes: an index name, "key" for
    the primary key, "scan" for the table read in full."""
    conn = sqlite3.connect(store.path)
    try:
        plan = conn.execute("EXPLAIN QUERY PLAN " + statement, parameters).fetchall()
    finally:
        conn.close()
    reads = []
    for _id, _parent, _unused, detail in plan:
        words = str(detail).split()
        if "orbit_search_values" not in words[:3]:
            continue
        if words[0] == "SCAN":
            reads.append("scan")
        elif "PRIMARY" in words:
            reads.append(KEY)
        else:
            reads.append(words[words.index("INDEX") + 1])
    return reads


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _postgres_reads(store: PostgresStore, statement: str, parameters: Any) -> list[str]:
    with psycopg.connect(store.url) as conn:
        conn.execute("SET enable_seqscan = off")
        raw = conn.execute("EXPLAIN (FORMAT JSON) " + statement, parameters).fetchone()
    assert raw is not None
    plan = (raw[0] if isinstance(raw[0], list) else json.loads(raw[0]))[0]["Plan"]
    reads = []
    for node in _nodes(plan):
        # `orbit_search_fields` (a row per declared field) names the ids.
        if node.get("Relation Name") != "orbit_search_values" and not str(
            node.get("Index Name", "")
        ).startswith(("orbit_search_values", "orbit_search_str", "orbit_search_num")):
            continue
        if node["Node Type"] == "Seq Scan":
            reads.append("scan")
        elif "Index Name" in node:
            name = node["Index Name"]
            reads.append(KEY if name == "orbit_search_values_pkey" else name)
    return reads


@pytest.mark.parametrize(("text", "indexes"), FORMS, ids=[f for f, _ in FORMS])
def test_every_filter_form_reads_the_search_table_by_an_index(
    store: SqlStore, text: str, indexes: tuple[str, ...]
) -> None:
    statement, parameters = _statement(store, text)
    if isinstance(store, SqliteStore):
        reads = _sqlite_reads(store, statement, parameters)
    else:
        assert isinstance(store, PostgresStore)
        reads = _postgres_reads(store, statement, parameters)
    assert reads, statement
    assert "scan" not in reads, (reads, statement)
    assert indexes[0] in reads, (reads, statement)
    assert set(reads) <= set(indexes), (reads, statement)


def _parents(plan: dict[str, Any], parent: str = "") -> Iterator[tuple[dict[str, Any], str]]:
    """Each node with how it hangs under its parent ("Outer", "Inner",
    "SubPlan", ...; a subplan's own children inherit "SubPlan")."""
    here = plan.get("Parent Relationship", parent)
    if parent == "SubPlan":
        here = parent
    yield plan, here
    for child in plan.get("Plans", []):
        yield from _parents(child, here)


def test_a_second_field_is_checked_per_candidate_on_postgres(pg_url: str) -> None:
    """On PostgreSQL the per-candidate check of a conjunction's other field
    stays a look-up for each candidate (a subplan on the primary key),
    never a semi-join: with a million executions the planner, which cannot
    tell which ids `field_id IN (SELECT ..)` stands for, hashed every
    execution with `amount > 500` to join it with the customer's fifty
    (bench_visibility --query: 660 ms instead of 3)."""
    store = PostgresStore(pg_url)
    try:
        _rows(store, 400)
        statement, parameters = _statement(store, 'customer == "c-1" and amount > 500')
        with psycopg.connect(store.url) as conn:
            raw = conn.execute("EXPLAIN (FORMAT JSON) " + statement, parameters).fetchone()
    finally:
        store.close()
    assert raw is not None
    plan = (raw[0] if isinstance(raw[0], list) else json.loads(raw[0]))[0]["Plan"]
    checks = [
        how
        for node, how in _parents(plan)
        if node.get("Relation Name") == "orbit_search_values"
        or str(node.get("Index Name", "")).startswith("orbit_search_")
    ]
    # The customer's rows drive (not in a subplan); the amount is a subplan.
    assert "SubPlan" in checks, (checks, statement)
    assert any(how != "SubPlan" for how in checks), (checks, statement)
