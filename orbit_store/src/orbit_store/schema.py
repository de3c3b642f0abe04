"""Every table of chapter 43 on one MetaData (schema version 1), and how a
database is brought to it. The same definitions serve SQLite and PostgreSQL;
BigInteger becomes INTEGER on SQLite.

`prepare` runs on every open, in one transaction: it creates missing tables
(so a database of an earlier release gains tables added since, without a
version change, as the book describes), refuses a database whose version is
newer than this code, and runs the `MIGRATIONS` a database of an older
version lacks, each step recording its version. Both dialects share the
steps; a step that needs dialect-specific SQL looks at `conn.dialect.name`.
On PostgreSQL the transaction first takes an advisory lock, so servers
starting together on one database prepare it one after the other.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    func,
    insert,
    select,
    text,
    update,
)

from orbit_core.errors import StorageError

SCHEMA_VERSION = 1

# (version, step): what brings a database from version-1 to version. Empty
# while the schema is at its first version.
MIGRATIONS: list[tuple[int, Callable[[Connection], None]]] = []

# pg_advisory_xact_lock's key for schema preparation: "orbit" and a 1.
SCHEMA_LOCK_KEY = 0x6F72626974_01

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


def prepare(conn: Connection) -> int:
    """Brings the database on `conn` to SCHEMA_VERSION inside the caller's
    transaction; returns the version it found (0 for a new database)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
    metadata.create_all(conn, checkfirst=True)
    found = conn.execute(select(func.max(schema_version.c.version))).scalar()
    if found is None:
        conn.execute(insert(schema_version).values(version=SCHEMA_VERSION))
        return 0
    if found > SCHEMA_VERSION:
        raise StorageError(
            f"the database has schema version {found}, newer than this server knows "
            f"({SCHEMA_VERSION}); run a release of orbit server that knows it"
        )
    for version, step in MIGRATIONS:
        if version > found:
            step(conn)
            conn.execute(update(schema_version).values(version=version))
    return int(found)
