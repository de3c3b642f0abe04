"""Every table ORBIT keeps (chapter 43) on one MetaData, and how a database
is brought to the shape this code expects. The same definitions serve
SQLite and PostgreSQL; BigInteger becomes INTEGER on SQLite.

The tables come in three parts: `BASE` (every server), `CLUSTER` (the
election row of `--cluster`) and `SHARED` (`--cluster-mode shared`, plus
its fence function). A server creates only the parts it uses, as the book
has it: a single server never creates, nor reads, the cluster or shared
tables.

Each part has a version of its own. The base part's is the book's
`schema_version` table, which holds 1 in this release (`SCHEMA_VERSION`):
chapter 43's tables. The cluster and shared parts record theirs in
`orbit_schema_parts` (one row a part), a table created only with one of
those parts, so a single server's database is exactly the book's, and
their changes leave `schema_version` at 1 as the book says they do.

`prepare` runs on every open, in one transaction: it reads the base
version, refuses one newer than this code, runs the `MIGRATIONS` of the
versions it lacks (each step recording its version; none yet), then creates
the base tables still missing (a database of an earlier release gains
tables added since, as the book describes). `prepare_part`, run by the
cluster and shared stores in the transaction that creates their tables,
does the same for a part with `PART_MIGRATIONS`, then creates what is
missing of it at the current shape (`create_statements`) and records the
version reached. A part's tables that exist with no recorded version were
left by a build before parts were versioned: version 1. On PostgreSQL both
take an advisory lock first, so servers starting together on one database
prepare it one after the other.

The shared part's version 2 brings its tables, which builds before it
created with `IF NOT EXISTS` and changed in place without recording a
version, to one known shape (`orbit_tasks.node_id` and its index, the two
partial indexes that replaced `orbit_inbox_pending`); version 3 adds
`orbit_step_slots` (a new table: nothing to change in place); version 4
gives `orbit_tasks` a `priority` and a virtual time `vt` (rows found get
0 for both), remakes its two queue indexes in the claim's order and adds
the board's clock and keys (`orbit_board_clock`, `orbit_board_keys`);
version 5 adds `orbit_step_waits` (a new table). `tests/fixtures`
holds a database of each earlier shape, and a test upgrades every one of
them.

Our own steps rather than Alembic: the book's `schema_version` table (one
integer) is the base version record, where Alembic keeps revision ids in a
table of its own; Alembic finds its migrations as scripts in a directory,
which a wheel would have to carry and every start would import; and a step
is a function of a connection here, so it runs in the transaction (and
under the lock) that also creates the tables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from orbit_core.errors import StorageError

if TYPE_CHECKING:
    import psycopg

# The base part's version: chapter 43's schema, which the book numbers 1.
SCHEMA_VERSION = 1

# pg_advisory_xact_lock's key for schema preparation: "orbit" and a 1.
SCHEMA_LOCK_KEY = 0x6F72626974_01
# The SQLSTATE orbit_fence raises (a class of its own, so no other error
# reads as a refusal).
FENCED_STATE = "OF001"

# `sqlite_with_rowid=False`: on SQLite, the projection is stored by its key
# (one B-tree written per update instead of a rowid table plus a key index).
# The event tables keep their rowid: a group commit appends events of many
# executions, which land together at the end of the rowid B-tree (plus small
# key-index entries) instead of dirtying one key-ordered page per execution;
# measured, that halves SQLite's share of a commit. Other dialects ignore the
# option.

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, nullable=False),
)

# The versions of the cluster and shared parts; created with either part.
schema_parts = Table(
    "orbit_schema_parts",
    metadata,
    Column("part", Text, primary_key=True),
    Column("version", Integer, nullable=False),
)

workflow_definitions = Table(
    "workflow_definitions",
    metadata,
    Column("name", Text, primary_key=True),
    Column("version", Text, primary_key=True),
    Column("definition_hash", Text, nullable=False),
    Column("ir", Text, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
)

workflow_executions = Table(
    "workflow_executions",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("workflow", Text, nullable=False),
    Column("version", Text, nullable=False),
    Column("definition_hash", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Index("workflow_executions_status", "status"),
    sqlite_with_rowid=False,
)

execution_events = Table(
    "execution_events",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("event_type", Text, nullable=False),
    Column("step", Text, nullable=True),
    Column("payload", Text, nullable=False),
    Column("timestamp_ms", BigInteger, nullable=False),
)

execution_run_events = Table(
    "execution_run_events",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("run", BigInteger, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("event_type", Text, nullable=False),
    Column("step", Text, nullable=True),
    Column("payload", Text, nullable=False),
    Column("timestamp_ms", BigInteger, nullable=False),
)

orbit_schedules = Table(
    "orbit_schedules",
    metadata,
    Column("schedule_id", Text, primary_key=True),
    Column("spec", Text, nullable=False),
    Column("paused", BigInteger, nullable=False, default=0),
    Column("next_fire_ms", BigInteger, nullable=True),
    Column("due_ms", BigInteger, nullable=True),
    Column("last_fire_ms", BigInteger, nullable=True),
    Column("last_execution_id", Text, nullable=True),
    Column("fired_count", BigInteger, nullable=False, default=0),
    Column("skipped_count", BigInteger, nullable=False, default=0),
    Column("last_error", Text, nullable=True),
    Column("claimed_by", Text, nullable=True),
    Column("claimed_until_ms", BigInteger, nullable=True),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    Index("orbit_schedules_due", "due_ms"),
)

worker_registry = Table(
    "worker_registry",
    metadata,
    Column("worker_id", Text, primary_key=True),
    Column("runtime", Text, nullable=False),
    Column("sdk", Text, nullable=True),
    Column("contracts", Text, nullable=False),
    Column("registered_at_ms", BigInteger, nullable=False),
    Column("last_seen_ms", BigInteger, nullable=False),
)


# ---- standby mode (cluster.py): the term and leader of the election

orbit_cluster = Table(
    "orbit_cluster",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("term", BigInteger, nullable=False),
    Column("leader_node", Text),
    Column("leader_addr", Text),
    Column("since_ms", BigInteger),
)

# ---- shared mode (shared.py's docstring says what each table is for)

_QUEUED = text("state = 'queued'")
_PENDING = text("state = 'pending'")

orbit_nodes = Table(
    "orbit_nodes",
    metadata,
    Column("node_id", Text, primary_key=True),
    Column("addr", Text),
    Column("instance", Text, nullable=False),
    Column("heartbeat_ms", BigInteger, nullable=False),
    Column("started_ms", BigInteger, nullable=False),
)

orbit_owners = Table(
    "orbit_owners",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("root_id", Text, nullable=False),
    Column("node_id", Text, nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("since_ms", BigInteger, nullable=False),
    Index("orbit_owners_node", "node_id", "root_id"),
)

orbit_tasks = Table(
    "orbit_tasks",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("execution_id", Text, nullable=False),
    Column("unit_key", Text, nullable=False),
    Column("offer_seq", BigInteger, nullable=False),
    Column("task_name", Text, nullable=False),
    Column("contract_version", Text, nullable=False),
    Column("language", Text),
    Column("timeout_ms", BigInteger),
    Column("assignment", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("token", Text),
    Column("claimed_by", Text),
    Column("session_id", Text),
    Column("enqueued_ms", BigInteger, nullable=False),
    # The node that owns the task's execution (moved with a take-over); last,
    # where the shared part's version 2 adds it to an older table.
    Column("node_id", Text),
    # The step's `priority`, and the task's virtual time in its fairness
    # order (shared.py, "The board's order"); after node_id, where version
    # 4 adds them, with defaults for the rows it finds.
    Column("priority", BigInteger, nullable=False, server_default=text("0")),
    Column("vt", Float(precision=53), nullable=False, server_default=text("0")),
    UniqueConstraint("execution_id", "unit_key", "offer_seq"),
    Index("orbit_tasks_token", "token"),
)
# A claim reads these in its order (`priority DESC, vt, enqueued_ms, id`):
# for every node's tasks, and for one node's (its own come first).
Index(
    "orbit_tasks_queued",
    orbit_tasks.c.task_name,
    orbit_tasks.c.contract_version,
    orbit_tasks.c.priority.desc(),
    orbit_tasks.c.vt,
    orbit_tasks.c.enqueued_ms,
    orbit_tasks.c.id,
    postgresql_where=_QUEUED,
)
Index(
    "orbit_tasks_node_queued",
    orbit_tasks.c.node_id,
    orbit_tasks.c.task_name,
    orbit_tasks.c.contract_version,
    orbit_tasks.c.priority.desc(),
    orbit_tasks.c.vt,
    orbit_tasks.c.enqueued_ms,
    orbit_tasks.c.id,
    postgresql_where=_QUEUED,
)

# The board's virtual times (shared part version 4): per task name, the
# time of the last task claimed (the board's clock); per fairness key
# (`<workflow>/<step>/<key>`), the time given to its latest task. A key's
# row whose time the clock passed says nothing more and is swept.
orbit_board_clock = Table(
    "orbit_board_clock",
    metadata,
    Column("task_name", Text, primary_key=True),
    Column("vt", Float(precision=53), nullable=False),
)

orbit_board_keys = Table(
    "orbit_board_keys",
    metadata,
    Column("fair_key", Text, primary_key=True),
    Column("task_name", Text, nullable=False),
    Column("vt", Float(precision=53), nullable=False),
)

orbit_inbox = Table(
    "orbit_inbox",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=True),
    Column("execution_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("sender", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("reply", Text),
    Column("created_ms", BigInteger, nullable=False),
    # Two partial indexes, as with (execution_id, seq) alone the planner took
    # it for `seq = ANY(...) AND state = 'pending'` and read all of it.
    Index("orbit_inbox_pending_seq", "seq", postgresql_where=_PENDING),
    Index("orbit_inbox_pending_execution", "execution_id", "seq", postgresql_where=_PENDING),
)

orbit_sessions = Table(
    "orbit_sessions",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("worker_id", Text, nullable=False),
    Column("runtime", Text, nullable=False),
    Column("contracts", Text, nullable=False),
    Column("sdk", Text),
    Column("registered_ms", BigInteger, nullable=False),
    Column("last_seen_ms", BigInteger, nullable=False),
)

orbit_cancels = Table(
    "orbit_cancels",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("token", Text, primary_key=True),
)

# Waits for the end of an execution owned by another server: its end is
# announced (NOTIFY orbit_done) only when one is listed here.
orbit_waits = Table(
    "orbit_waits",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("execution_id", Text, nullable=False),
    Column("node_id", Text, nullable=False),
    Column("since_ms", BigInteger, nullable=False),
    Index("orbit_waits_execution", "execution_id"),
)

# The slots of step `concurrency` limits held for the whole group
# (orbit_core/engine/step_slots.py): one row per unit's offer holding one,
# counted per scope (`flow` is `<workflow>/<step>`). Added by version 3.
orbit_step_slots = Table(
    "orbit_step_slots",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("unit_key", Text, primary_key=True),
    Column("run", BigInteger, primary_key=True),
    Column("offer_seq", BigInteger, primary_key=True),
    Column("flow", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("since_ms", BigInteger, nullable=False),
    Index("orbit_step_slots_scope", "flow", "key"),
)

# The units waiting for a slot of a step's `concurrency`, one row per unit
# (its waiting offer), so that the line is the group's: a take is refused
# while a row of the scope is ahead of the taker (its `priority`, then
# `since_ms`). Written and deleted under the scope's advisory lock by the
# take, deleted by the commit that takes the unit out of the line, or by the
# reconciliation of the owner (orbit_core/engine/step_slots.py). Added by
# version 5.
orbit_step_waits = Table(
    "orbit_step_waits",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("unit_key", Text, primary_key=True),
    Column("run", BigInteger, nullable=False),
    Column("offer_seq", BigInteger, nullable=False),
    Column("flow", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("priority", BigInteger, nullable=False),
    Column("since_ms", BigInteger, nullable=False),
    Index("orbit_step_waits_scope", "flow", "key"),
)

# The fence of a shared commit's one statement (shared.py, `_fenced_group`):
# locks the ownership rows (FOR SHARE, the latest versions), then raises
# unless each still names `node` at the epoch given. The check is a statement
# of its own, so it reads what a take-over committed before the lock. Its two
# statements look rows up by key: their plans are kept (the store's sessions
# plan every statement again, which cost a fenced commit about 75 us of
# PostgreSQL's CPU here). Code rather than data: replaced at every shared
# start, so it needs no migration.
FENCE_FUNCTION = (
    "CREATE OR REPLACE FUNCTION orbit_fence(node TEXT, ids TEXT[], epochs BIGINT[]) "
    "RETURNS BOOLEAN LANGUAGE plpgsql SET plan_cache_mode = auto AS $$ BEGIN "
    "PERFORM 1 FROM orbit_owners WHERE execution_id = ANY(ids) FOR SHARE; "
    "IF EXISTS (SELECT 1 FROM unnest(ids, epochs) AS v(id, epoch) WHERE NOT EXISTS "
    "(SELECT 1 FROM orbit_owners o WHERE o.execution_id = v.id AND o.node_id = node "
    "AND o.epoch = v.epoch)) THEN "
    f"RAISE EXCEPTION 'fenced' USING ERRCODE = '{FENCED_STATE}'; END IF; "
    "RETURN true; END $$"
)

# `orbit server --retention` (beyond the book): an execution's own retention,
# given when it was started. Created by the first server with retention
# (`SqlStore.prepare_retention`), so a database never used with it is the book's.
orbit_retention = Table(
    "orbit_retention",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("retention_ms", BigInteger, nullable=False),
)
RETENTION = (orbit_retention,)
# Finished executions by their end, for retention's candidates; created with
# `orbit_retention` (a database never used with retention lacks it). Text,
# not an `Index` of the table, which would join the base schema.
RETENTION_INDEX = (
    "CREATE INDEX IF NOT EXISTS orbit_retention_ended "
    "ON workflow_executions (updated_at_ms, execution_id)"
)

# The search index (beyond the book: docs/language/visibility.md): one row
# per execution and declared search field, written in the commit of the event
# that made the value known. A part of its own, "search", recorded in
# `orbit_schema_parts` and created by the first commit that writes a value
# (orbit_store.search), so a database whose workflows declare no field stays
# the book's.
#
# A field is named in the rows by a small integer, `field_id`, which
# `orbit_search_fields` gives each (workflow, field) the first time a value
# of it is written: an index entry then holds the id, the value and the
# execution, not the workflow's and the field's names as well, so the rows
# and the entries of the three B-trees are about half as long, and a start's
# writes dirty fewer pages (docs/language/visibility.md, what indexing costs).
orbit_search_fields = Table(
    "orbit_search_fields",
    metadata,
    Column("field_id", Integer, primary_key=True, autoincrement=True),
    Column("workflow", Text, nullable=False),
    Column("field", Text, nullable=False),
    UniqueConstraint("workflow", "field", name="orbit_search_fields_name"),
)
orbit_search_values = Table(
    "orbit_search_values",
    metadata,
    Column("execution_id", Text, primary_key=True),
    Column("field_id", Integer, primary_key=True, autoincrement=False),
    Column("str_value", Text, nullable=True),
    Column("num_value", Float, nullable=True),
    # Partial: a row fills one of the two columns (a Timestamp both), and an
    # index entry for the other's null would cost every commit and serve no
    # query (a comparison on the column implies it is not null, so both
    # planners use them).
    Index(
        "orbit_search_str",
        "field_id",
        "str_value",
        sqlite_where=text("str_value IS NOT NULL"),
        postgresql_where=text("str_value IS NOT NULL"),
    ),
    Index(
        "orbit_search_num",
        "field_id",
        "num_value",
        sqlite_where=text("num_value IS NOT NULL"),
        postgresql_where=text("num_value IS NOT NULL"),
    ),
    sqlite_with_rowid=False,
)
SEARCH = (orbit_search_fields, orbit_search_values)
# The search part's version (orbit_store.search.PART; 2: the value indexes
# are partial; 3: fields are named by `orbit_search_fields`' ids).
SEARCH_VERSION = 3

# Idempotency keys of starts (beyond the book: docs/language/flow-control.md):
# one row per key, written in the commit that creates its execution. A part
# of its own, "idempotency", created by the first commit that writes a key
# (orbit_store.idempotency), so a database never given a key stays the book's.
orbit_idempotency_keys = Table(
    "orbit_idempotency_keys",
    metadata,
    Column("idem_key", Text, primary_key=True),
    Column("execution_id", Text, nullable=False),
    Column("workflow", Text, nullable=False),
    Column("input_digest", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("expires_ms", BigInteger, nullable=False),
    # For the sweep of expired keys.
    Index("orbit_idempotency_expires", "expires_ms"),
)
IDEMPOTENCY_VERSION = 1

# Token buckets of workflow start rates (beyond the book: docs/language/
# flow-control.md): one row per workflow and key, its theoretical arrival
# time, written in the commit of the start that took a token. A part of its
# own, "flow_rates", created by the first commit that writes one
# (orbit_store.rates).
orbit_flow_rates = Table(
    "orbit_flow_rates",
    metadata,
    Column("workflow", Text, primary_key=True),
    Column("rate_key", Text, primary_key=True),
    Column("tat_us", BigInteger, nullable=False),
)
FLOW_RATES_VERSION = 1


# Batch operations (beyond the book, docs/operating-executions.md): a job
# that pauses, resumes or cancels the executions a filter selected, and one
# row per selected execution with its outcome. Part "operations", created
# by the first batch (`SqlStore.prepare_batches`), so a database never used
# with batches is the book's; its version is kept in `orbit_schema_parts`.
orbit_batches = Table(
    "orbit_batches",
    metadata,
    Column("batch_id", Text, primary_key=True),
    Column("action", Text, nullable=False),
    # The action's own settings (a reason) and the filter, as JSON.
    Column("params", Text, nullable=False),
    Column("filter", Text, nullable=False),
    # selecting -> running -> done
    Column("state", Text, nullable=False),
    Column("total", BigInteger, nullable=False),
    Column("processed", BigInteger, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    Column("finished_at_ms", BigInteger, nullable=True),
)
orbit_batch_items = Table(
    "orbit_batch_items",
    metadata,
    Column("batch_id", Text, primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("execution_id", Text, nullable=False),
    # NULL: not yet acted on; `claimed_at_ms` set just before acting (an
    # item claimed and unfinished was interrupted: it is checked, not redone).
    Column("claimed_at_ms", BigInteger, nullable=True),
    Column("outcome", Text, nullable=True),
    Column("code", Text, nullable=True),
    Column("message", Text, nullable=True),
)
OPERATIONS = (orbit_batches, orbit_batch_items)
# The operations part's version, recorded in `orbit_schema_parts` (on both
# dialects: it is created through SQLAlchemy, not `prepare_part`).
OPERATIONS_PART = "operations"
OPERATIONS_VERSION = 1


BASE = (
    schema_version,
    workflow_definitions,
    workflow_executions,
    execution_events,
    execution_run_events,
    orbit_schedules,
    worker_registry,
)
CLUSTER = (orbit_cluster,)
SHARED = (
    orbit_nodes,
    orbit_owners,
    orbit_tasks,
    orbit_inbox,
    orbit_sessions,
    orbit_cancels,
    orbit_waits,
    orbit_step_slots,
    orbit_step_waits,
    orbit_board_clock,
    orbit_board_keys,
)
PARTS = {"cluster": CLUSTER, "shared": SHARED}
PART_TABLES = {part: frozenset(t.name for t in tables) for part, tables in PARTS.items()}


# What each part's tables are called in messages.
PART_LABELS = {"cluster": "cluster tables", "shared": "shared-mode tables"}


@functools.cache
def create_statements(part: str) -> tuple[str, ...]:
    """The PostgreSQL statements that create what is missing of a part
    ("cluster" or "shared") at its current shape, with the table of part
    versions (`prepare_part` runs them after the part's migrations)."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    out: list[str] = []
    for table in (schema_parts, *PARTS[part]):
        out.append(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
        out.extend(_create_indexes(table))
    if part == "shared":
        out.append(FENCE_FUNCTION)
    return tuple(out)


def _create_indexes(table: Table, *, skip: frozenset[str] = frozenset()) -> list[str]:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    return [
        str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect))
        for index in sorted(table.indexes, key=lambda i: str(i.name))
        if index.name not in skip
    ]


