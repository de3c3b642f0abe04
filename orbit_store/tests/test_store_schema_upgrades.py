"""Every database an earlier build could have left is brought to the current
schema, its rows intact, on SQLite and PostgreSQL: `schema_version` stays 1
(the book's base schema) and the cluster and shared parts record their own
versions in `orbit_schema_parts`, which a single server never creates; a
database newer than the code, in any part, is refused. The fixtures are SQL
scripts written by `fixtures/make_schema_fixtures.py` from the DDL of each
era in git history."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
import schema_samples
from sqlalchemy import inspect, select
from sqlalchemy.schema import CreateTable

from orbit_core import events as ev
from orbit_core.errors import StorageError
from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow
from orbit_core.visibility.check import FieldCatalog, compile_filter
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.page import SearchQuery
from orbit_store import schema
from orbit_store.cluster import Election
from orbit_store.postgres import PostgresStore
from orbit_store.shared import SharedStore
from orbit_store.sql import SqlStore
from orbit_store.sqlite import SqliteStore

# What the book's chapter 43 numbers the base schema, in this release.
BOOK_VERSION = 1

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SQLITE = sorted(FIXTURES.glob("sqlite-v1-*.sql"))
POSTGRES = sorted(FIXTURES.glob("postgres-v1-*.sql"))


def test_there_is_a_fixture_of_every_era() -> None:
    assert [p.name for p in SQLITE] == [
        "sqlite-v1-0bb48ea.sql",
        "sqlite-v1-bc1f352.sql",
        "sqlite-v1-ebababd.sql",
    ]
    assert len(POSTGRES) == 10


def load_sqlite(script: Path, db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.executescript(script.read_text())
    conn.close()


def recorded(store: SqlStore) -> list[int]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(select(schema.schema_version.c.version))]


def tables_of(store: SqlStore) -> set[str]:
    return set(inspect(store.engine).get_table_names())


def part_versions(url: str) -> dict[str, int] | None:
    """The rows of orbit_schema_parts; None when the table does not exist."""
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('orbit_schema_parts')").fetchone() == (None,):
            return None
        return dict(conn.execute("SELECT part, version FROM orbit_schema_parts").fetchall())


def test_the_base_schema_is_the_books_version() -> None:
    assert schema.SCHEMA_VERSION == BOOK_VERSION
    assert schema.MIGRATIONS == []
    assert schema.schema_parts not in schema.BASE


def assert_samples_survived(store: SqlStore) -> None:
    """The rows of schema_samples.BASE, read through the store's own API."""
    [definition] = store.load_definitions()
    assert (definition.name, definition.version, definition.definition_hash) == (
        "Wf",
        "1.0.0",
        "sha256:x",
    )
    assert store.history("e-1") == schema_samples.EVENTS
    assert store.history("e-2", 1) == schema_samples.EVENTS
    row = store.execution_row("e-2")
    assert row is not None and (row.status, row.updated_at_ms, row.last_seq) == (
        "COMPLETED",
        3000,
        2,
    )
    assert ("e-1", schema_samples.EVENTS) in store.load_active()
    [worker] = store.list_workers()
    assert (worker.worker_id, worker.contracts) == (
        "w-1",
        [{"name": "demo.work", "version": "1.0.0"}],
    )
    [sched] = store.load_schedules()
    assert (sched.schedule_id, sched.spec, sched.fired, sched.skipped, sched.due_ms) == (
        "hourly",
        {"workflow": "Wf", "interval": "1h"},
        2,
        1,
        5000,
    )


def start_one(store: SqlStore, eid: str) -> None:
    created = ev.WorkflowCreated(1, 2000, "Wf", "1.0.0", "sha256:x", {}, None, None)
    row = ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", "RUNNING", 2000, 2000, 2)
    change = ExecutionChange(eid, row, [created, ev.WorkflowStarted(2, 2000)], new=True)
    store.commit(CommitBatch(executions=[change]))


