"""Every table of chapter 43 on one MetaData (schema version 1). The same
definitions serve SQLite and PostgreSQL; BigInteger becomes INTEGER on SQLite."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, Table, Text

SCHEMA_VERSION = 1

# `sqlite_with_rowid=False`: on SQLite, the tables keyed by text are stored by
# their key (one B-tree written per row instead of a rowid table plus a key
# index); other dialects ignore the option.

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
    sqlite_with_rowid=False,
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
    sqlite_with_rowid=False,
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