def _tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    return {str(r[0]) for r in rows}


def _shared_to_2(conn: psycopg.Connection[Any]) -> None:
    """Shared mode's tables, as any build before version 2 left them, to
    version 2."""
    found = _tables(conn)
    if "orbit_tasks" in found:
        conn.execute("ALTER TABLE orbit_tasks ADD COLUMN IF NOT EXISTS node_id TEXT")
    if "orbit_inbox" in found:
        conn.execute("DROP INDEX IF EXISTS orbit_inbox_pending")
    for table in SHARED:
        if table.name in found:
            # (The queue's indexes read columns version 4 adds: it makes them.)
            for statement in _create_indexes(table, skip=_QUEUE_INDEXES):
                conn.execute(statement)


def _shared_to_3(conn: psycopg.Connection[Any]) -> None:
    """Version 3: `orbit_step_slots` (a new table, created with the part's
    missing tables after the steps)."""


_QUEUE_INDEXES = frozenset({"orbit_tasks_queued", "orbit_tasks_node_queued"})


def _shared_to_4(conn: psycopg.Connection[Any]) -> None:
    """Version 4: the board's order. `orbit_tasks` gains `priority` and
    `vt` (its rows get 0 for both: they keep their order) and its two
    queue indexes are made again in the claim's order; the clock and key
    tables are new (created after the steps)."""
    if "orbit_tasks" in _tables(conn):
        conn.execute(
            "ALTER TABLE orbit_tasks ADD COLUMN IF NOT EXISTS priority BIGINT DEFAULT 0 NOT NULL, "
            "ADD COLUMN IF NOT EXISTS vt DOUBLE PRECISION DEFAULT 0 NOT NULL"
        )
        for name in sorted(_QUEUE_INDEXES):
            conn.execute(f"DROP INDEX IF EXISTS {name}")