@pytest.mark.parametrize("script", SQLITE, ids=lambda p: p.stem)
def test_a_sqlite_database_of_every_era_is_upgraded_with_its_rows(
    script: Path, tmp_path: Path
) -> None:
    db = tmp_path / "old.db"
    load_sqlite(script, db)
    store = SqliteStore(db)
    assert store.found_version == 1
    assert recorded(store) == [BOOK_VERSION]
    assert schema.schema_parts.name not in tables_of(store)
    assert_samples_survived(store)
    start_one(store, "e-3")  # and it takes new work
    store.close()
    again = SqliteStore(db)
    assert again.found_version == BOOK_VERSION
    assert again.history("e-3") is not None
    assert_samples_survived(again)
    again.close()


def test_a_sqlite_database_newer_than_the_code_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    load_sqlite(SQLITE[0], db)
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_version SET version = 2")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError) as info:
        SqliteStore(db)
    assert info.value.message == (
        f"the database {db} cannot be opened: the database has schema version 2, "
        "newer than this server knows (1); run a release of orbit server that knows it"
    )
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(2,)]
    conn.close()


def test_a_new_sqlite_database_records_the_books_version_and_no_parts(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "fresh.db")
    assert store.found_version == 0
    assert recorded(store) == [BOOK_VERSION]
    assert tables_of(store) == {t.name for t in schema.BASE}
    store.close()


# ---- PostgreSQL


def shape(url: str) -> dict[str, Any]:
    """What the schema is on a PostgreSQL database: columns, constraints,
    indexes and the fence function (by name)."""
    with psycopg.connect(url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = current_schema() "
            "ORDER BY table_name, column_name"
        ).fetchall()
        constraints = conn.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
            "FROM pg_constraint WHERE connamespace = current_schema()::regnamespace "
            "ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "ORDER BY indexname"
        ).fetchall()
        functions = conn.execute(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p "
            "WHERE p.pronamespace = current_schema()::regnamespace ORDER BY p.proname"
        ).fetchall()
    return {"columns": columns, "constraints": constraints, "indexes": indexes, "fn": functions}


def open_parts(url: str, script: Path) -> None:
    """Opens the database as the kind of server that made it would: a
    single store, plus the election's table, plus shared mode's tables."""
    store = PostgresStore(url)
    if "-single" not in script.name:
        election = Election(store, "n9", None)
        election.leadership()
        election.close()
    store.close()
    if "-shared-" in script.name:
        SharedStore(url, node_id="n9").close()


@pytest.mark.parametrize("script", POSTGRES, ids=lambda p: p.stem)
def test_a_postgres_database_of_every_era_is_upgraded_with_its_rows(
    script: Path, pg_server: Any
) -> None:
    url = pg_server.url(pg_server.create_database())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(script.read_text().encode())
    store = PostgresStore(url)
    assert store.found_version == 1
    assert recorded(store) == [BOOK_VERSION]
    assert_samples_survived(store)
    start_one(store, "e-3")
    store.close()
    open_parts(url, script)
    # The same shape as a database this code made from nothing.
    fresh = pg_server.url(pg_server.create_database())
    open_parts(fresh, script)
    assert shape(url) == shape(fresh)
    # Each part the server uses at its current version; the base at the book's.
    parts = {"cluster": 1, "shared": 5} if "-shared-" in script.name else {"cluster": 1}
    expected = None if "-single" in script.name else parts
    assert part_versions(url) == part_versions(fresh) == expected
    assert parts == {p: schema.PART_VERSIONS[p] for p in parts}
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(BOOK_VERSION,)]
        if "-single" not in script.name:
            assert conn.execute("SELECT term, leader_node FROM orbit_cluster").fetchall() == [
                (3, "n1")
            ]
        if "-shared-" in script.name:
            # (Version 4's columns: the defaults, so old rows keep their order.)
            assert conn.execute(
                "SELECT execution_id, unit_key, state, node_id, priority, vt FROM orbit_tasks"
            ).fetchall() == [("e-1", "step[0]", "queued", None, 0, 0.0)]
            assert conn.execute("SELECT kind, state FROM orbit_inbox").fetchall() == [
                ("signal", "pending")
            ]
            assert conn.execute("SELECT node_id, epoch FROM orbit_owners").fetchall() == [("n1", 4)]
            assert conn.execute("SELECT worker_id FROM orbit_sessions").fetchall() == [("w-1",)]
        else:  # a single server made none of shared mode's tables, nor makes them
            tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables")}
            assert not tables & {t.name for t in schema.SHARED}
    again = PostgresStore(url)
    assert again.found_version == BOOK_VERSION
    assert_samples_survived(again)
    again.close()