def _shared_to_5(conn: psycopg.Connection[Any]) -> None:
    """Version 5: `orbit_step_waits`, the one line of a step's concurrency
    across the servers (a new table, created with the part's missing tables
    after the steps)."""


# (version, step): what brings a base schema from version-1 to version.
# None yet: the base tables are still the book's version 1.
MIGRATIONS: list[tuple[int, Callable[[Connection], None]]] = []

PartStep = Callable[["psycopg.Connection[Any]"], None]
# Each part's current version, and its steps as MIGRATIONS has them.
PART_VERSIONS = {"cluster": 1, "shared": 5}
PART_MIGRATIONS: dict[str, list[tuple[int, PartStep]]] = {
    "cluster": [],
    "shared": [(2, _shared_to_2), (3, _shared_to_3), (4, _shared_to_4), (5, _shared_to_5)],
}


def _newer(what: str, found: int, known: int) -> StorageError:
    return StorageError(
        f"the database has {what} version {found}, newer than this server knows "
        f"({known}); run a release of orbit server that knows it"
    )


def _recorded(conn: Connection) -> int | None:
    """The version the database records; None for a new database."""
    if not inspect(conn).has_table(schema_version.name):
        return None
    found = conn.execute(select(func.max(schema_version.c.version))).scalar()
    return None if found is None else int(found)


def prepare(conn: Connection) -> int:
    """Brings the base tables on `conn` to SCHEMA_VERSION inside the
    caller's transaction; returns the version it found (0 for a new
    database)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
    found = _recorded(conn)
    if found is not None and found > SCHEMA_VERSION:
        raise _newer("schema", found, SCHEMA_VERSION)
    if found is not None:
        for version, step in MIGRATIONS:
            if found < version <= SCHEMA_VERSION:
                step(conn)
                conn.execute(update(schema_version).values(version=version))
    metadata.create_all(conn, tables=list(BASE), checkfirst=True)
    if found is None:
        conn.execute(insert(schema_version).values(version=SCHEMA_VERSION))
        return 0
    return found


def _part_recorded(conn: psycopg.Connection[Any], part: str) -> int | None:
    """The version `orbit_schema_parts` records for `part`, if any."""
    row = conn.execute("SELECT version FROM orbit_schema_parts WHERE part = %s", (part,)).fetchone()
    return None if row is None else int(row[0])


def prepare_part(conn: psycopg.Connection[Any], part: str) -> int:
    """Brings a part ("cluster" or "shared") to its current version and
    creates what is missing of it, inside the caller's transaction on a
    PostgreSQL session; returns the version it found (0: a new part)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
    current = PART_VERSIONS[part]
    tables = _tables(conn)
    recorded = _part_recorded(conn, part) if schema_parts.name in tables else None
    # Unrecorded: the part is new (0), or a build before parts had versions
    # left its tables (1).
    found = recorded if recorded is not None else int(bool(tables & PART_TABLES[part]))
    if found > current:
        raise _newer(f"{PART_LABELS[part]} at", found, current)
    if found:
        for version, step in PART_MIGRATIONS[part]:
            if found < version <= current:
                step(conn)
    for statement in create_statements(part):
        conn.execute(statement)
    if recorded != current:
        conn.execute(
            "INSERT INTO orbit_schema_parts (part, version) VALUES (%s, %s) "
            "ON CONFLICT (part) DO UPDATE SET version = EXCLUDED.version",
            (part, current),
        )
    return found