def test_a_new_postgres_database_records_the_books_version_and_no_parts(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    assert store.found_version == 0
    assert recorded(store) == [BOOK_VERSION]
    assert tables_of(store) == {t.name for t in schema.BASE}
    store.close()
    assert part_versions(pg_url) is None


def set_part(url: str, part: str, version: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE orbit_schema_parts SET version = %s WHERE part = %s", (version, part))


def test_newer_cluster_tables_are_refused_untouched(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    election = Election(store, "n1", None)
    election.leadership()
    election.close()
    newer = schema.PART_VERSIONS["cluster"] + 1
    set_part(pg_url, "cluster", newer)
    with pytest.raises(StorageError) as info:
        Election(store, "n1", None).leadership()
    assert info.value.message == (
        f"the database has cluster tables at version {newer}, newer than this server "
        f"knows ({newer - 1}); run a release of orbit server that knows it"
    )
    store.close()
    assert part_versions(pg_url) == {"cluster": newer}


def test_newer_shared_mode_tables_are_refused_untouched(pg_url: str) -> None:
    SharedStore(pg_url, node_id="n1").close()
    newer = schema.PART_VERSIONS["shared"] + 1
    set_part(pg_url, "shared", newer)
    with pytest.raises(StorageError) as info:
        SharedStore(pg_url, node_id="n1")
    assert info.value.message == (
        f"the database has shared-mode tables at version {newer}, newer than this server "
        f"knows ({newer - 1}); run a release of orbit server that knows it"
    )
    assert part_versions(pg_url) == {"shared": newer}
    # The base is another part: a single server still opens the database.
    PostgresStore(pg_url).close()


def test_part_migrations_run_once_in_order(pg_url: str, monkeypatch: Any) -> None:
    SharedStore(pg_url, node_id="n1").close()
    ran: list[int] = []
    now = schema.PART_VERSIONS["shared"]
    monkeypatch.setitem(schema.PART_VERSIONS, "shared", now + 2)
    monkeypatch.setitem(
        schema.PART_MIGRATIONS,
        "shared",
        [
            *schema.PART_MIGRATIONS["shared"],
            (now + 1, lambda conn: ran.append(now + 1)),
            (now + 2, lambda conn: ran.append(now + 2)),
        ],
    )
    SharedStore(pg_url, node_id="n1").close()
    assert ran == [now + 1, now + 2]
    SharedStore(pg_url, node_id="n1").close()
    assert ran == [now + 1, now + 2]
    assert part_versions(pg_url) == {"shared": now + 2}


def test_shared_tables_of_version_3_gain_the_boards_order(pg_server: Any) -> None:
    """Version 3's shape (as main left it before the board's order): the
    queue without `priority` and `vt`, its indexes in arrival order, no
    board tables. Version 4 adds the columns with 0 for the rows there,
    remakes the indexes and makes the tables: the same shape as new."""
    url = pg_server.url(pg_server.create_database())
    SharedStore(url, node_id="n1").close()
    with psycopg.connect(url) as conn:
        conn.execute("DROP TABLE orbit_board_clock, orbit_board_keys")
        conn.execute("DROP INDEX orbit_tasks_queued, orbit_tasks_node_queued")
        conn.execute("ALTER TABLE orbit_tasks DROP COLUMN priority, DROP COLUMN vt")
        conn.execute(
            "CREATE INDEX orbit_tasks_queued ON orbit_tasks (task_name, contract_version, "
            "enqueued_ms, id) WHERE state = 'queued'"
        )
        conn.execute(
            "CREATE INDEX orbit_tasks_node_queued ON orbit_tasks (node_id, task_name, "
            "contract_version, enqueued_ms) WHERE state = 'queued'"
        )
        conn.execute(
            "INSERT INTO orbit_tasks (execution_id, unit_key, offer_seq, task_name, "
            "contract_version, assignment, state, enqueued_ms, node_id) "
            "VALUES ('e-1', 'work', 1, 't', '1.0.0', '{}', 'queued', 5, 'n1')"
        )
    set_part(url, "shared", 3)
    SharedStore(url, node_id="n1").close()
    fresh = pg_server.url(pg_server.create_database())
    SharedStore(fresh, node_id="n1").close()
    assert shape(url) == shape(fresh)
    assert part_versions(url) == {"shared": schema.PART_VERSIONS["shared"]}
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT execution_id, priority, vt FROM orbit_tasks").fetchall() == [
            ("e-1", 0, 0.0)
        ]


# The search index (orbit_store.search) as builds before version 3 made it
# (the DDL of that code, for both dialects): the rows name their workflow
# and field. Version 1's value indexes were whole, version 2's partial.
OLD_SEARCH_TABLE = (
    "CREATE TABLE orbit_search_values (execution_id TEXT NOT NULL, field TEXT NOT NULL, "
    "workflow TEXT NOT NULL, str_value TEXT, num_value FLOAT, "
    "PRIMARY KEY (execution_id, field)){}"
)
OLD_SEARCH_INDEXES = {
    1: (
        "CREATE INDEX orbit_search_str ON orbit_search_values (workflow, field, str_value)",
        "CREATE INDEX orbit_search_num ON orbit_search_values (workflow, field, num_value)",
    ),
    2: (
        "CREATE INDEX orbit_search_num ON orbit_search_values (workflow, field, num_value) "
        "WHERE num_value IS NOT NULL",
        "CREATE INDEX orbit_search_str ON orbit_search_values (workflow, field, str_value) "
        "WHERE str_value IS NOT NULL",
    ),
}
# Rows of an old table: two workflows declare `customer`, `Orders` also
# `amount` and a Timestamp-like field with both columns filled, and one
# execution waits (`@waiting`, orbit_core.visibility.waiting).
OLD_SEARCH_ROWS = [
    ("e-1", "customer", "Orders", "c-1", None),
    ("e-1", "amount", "Orders", None, 100.0),
    ("e-2", "customer", "Orders", "c-1", None),
    ("e-2", "amount", "Orders", None, 600.0),
    ("e-2", "placed", "Orders", "2026-01-02T00:00:00Z", 1767312000000.0),
    ("e-3", "customer", "Orders", "c-2", None),
    ("e-3", "amount", "Orders", None, 700.0),
    ("e-3", "@waiting", "Orders", "|signal:approve|", None),
    ("r-1", "customer", "Refunds", "c-1", None),
]
OLD_SEARCH_EXECUTIONS = (
    ("e-1", "Orders"),
    ("e-2", "Orders"),
    ("e-3", "Orders"),
    ("r-1", "Refunds"),
)


def search_rows(store: SqlStore) -> None:
    changes = []
    for eid, customer, amount in (("e-1", "c-1", 100.0), ("e-2", "c-1", 600.0)):
        row = ExecutionRow(eid, "Orders", "1.0.0", "h", "RUNNING", 1000, 1000, 0)
        values = [SearchValue("customer", customer, None), SearchValue("amount", None, amount)]
        changes.append(ExecutionChange(eid, row, [], new=True, search=values))
    store.commit(CommitBatch(executions=changes))


def old_search_part(store: SqlStore, version: int) -> None:
    """Leaves the store's database as a build of search `version` (1 or 2)
    would have, with OLD_SEARCH_ROWS and their executions (the store is
    closed after)."""
    changes = [
        ExecutionChange(eid, ExecutionRow(eid, wf, "1.0.0", "h", "RUNNING", n, n, 0), [], new=True)
        for n, (eid, wf) in enumerate(OLD_SEARCH_EXECUTIONS, 1000)
    ]
    store.commit(CommitBatch(executions=changes))
    postgres = store.engine.dialect.name == "postgresql"
    parts_table = CreateTable(schema.schema_parts, if_not_exists=True)
    store.close()
    statements = [
        str(parts_table.compile(dialect=store.engine.dialect)),
        OLD_SEARCH_TABLE.format("" if postgres else " WITHOUT ROWID"),
        *OLD_SEARCH_INDEXES[version],
    ]
    insert = (
        "INSERT INTO orbit_search_values (execution_id, field, workflow, str_value, num_value) "
    )
    parts = "INSERT INTO orbit_schema_parts (part, version) VALUES ('search', {})"
    if postgres:
        assert isinstance(store, PostgresStore)
        with psycopg.connect(store.url) as pg:
            for statement in statements:
                pg.execute(statement)
            with pg.cursor() as cursor:
                cursor.executemany(insert + "VALUES (%s, %s, %s, %s, %s)", OLD_SEARCH_ROWS)
            pg.execute(parts.format(version))
        return
    assert isinstance(store, SqliteStore)
    lite = sqlite3.connect(store.path)
    for statement in statements:
        lite.execute(statement)
    lite.executemany(insert + "VALUES (?, ?, ?, ?, ?)", OLD_SEARCH_ROWS)
    lite.execute(parts.format(version))
    lite.commit()
    lite.close()


# The fields of the workflows `Orders` (a `search` block of `customer:
# input.customer`, String, `amount: input.amount`, Float, and `placed`, a
# Timestamp) and `Refunds` (`customer` too), typed by hand: orbit_store's
# tests do not import the compiler.
ORDERS = FieldCatalog(
    {
        "customer": {"Orders": "string", "Refunds": "string"},
        "amount": {"Orders": "float"},
        "placed": {"Orders": "timestamp"},
    },
    frozenset({"Orders", "Refunds"}),
    {"Orders": frozenset({"h"}), "Refunds": frozenset({"h"})},
)


def found(store: SqlStore, text: str) -> list[str]:
    query = SearchQuery(compile_filter(text, ORDERS), limit=10)
    return sorted(r.execution_id for r in store.search_executions(query))


# Filters over the old rows and what they find, before and after the upgrade.
OLD_SEARCH_FILTERS = {
    'customer == "c-1"': ["e-1", "e-2", "r-1"],
    'customer == "c-1" and amount > 500': ["e-2"],
    'customer == "c-1" and workflow == "Orders"': ["e-1", "e-2"],
    "amount >= 600": ["e-2", "e-3"],
    'customer != "c-1" or amount < 200': ["e-1", "e-3"],
    'placed > "2026-01-01T00:00:00Z"': ["e-2"],
}


def assert_old_rows_found(store: SqlStore) -> None:
    """The migrated rows answer filters as they did, retention reads them
    back by name, and a later value of a migrated field replaces it."""
    for text, ids in OLD_SEARCH_FILTERS.items():
        assert found(store, text) == ids, text
    values = store.retention_search_values(["e-2", "e-3", "r-1"])
    assert values == {
        "e-2": [
            SearchValue("amount", None, 600.0),
            SearchValue("customer", "c-1", None),
            SearchValue("placed", "2026-01-02T00:00:00Z", 1767312000000.0),
        ],
        "e-3": [
            SearchValue("@waiting", "|signal:approve|", None),
            SearchValue("amount", None, 700.0),
            SearchValue("customer", "c-2", None),
        ],
        "r-1": [SearchValue("customer", "c-1", None)],
    }
    row = ExecutionRow("e-1", "Orders", "1.0.0", "h", "RUNNING", 1000, 1001, 1)
    later = [SearchValue("customer", "c-9", None)]
    store.commit(CommitBatch(executions=[ExecutionChange("e-1", row, [], search=later)]))
    assert found(store, 'customer == "c-1"') == ["e-2", "r-1"]
    assert found(store, 'customer == "c-9"') == ["e-1"]
    assert store.retention_search_values(["e-1"])["e-1"] == [
        SearchValue("amount", None, 100.0),
        SearchValue("customer", "c-9", None),
    ]


def sqlite_search_shape(db: Path) -> tuple[list[Any], list[Any]]:
    conn = sqlite3.connect(db)
    try:
        indexes = conn.execute(
            "SELECT name, sql FROM sqlite_master "
            "WHERE tbl_name IN ('orbit_search_values', 'orbit_search_fields') ORDER BY name"
        ).fetchall()
        parts = conn.execute("SELECT part, version FROM orbit_schema_parts").fetchall()
    finally:
        conn.close()
    return indexes, parts


@pytest.mark.parametrize("version", [1, 2])
def test_a_sqlite_search_part_of_an_older_version_is_brought_to_the_current_one(
    tmp_path: Path, version: int
) -> None:
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    store = SqliteStore(fresh)
    search_rows(store)
    store.close()
    old_search_part(SqliteStore(old), version)
    assert sqlite_search_shape(old) != sqlite_search_shape(fresh)
    # What the old build found is what the new one must find.
    for text, ids in OLD_SEARCH_FILTERS.items():
        assert_old_filter(old, text, ids)
    store = SqliteStore(old)
    try:
        assert sqlite_search_shape(old) == sqlite_search_shape(fresh)
        assert ("search", schema.SEARCH_VERSION) in sqlite_search_shape(old)[1]
        assert schema.SEARCH_VERSION == 3
        assert_old_rows_found(store)
    finally:
        store.close()
    conn = sqlite3.connect(old)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "orbit_search_values_v2" not in tables
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def assert_old_filter(db: Path, text: str, ids: list[str]) -> None:
    """OLD_SEARCH_FILTERS holds what an old table answers: checked on the
    old table itself by hand-written SQL, for the filters over one field."""
    if " and " in text or " or " in text:
        return
    field, op, value = text.split(" ", 2)
    column, literal = ("str_value", value) if value.startswith('"') else ("num_value", value)
    if field == "placed":  # a Timestamp compares as milliseconds
        column, literal = "num_value", "1767225600000"
    literal = literal.replace('"', "'")
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT execution_id FROM orbit_search_values "
            f"WHERE field = '{field}' AND {column} {op} {literal} ORDER BY execution_id"
        ).fetchall()
    finally:
        conn.close()
    assert [r[0] for r in rows] == ids, text


@pytest.mark.parametrize("version", [1, 2])
def test_a_postgres_search_part_of_an_older_version_is_brought_to_the_current_one(
    pg_server: Any, version: int
) -> None:
    fresh = pg_server.url(pg_server.create_database())
    old = pg_server.url(pg_server.create_database())
    store = PostgresStore(fresh)
    search_rows(store)
    store.close()
    old_search_part(PostgresStore(old), version)
    assert shape(old) != shape(fresh)
    store = PostgresStore(old)
    try:
        assert shape(old) == shape(fresh)
        assert part_versions(old) == {"search": 3}
        assert_old_rows_found(store)
    finally:
        store.close()


def test_a_postgres_search_part_is_upgraded_once_by_two_servers(pg_server: Any) -> None:
    # Two servers opening an old database together: the second waits on the
    # part's lock, then finds it done.
    url = pg_server.url(pg_server.create_database())
    old_search_part(PostgresStore(url), 2)
    stores = [PostgresStore(url), PostgresStore(url)]
    try:
        assert part_versions(url) == {"search": 3}
        for store in stores:
            assert found(store, 'customer == "c-1" and amount > 500') == ["e-2"]
    finally:
        for store in stores:
            store.close()


def test_newer_search_tables_are_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    store = SqliteStore(db)
    search_rows(store)
    store.close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE orbit_schema_parts SET version = 4 WHERE part = 'search'")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="search tables at version 4, newer than this server"):
        SqliteStore(db)
    assert sqlite_search_shape(db)[1] == [("search", 4)]


def test_shared_tables_of_version_4_gain_the_step_line(pg_server: Any) -> None:
    """Version 4's shape (as main left it before the one line of a step's
    concurrency): no `orbit_step_waits`. Version 5 makes it, and keeps the
    slots held: the same shape as new."""
    url = pg_server.url(pg_server.create_database())
    SharedStore(url, node_id="n1").close()
    with psycopg.connect(url) as conn:
        conn.execute("DROP TABLE orbit_step_waits")
        conn.execute(
            "INSERT INTO orbit_step_slots (execution_id, unit_key, run, offer_seq, flow, key, "
            "since_ms) VALUES ('e-1', 'work', 1, 3, 'W/work', 'c-1', 5)"
        )
    set_part(url, "shared", 4)
    SharedStore(url, node_id="n1").close()
    fresh = pg_server.url(pg_server.create_database())
    SharedStore(fresh, node_id="n1").close()
    assert shape(url) == shape(fresh)
    assert part_versions(url) == {"shared": 5}
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT execution_id, key FROM orbit_step_slots").fetchall() == [
            ("e-1", "c-1")
        ]
        assert conn.execute("SELECT count(*) FROM orbit_step_waits").fetchall() == [(0,)]
