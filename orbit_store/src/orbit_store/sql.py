"""The store port on SQLAlchemy Core, for any SQL database the schema fits.

Every `commit` is one transaction: the events of every execution in the
group, the continue-as-new moves, the projection rows, new definitions and
worker registrations. Statements use only portable constructs (inserts,
updates by key, insert-from-select), so a dialect needs no code of its own.

The store remembers how its last write ended. `write_problem` answers
readiness checks: None while writes work; after a failed commit, the failure,
until a write transaction (`probe_write`, tried at most once a second) or a
later commit succeeds, so a store that recovered (space freed, database back)
reports ready without waiting for traffic a load balancer withholds. A store
that has written nothing for a second also tries a write when asked, so a
database that went away under an idle server is noticed by the readiness
check itself, not by the first request after it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import orjson
from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    case,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateTable

from orbit_core import events as ev
from orbit_core.errors import StorageError
from orbit_core.ports import (
    CommitBatch,
    DefinitionRow,
    ExecutionRow,
    IdempotencyRow,
    PauseMark,
    RateRow,
    WorkerRow,
    pause_marks,
)
from orbit_core.state import TERMINAL
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.page import SearchQuery
from orbit_store import idempotency, rates, search
from orbit_store import schema as s
from orbit_store.batches import BatchTables
from orbit_store.schedules import ScheduleTables

# The column order of the tuples the hot statements are fed.
_EVENT = ("execution_id", "seq", "event_type", "step", "payload", "timestamp_ms")
_ROW = (
    "execution_id",
    "workflow",
    "version",
    "definition_hash",
    "status",
    "created_at_ms",
    "updated_at_ms",
    "last_seq",
)
_UPDATE = ("status", "created_at_ms", "updated_at_ms", "last_seq", "b_id")
# After a failed write, how often a readiness check may try a write of its own.
PROBE_INTERVAL_S = 1.0

T = TypeVar("T")


class _Statement:
    """A statement compiled once for the dialect and run on a DBAPI cursor,
    fed tuples in `columns` order: the hot paths skip SQLAlchemy's per-call
    machinery."""

    __slots__ = ("columns", "named", "order", "sql")

    def __init__(self, dialect: Any, statement: Any, columns: tuple[str, ...]) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        self.columns = columns
        self.named = not compiled.positional
        positions = tuple(compiled.positiontup or ())
        self.order = (
            None
            if self.named or positions == columns
            else tuple(columns.index(p) for p in positions)
        )

    def _params(self, rows: list[tuple[Any, ...]]) -> list[Any]:
        if self.named:
            return [dict(zip(self.columns, r, strict=True)) for r in rows]
        order = self.order
        if order is None:
            return rows
        return [tuple(r[i] for i in order) for r in rows]

    def run(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            cursor.executemany(self.sql, self._params(rows))

    def query(self, cursor: Any, row: tuple[Any, ...]) -> list[Any]:
        cursor.execute(self.sql, self._params([row])[0])
        return list(cursor.fetchall())


class Disconnected(StorageError):
    """The connection to the database was lost (it is reopened on next use)."""


class _Link:
    """One connection of the store and the lock that serialises its use.

    A connection that fails with a disconnect is invalidated (closed for
    good, not returned to the pool); the next use opens a new one and, if
    one had been lost, reports `notice` ("reconnected to ...")."""

    def __init__(self, store: SqlStore, options: dict[str, Any] | None = None) -> None:
        self._store = store
        self._engine = store.engine
        self._options = options or {}
        self.lock = threading.Lock()
        self._conn: Connection | None = None
        self._lost = False

    @property
    def fresh(self) -> bool:
        """No connection is open: the next statement goes to a new one."""
        return self._conn is None or self._conn.closed

    def connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            try:
                conn = self._engine.connect()
                if self._options:
                    conn = conn.execution_options(**self._options)
            except (SQLAlchemyError, self._engine.dialect.loaded_dbapi.Error) as exc:
                message = self._store.describe_connect_error(exc)
                # Unreachable for reads is unreachable for writes: readiness
                # says so even when no write has failed yet.
                self._store.mark_unwritable(message)
                raise StorageError(message) from exc
            self._conn = conn
            if self._lost:
                self._lost = False
                self._store.notice(self._store.reconnected_notice)
        return self._conn

    def raw(self) -> Any:
        raw = self.connection().connection.dbapi_connection
        assert raw is not None
        return raw

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Database errors become StorageError (Disconnected when the
        connection is gone); the connection is reopened on next use."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise self._failed(getattr(exc, "orig", None) or exc) from exc
        except self._engine.dialect.loaded_dbapi.Error as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: BaseException) -> StorageError:
        conn = self._conn
        # SQLAlchemy invalidates a connection it found lost; asking an
        # invalidated one for its DBAPI connection reconnects, and a failed
        # reconnect would escape here as a raw SQLAlchemy error (not a
        # StorageError, so a rollback of the engine gave up and stopped it).
        invalidated = conn is not None and not conn.closed and conn.invalidated
        raw = None
        if conn is not None and not conn.closed and not invalidated:
            with contextlib.suppress(Exception):
                raw = conn.connection.dbapi_connection
        lost = invalidated or (
            isinstance(exc, self._engine.dialect.loaded_dbapi.Error)
            and self._engine.dialect.is_disconnect(exc, raw, None)
        )
        if lost and conn is not None:
            with contextlib.suppress(Exception):
                conn.invalidate()
            self._lost = True
        self._drop()
        message = self._store.describe_error(exc, lost=lost)
        return Disconnected(message) if lost else StorageError(message)

    def close(self) -> None:
        with self.lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


class SqlStore(ScheduleTables, BatchTables):
    """One SQLAlchemy engine. Commits go through one connection (the Engine's
    committer is the only writer) and reads through another, so reads made
    while a group is prepared never wait for the disk.

    A statement that fails because its connection was lost (the database
    restarted, a network cut) is tried once more on a new connection: a
    read always; a write transaction when it failed before its COMMIT was
    sent (the server rolled it back), or when it failed during the COMMIT
    and the database, asked again, does not hold its first row. A database
    still unreachable fails the call with a StorageError."""

    # What `notice` reports when a lost connection has been replaced.
    reconnected_notice = "reconnected to the database"
    # The links (ScheduleTables declares what it needs of the writer).
    _writer: _Link
    _reader: _Link

    def __init__(
        self,
        engine: Engine,
        *,
        separate_reads: bool = True,
        read_options: dict[str, Any] | None = None,
    ) -> None:
        """`separate_reads=False` reads through the write connection (for a
        database that lives in one connection, such as SQLite's `:memory:`);
        `read_options` are SQLAlchemy execution options of the read
        connection (PostgreSQL reads in autocommit)."""
        self.engine = engine
        self.on_notice: Callable[[str], None] | None = None
        self._write_error: str | None = None
        self._probed_at = float("-inf")
        # When a write last succeeded.
        self._wrote_at = time.monotonic()
        self._writer = _Link(self)
        self._reader = _Link(self, read_options) if separate_reads else self._writer
        # Retention's reads (`orbit server --retention`) have a connection of
        # their own, so a sweep never queues the engine's reads behind it.
        self._sweep_reader = _Link(self, read_options) if separate_reads else self._writer
        # Set while the sweeper's own writes run (on its thread).
        self._sweeping = _Sweeping()
        # The longest an engine write waited for the write connection since
        # the sweeper last asked (`writes_waited_s`).
        self._write_waited = 0.0
        with self._writer.errors():
            conn = self._writer.connection()
            try:
                with conn.begin():
                    self.found_version = s.prepare(conn)
                    # Whether the search part exists (orbit_store.search),
                    # brought to its current version if an older one is there.
                    self._indexed = search.prepare(conn)
                    # The search fields' ids, read by the first commit that
                    # writes a value (`_name_fields`).
                    self._field_ids: search.FieldIds = {}
                    # Whether the idempotency part exists (orbit_store.idempotency).
                    self._keyed = idempotency.exists(conn)
                    # Whether the start-rate part exists (orbit_store.rates).
                    self._rated = rates.exists(conn)
            finally:
                self._writer.close()
        dialect = engine.dialect
        e, r, w, x = (
            s.execution_events,
            s.execution_run_events,
            s.worker_registry,
            s.workflow_executions,
        )

        def values(table: Any, columns: tuple[str, ...]) -> Any:
            return insert(table).values({c: bindparam(c) for c in columns})

        self._insert_event = _Statement(dialect, values(e, _EVENT), _EVENT)
        self._insert_row = _Statement(dialect, values(x, _ROW), _ROW)
        self._update_row = _Statement(
            dialect,
            update(x)
            .where(x.c.execution_id == bindparam("b_id"))
            .values({c: bindparam(c) for c in _UPDATE[:-1]}),
            _UPDATE,
        )
        self._archive_run = _Statement(
            dialect,
            insert(r).from_select(
                [_EVENT[0], "run", *_EVENT[1:]],
                select(
                    e.c.execution_id,
                    bindparam("run", type_=r.c.run.type),
                    *[e.c[c] for c in _EVENT[1:]],
                ).where(e.c.execution_id == bindparam("eid")),
            ),
            ("run", "eid"),
        )
        self._delete_run = _Statement(
            dialect, e.delete().where(e.c.execution_id == bindparam("eid")), ("eid",)
        )
        definition = ("name", "version", "definition_hash", "ir", "created_at_ms")
        self._insert_definition = _Statement(
            dialect, values(s.workflow_definitions, definition), definition
        )
        worker = ("worker_id", "runtime", "sdk", "contracts", "registered_at_ms", "last_seen_ms")
        self._insert_worker = _Statement(dialect, values(w, worker), worker)
        self._delete_worker = _Statement(
            dialect, w.delete().where(w.c.worker_id == bindparam("wid")), ("wid",)
        )
        archived = (
            select(func.max(r.c.run)).where(r.c.execution_id == x.c.execution_id).scalar_subquery()
        )
        self._select_row = _Statement(
            dialect,
            select(*[x.c[c] for c in _ROW], archived).where(x.c.execution_id == bindparam("eid")),
            ("eid",),
        )
        self._select_hash = _Statement(
            dialect,
            select(x.c.definition_hash).where(x.c.execution_id == bindparam("eid")),
            ("eid",),
        )
        self._touch = _Statement(
            dialect,
            update(s.schema_version).values(version=s.schema_version.c.version),
            (),
        )
        self._find_event = _Statement(
            dialect,
            select(e.c.seq).where(
                e.c.execution_id == bindparam("eid"), e.c.seq == bindparam("seq")
            ),
            ("eid", "seq"),
        )
        d = s.workflow_definitions
        self._find_definition = _Statement(
            dialect,
            select(d.c.name).where(
                d.c.name == bindparam("n"),
                d.c.version == bindparam("v"),
                d.c.definition_hash == bindparam("h"),
            ),
            ("n", "v", "h"),
        )
        self._delete_definition = _Statement(
            dialect,
            d.delete().where(d.c.name == bindparam("n"), d.c.version == bindparam("v")),
            ("n", "v"),
        )
        self._select_events = _Statement(
            dialect,
            select(e.c.payload).where(e.c.execution_id == bindparam("eid")).order_by(e.c.seq),
            ("eid",),
        )
        self._select_run = _Statement(
            dialect,
            select(r.c.payload)
            .where(r.c.execution_id == bindparam("eid"), r.c.run == bindparam("run"))
            .order_by(r.c.seq),
            ("eid", "run"),
        )
        self._select_status = _Statement(
            dialect, select(x.c.status).where(x.c.execution_id == bindparam("eid")), ("eid",)
        )
        self._delete_runs = _Statement(
            dialect, r.delete().where(r.c.execution_id == bindparam("eid")), ("eid",)
        )
        self._delete_execution = _Statement(
            dialect, x.delete().where(x.c.execution_id == bindparam("eid")), ("eid",)
        )
        self._upsert_search = _Statement(dialect, search.upsert_sql(dialect), search._COLUMNS)
        self._delete_search = _Statement(dialect, search.delete_sql(), ("eid",))
        self._upsert_key = _Statement(dialect, idempotency.upsert_sql(dialect), idempotency.COLUMNS)
        self._sweep_keys = _Statement(dialect, idempotency.sweep_sql(), ("now",))
        self._find_key = _Statement(dialect, idempotency.find_sql(), ("k", "now"))
        self._swept_at = 0
        self._upsert_rate = _Statement(dialect, rates.upsert_sql(dialect), rates.COLUMNS)
        self._sweep_rates = _Statement(dialect, rates.sweep_sql(), ("now_us",))
        self._rates_swept_at = 0
        o = s.orbit_retention
        self._delete_retention = _Statement(
            dialect, o.delete().where(o.c.execution_id == bindparam("eid")), ("eid",)
        )
        self._insert_retention = _Statement(
            dialect, values(o, ("execution_id", "retention_ms")), ("execution_id", "retention_ms")
        )

    def notice(self, message: str) -> None:
        """Reports something worth a log line (the store itself never logs)."""
        if self.on_notice is not None:
            self.on_notice(message)

    def describe_error(self, exc: BaseException, *, lost: bool = False) -> str:
        """The message of a StorageError for a database error (`lost`: one
        that cost the connection)."""
        return " ".join(str(exc).split())

    def describe_connect_error(self, exc: BaseException) -> str:
        """The message of a StorageError for a failed connection attempt."""
        return f"cannot connect to the database: {self.describe_error(getattr(exc, 'orig', None) or exc)}"

    def _read(self, fn: Callable[[Connection], T], link: _Link | None = None) -> T:
        """`fn` on the read connection (or `link`), tried again once if that
        was lost."""
        link = link or self._reader

        def attempt() -> T:
            with link.lock, link.errors():
                conn = link.connection()
                try:
                    return fn(conn)
                finally:
                    if not conn.closed:
                        conn.rollback()

        return _again_if_lost(link, attempt)

    def _raw_read(self, fn: Callable[[Any], T]) -> T:
        """`fn` on a DBAPI cursor of the read connection, for the frequent
        reads; tried again once if the connection was lost."""

        def attempt() -> T:
            with self._reader.lock, self._reader.errors():
                raw = self._reader.raw()
                cursor = raw.cursor()
                try:
                    return fn(cursor)
                finally:
                    with contextlib.suppress(Exception):
                        cursor.close()
                        raw.rollback()

        return _again_if_lost(self._reader, attempt)

    # ---- the port

    def load_definitions(self) -> list[DefinitionRow]:
        t = s.workflow_definitions
        rows = self._read(lambda conn: conn.execute(select(t).order_by(t.c.created_at_ms)).all())
        return [
            DefinitionRow(r.name, r.version, r.definition_hash, orjson.loads(r.ir), r.created_at_ms)
            for r in rows
        ]

    def load_active(self) -> list[tuple[str, list[ev.Event]]]:
        x, e = s.workflow_executions, s.execution_events

        def read(conn: Connection) -> dict[str, list[ev.Event]]:
            ids = [
                r.execution_id
                for r in conn.execute(
                    select(x.c.execution_id).where(x.c.status.not_in(sorted(TERMINAL)))
                )
            ]
            out: dict[str, list[ev.Event]] = {eid: [] for eid in ids}
            if ids:
                query = (
                    select(e.c.execution_id, e.c.payload)
                    .where(e.c.execution_id.in_(bindparam("ids", expanding=True)))
                    .order_by(e.c.execution_id, e.c.seq)
                )
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    for row in conn.execute(query, {"ids": chunk}):
                        out[row.execution_id].append(ev.loads(row.payload))
            return out

        return list(self._read(read).items())

    def commit(self, batch: CommitBatch) -> None:
        """One DBAPI transaction on the write connection."""
        try:
            self._commit(batch)
        except StorageError as exc:
            self._write_error = exc.message
            raise
        self._write_error = None
        self._wrote_at = time.monotonic()

    def probe_write(self) -> None:
        """A write transaction that changes nothing: raises a StorageError
        if the database cannot be written."""
        try:
            self._write(lambda cursor: cursor.execute(self._touch.sql), None)
        except StorageError as exc:
            self._write_error = exc.message
            raise
        self._write_error = None
        self._wrote_at = time.monotonic()

    def mark_unwritable(self, message: str) -> None:
        """Records that writes cannot succeed now (until one does)."""
        self._write_error = message

    def write_problem(self) -> str | None:
        """Why the store cannot write now, or None."""
        now = time.monotonic()
        if self._write_error is None and now - self._wrote_at < PROBE_INTERVAL_S:
            return None
        if now - self._probed_at >= PROBE_INTERVAL_S:
            self._probed_at = now
            with contextlib.suppress(StorageError):
                self.probe_write()
        return self._write_error

    def _commit(self, batch: CommitBatch) -> None:
        events: list[tuple[Any, ...]] = []
        new_rows: list[tuple[Any, ...]] = []
        updates: list[tuple[Any, ...]] = []
        # Continue-as-new moves a run's events, so what precedes it is written first.
        moves: list[tuple[list[tuple[Any, ...]], str, int, list[tuple[Any, ...]]]] = []
        # None: a field of the group has no id yet (given in the transaction).
        found = self._search_rows(batch, self._field_ids)
        named: list[search.FieldIds] = []
        keys = [idempotency.row(c.idempotency) for c in batch.executions if c.idempotency]
        buckets = batch.rates
        for change in batch.executions:
            eid = change.execution_id
            if change.archive_run is not None:
                archived = [_event_row(eid, x) for x in change.archived]
                moves.append((events, eid, change.archive_run, archived))
                events = []
            events.extend([_event_row(eid, x) for x in change.events])
            row = change.row
            if change.new:
                new_rows.append(
                    (
                        eid,
                        row.workflow,
                        row.version,
                        row.definition_hash,
                        row.status,
                        row.created_at_ms,
                        row.updated_at_ms,
                        row.last_seq,
                    )
                )
            else:
                updates.append(
                    (row.status, row.created_at_ms, row.updated_at_ms, row.last_seq, eid)
                )
        definitions = [
            (d.name, d.version, d.definition_hash, orjson.dumps(d.ir).decode(), d.created_at_ms)
            for d in batch.definitions
        ]

        # A development server's replacement takes the old row's place, one
        # at a time: a group may replace the same version twice.
        replacing = [d.replaces for d in batch.definitions]

        def statements(cursor: Any) -> None:
            if any(replacing):
                for row, replaces in zip(definitions, replacing, strict=True):
                    if replaces:
                        self._delete_definition.run(cursor, [row[:2]])
                    self._insert_definition.run(cursor, [row])
            else:
                self._insert_definition.run(cursor, definitions)
            for before, eid, run, archived in moves:
                self.insert_events(cursor, before)
                self.insert_events(cursor, archived)
                self._archive_run.run(cursor, [(run, eid)])
                self._delete_run.run(cursor, [(eid,)])
            self.insert_rows(cursor, new_rows)
            self.insert_events(cursor, events)
            self.update_rows(cursor, updates)
            self._write_search(cursor, batch, found, named)
            self._write_keys(cursor, keys)
            self._write_rates(cursor, batch)
            for w in batch.workers:
                self._delete_worker.run(cursor, [(w.worker_id,)])
                self._insert_worker.run(
                    cursor,
                    [
                        (
                            w.worker_id,
                            w.runtime,
                            w.sdk,
                            orjson.dumps(w.contracts).decode(),
                            w.registered_at_ms,
                            w.last_seen_ms,
                        )
                    ],
                )

        # A row the transaction writes and nothing later moves: whether it
        # is there tells whether a COMMIT cut off by a disconnect happened.
        # A batch with neither events nor definitions is idempotent.
        marker: tuple[_Statement, tuple[Any, ...]] | None = None
        if events:
            marker = (self._find_event, (events[-1][0], events[-1][1]))
        elif definitions:
            marker = (self._find_definition, definitions[0][:3])
        # Search rows join the one statement once their table exists (the
        # first commit that has some creates it, in a transaction).
        if not (
            moves
            or definitions
            or batch.workers
            or keys
            or buckets
            or found is None
            or (found and not self._indexed)
        ):
            alone = self.one_statement(events, new_rows, updates, found)
            if alone is not None:
                self._write(alone, marker, alone=True)
                return
        self._write(statements, marker)
        if named:
            # Known once the transaction that gave them is committed.
            self._field_ids = named[0]
        self._indexed = self._indexed or bool(found) or bool(named)
        self._keyed = self._keyed or bool(keys)
        self._rated = self._rated or bool(buckets)

    # What a search row's missing value is bound as (None: NULL; SQLite's
    # differ, see `search.SQLITE_UPSERT`).
    NO_TEXT: Any = None
    NO_NUMBER: Any = None

    def _search_rows(
        self, batch: CommitBatch, ids: search.FieldIds
    ) -> list[tuple[Any, ...]] | None:
        """The search-index rows of a group (orbit_store.search), in the
        group's order: a later value of a field replaces an earlier one, as
        `executemany` runs the upsert row by row (a dialect that upserts
        them in one statement keeps one per key: `search.latest`). None when
        a field has no id in `ids` yet."""
        found: list[tuple[Any, ...]] = []
        add = found.append
        no_text, no_number = self.NO_TEXT, self.NO_NUMBER
        for change in batch.executions:
            values = change.search
            if values:
                eid = change.execution_id
                fields = ids.get(change.row.workflow)
                if fields is None:
                    return None
                for field, text, number in values:
                    field_id = fields.get(field)
                    if field_id is None:
                        return None
                    add(
                        (
                            eid,
                            field_id,
                            no_text if text is None else text,
                            no_number if number is None else number,
                        )
                    )
        return found

    def _name_fields(self, cursor: Any, batch: CommitBatch) -> search.FieldIds:
        """Gives the group's fields that have none an id, creating the part
        first if need be; every field's id (`search.name_fields`)."""
        if not self._indexed:
            for statement in search.create_statements(self.engine.dialect):
                cursor.execute(statement)
        names = {(c.row.workflow, v.field) for c in batch.executions for v in c.search}
        return search.name_fields(cursor, self.engine.dialect.paramstyle, names)

    def _write_search(
        self,
        cursor: Any,
        batch: CommitBatch,
        found: list[tuple[Any, ...]] | None,
        named: list[search.FieldIds],
    ) -> None:
        """Upserts the group's search rows (`found`; None: a field has no id
        yet, so the fields are named first and the rows made with the ids,
        which `named` receives)."""
        if found is None:
            named[:] = [self._name_fields(cursor, batch)]
            found = self._search_rows(batch, named[0])
            if found is None:  # every field was just named: not to be dropped
                raise StorageError("a search field has no id after it was named")
        if found:
            self.upsert_search(cursor, found)

    def upsert_search(self, cursor: Any, found: list[tuple[Any, ...]]) -> None:
        """Upserts search rows (`_search_rows`) into a table that exists."""
        self._upsert_search.run(cursor, found)

    def _write_keys(self, cursor: Any, keys: list[tuple[Any, ...]]) -> None:
        """Upserts the group's idempotency keys, creating the part on first
        use and sweeping expired keys now and then."""
        if not keys:
            return
        if not self._keyed:
            for statement in idempotency.create_statements(self.engine.dialect):
                cursor.execute(statement)
        now = int(keys[0][4])
        if now - self._swept_at >= idempotency.SWEEP_EVERY_MS:
            self._swept_at = now
            self._sweep_keys.run(cursor, [(now,)])
        self._upsert_key.run(cursor, keys)

    def _write_rates(self, cursor: Any, batch: CommitBatch) -> None:
        """Upserts the group's start-rate buckets, creating the part on
        first use and deleting full ones (their time has passed) now and then."""
        if not batch.rates:
            return
        if not self._rated:
            for statement in rates.create_statements(self.engine.dialect):
                cursor.execute(statement)
        now_ms = batch.rates[0].at_ms
        if now_ms - self._rates_swept_at >= rates.SWEEP_EVERY_MS:
            self._rates_swept_at = now_ms
            self._sweep_rates.run(cursor, [(now_ms * 1000,)])
        self._upsert_rate.run(cursor, [rates.row(r) for r in batch.rates])

    def load_rates(self) -> list[RateRow]:
        """Every start-rate bucket stored (orbit_core/engine/start_gates.py)."""
        if not self._rated:
            self._rated = self._read(rates.exists)
            if not self._rated:
                return []
        return self._read(lambda conn: [rates.from_row(r) for r in conn.execute(rates.load_sql())])

    def find_idempotency(self, key: str, now_ms: int) -> IdempotencyRow | None:
        """The unexpired row of an idempotency key (engine/idempotency.py)."""
        if not self._keyed:
            self._keyed = self._read(idempotency.exists)
            if not self._keyed:
                return None
        rows = self._raw_read(lambda cursor: self._find_key.query(cursor, (key, now_ms)))
        return idempotency.from_row(rows[0]) if rows else None

    def one_statement(
        self,
        events: list[tuple[Any, ...]],
        new_rows: list[tuple[Any, ...]],
        updates: list[tuple[Any, ...]],
        search_rows: list[tuple[Any, ...]],
    ) -> Callable[[Any], None] | None:
        """A dialect that can write a group of appends and projection rows
        (the usual group) and its search rows (`search._COLUMNS`, into a
        table that exists) as one statement returns what runs it on a cursor
        of a connection in autocommit mode: the statement is the whole
        transaction. None: the group goes the general way."""
        return None

    def _write(
        self,
        statements: Callable[[Any], None],
        marker: tuple[_Statement, tuple[Any, ...]] | None,
        *,
        alone: bool = False,
        link: _Link | None = None,
        durable: bool = True,
    ) -> None:
        """`statements` and a COMMIT as one transaction on the write
        connection, or on `link` (`alone`: one statement run in autocommit
        mode, which is its own transaction; `durable=False`: a COMMIT that
        need not survive a crash, see `lax_commit`); see the class docstring
        for when it is tried again."""
        committing = False
        writer = self._writer if link is None else link
        sweeping = self._sweeping.on

        def attempt() -> None:
            nonlocal committing
            committing = alone
            asked = time.monotonic()
            with writer.lock, writer.errors():
                if not sweeping:
                    # How long the engine's writes queue behind another
                    # (the sweeper paces itself by it).
                    self._write_waited = max(self._write_waited, time.monotonic() - asked)
                raw = writer.raw()
                cursor = raw.cursor()
                try:
                    if alone:
                        raw.rollback()  # nothing open (then free); autocommit needs that
                        raw.autocommit = True
                        try:
                            statements(cursor)
                        finally:
                            with contextlib.suppress(Exception):
                                raw.autocommit = False
                        return
                    lax = contextlib.nullcontext() if durable else self.lax_commit(raw)
                    with lax, self.transaction_scope(raw):
                        statements(cursor)
                        committing = True
                        raw.commit()
                except BaseException:
                    with contextlib.suppress(Exception):
                        raw.rollback()
                    raise
                finally:
                    with contextlib.suppress(Exception):
                        cursor.close()

        was_fresh = writer.fresh
        try:
            attempt()
            return
        except Disconnected:
            if not committing and was_fresh:
                raise
            if committing and marker is not None and self._found(*marker):
                return  # the COMMIT went through before the connection broke
        attempt()

    def lax_commit(self, raw: Any) -> contextlib.AbstractContextManager[Any]:
        """What a transaction that need not be durable runs in (the
        sweeper's: a delete a crash undoes leaves executions that are
        already archived, and the next sweep archives them again), so its
        COMMIT need not wait for the disk; the dialects say how."""
        return contextlib.nullcontext()

    def transaction_scope(self, raw: Any) -> contextlib.AbstractContextManager[Any]:
        """What a write transaction runs in, on the DBAPI connection `raw`
        (PostgreSQL: pipeline mode)."""
        return contextlib.nullcontext()

    # The bulk writes of a group, inside its open transaction; a dialect
    # with faster bulk paths overrides them.

    def insert_events(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        """Appends history rows (`_EVENT` order)."""
        self._insert_event.run(cursor, rows)

    def insert_rows(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        """Adds projection rows of new executions (`_ROW` order)."""
        self._insert_row.run(cursor, rows)

    def update_rows(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        """Updates projection rows (`_UPDATE` order: the id last); when an
        execution appears twice, the later row wins."""
        self._update_row.run(cursor, rows)

    def _found(self, statement: _Statement, key: tuple[Any, ...]) -> bool:
        """Whether the row `statement` selects by `key` exists (asked on a
        new write connection)."""
        with self._writer.lock, self._writer.errors():
            raw = self._writer.raw()
            cursor = raw.cursor()
            try:
                return bool(statement.query(cursor, key))
            finally:
                with contextlib.suppress(Exception):
                    cursor.close()
                    raw.rollback()

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        def read(cursor: Any) -> list[Any] | None:
            if run is None:
                # The current run always holds at least its first event (a
                # continue-as-new moves the old run's events in the same
                # transaction that writes the new run's), so one query
                # answers; none found means no such execution.
                events = self._select_events.query(cursor, (execution_id,))
                if events or self._row(cursor, execution_id) is None:
                    return events or None
                return events
            current = self._row(cursor, execution_id)
            if current is None:
                return None
            if run == current.run:
                return self._select_events.query(cursor, (execution_id,))
            return self._select_run.query(cursor, (execution_id, run)) or None

        rows = self._raw_read(read)
        return None if rows is None else [ev.loads(row[0]) for row in rows]

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        return self._raw_read(lambda cursor: self._row(cursor, execution_id))

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        """The definition hash of each of `execution_ids` that is stored, in
        one read (the engine's check of a group's starts). A primary-key
        lookup per id on one cursor: in-process SQLite answers each in
        microseconds, less than SQLAlchemy takes to expand an `IN` list."""

        def read(cursor: Any) -> dict[str, str]:
            out: dict[str, str] = {}
            for eid in execution_ids:
                rows = self._select_hash.query(cursor, (eid,))
                if rows:
                    out[eid] = rows[0][0]
            return out

        return self._raw_read(read)

    def _row(self, cursor: Any, execution_id: str) -> ExecutionRow | None:
        rows = self._select_row.query(cursor, (execution_id,))
        if not rows:
            return None
        eid, workflow, version, definition_hash, status, created, updated, last, runs = rows[0]
        return ExecutionRow(
            eid, workflow, version, definition_hash, status, created, updated, last, (runs or 0) + 1
        )

    def list_executions(
        self, status: str | None, workflow: str | None, limit: int
    ) -> list[ExecutionRow]:
        x = s.workflow_executions
        query = select(x)
        if status is not None:
            query = query.where(x.c.status == status)
        if workflow is not None:
            query = query.where(x.c.workflow == workflow)
        query = query.order_by(x.c.created_at_ms.desc(), x.c.execution_id.desc()).limit(limit)
        return self._read(lambda conn: [_execution_row(row, 1) for row in conn.execute(query)])

    def search_executions(self, query: SearchQuery) -> list[ExecutionRow]:
        def read(conn: Connection) -> list[ExecutionRow]:
            if not self._indexed:
                # Another server sharing the database may have created it.
                self._indexed = search.exists(conn)
            statement = search.select_page(query, self._indexed)
            return [_execution_row(row, 1) for row in conn.execute(statement)]

        return self._read(read)

    def pauses(self, execution_ids: list[str]) -> dict[str, PauseMark]:
        if not execution_ids:
            return {}
        e = s.execution_events
        query = (
            select(e.c.execution_id, e.c.payload)
            .where(
                e.c.execution_id.in_(execution_ids),
                e.c.event_type.in_(("WorkflowPaused", "WorkflowResumed")),
            )
            .order_by(e.c.execution_id, e.c.seq)
        )

        def read(conn: Connection) -> dict[str, PauseMark]:
            rows = conn.execute(query).all()
            return pause_marks((str(row[0]), ev.loads(row[1])) for row in rows)

        return self._read(read)

    def list_workers(self) -> list[WorkerRow]:
        t = s.worker_registry
        rows = self._read(lambda conn: conn.execute(select(t).order_by(t.c.worker_id)).all())
        return [
            WorkerRow(
                r.worker_id,
                r.runtime,
                r.sdk,
                orjson.loads(r.contracts),
                r.registered_at_ms,
                r.last_seen_ms,
            )
            for r in rows
        ]

    # ---- retention (orbit_core.ports.RetentionStore)

    def prepare_retention(self) -> None:
        ddl = CreateTable(s.orbit_retention, if_not_exists=True).compile(
            dialect=self.engine.dialect
        )

        # Candidates are found by their end: without this index every batch
        # would read every finished execution. Only a server with retention
        # creates it (and pays for it on each projection update).
        def statements(cursor: Any) -> None:
            if self.engine.dialect.name == "postgresql":
                # Servers of a cluster start together: one at a time, as
                # for the schema (two CREATE INDEX IF NOT EXISTS can clash).
                cursor.execute(f"SELECT pg_advisory_xact_lock({int(s.SCHEMA_LOCK_KEY)})")
            cursor.execute(str(ddl))
            cursor.execute(s.RETENTION_INDEX)

        self._write(statements, None)

    def set_retention(self, execution_id: str, retention_ms: int) -> None:
        def statements(cursor: Any) -> None:
            self._delete_retention.run(cursor, [(execution_id,)])
            self._insert_retention.run(cursor, [(execution_id, retention_ms)])

        self._write(statements, None)

    def retention_candidates(
        self,
        now_ms: int,
        retention_ms: int,
        limit: int,
        after: tuple[int, str] | None = None,
        by_definition: Mapping[str, int] | None = None,
    ) -> list[ExecutionRow]:
        x, e, sch, o = (
            s.workflow_executions,
            s.execution_events,
            s.orbit_schedules,
            s.orbit_retention,
        )
        own = select(o.c.retention_ms).where(o.c.execution_id == x.c.execution_id)
        # A workflow's `retention` (few definitions declare one): a CASE on
        # the definition hash, between the execution's own and the server's.
        declared = dict(sorted((by_definition or {}).items()))
        default: Any = (
            case(declared, value=x.c.definition_hash, else_=retention_ms)
            if declared
            else retention_ms
        )
        kept = func.coalesce(own.scalar_subquery(), default)
        # A bound the index answers (nothing that ended after it is
        # eligible): now less the shortest retention in force.
        # The status is wrapped so that no planner walks the status index
        # instead (almost every row is finished) and sorts what it found.
        query = select(x).where(
            x.c.updated_at_ms < bindparam("bound", type_=x.c.updated_at_ms.type),
            func.coalesce(x.c.status, "").in_(sorted(TERMINAL)),
            x.c.updated_at_ms + kept < now_ms,
            x.c.execution_id.not_in(
                select(sch.c.last_execution_id).where(sch.c.last_execution_id.is_not(None))
            ),
        )
        if after is not None:
            # A row value, which both planners answer from the index,
            # starting at the cursor. Spelled as an OR of the two cases,
            # SQLite read every eligible row after the cursor and sorted
            # them for each batch: a sweep cost grew with the square of
            # what was eligible (a million swept at under 100 a second).
            query = query.where(
                tuple_(x.c.updated_at_ms, x.c.execution_id)
                > tuple_(
                    bindparam("after_ms", after[0], type_=x.c.updated_at_ms.type),
                    bindparam("after_id", after[1], type_=x.c.execution_id.type),
                )
            )
        query = query.order_by(x.c.updated_at_ms, x.c.execution_id).limit(limit)
        # The first event of each candidate's current run (its
        # WorkflowCreated, which names a parent), and the parents' statuses:
        # one read each for the whole batch, not two per candidate.
        earliest = e.alias("earliest")
        first = select(e.c.execution_id, e.c.payload).where(
            e.c.execution_id.in_(bindparam("ids", expanding=True)),
            e.c.seq
            == select(func.min(earliest.c.seq))
            .where(earliest.c.execution_id == e.c.execution_id)
            .scalar_subquery(),
        )
        statuses = select(x.c.execution_id, x.c.status).where(
            x.c.execution_id.in_(bindparam("ids", expanding=True))
        )

        shortest_own = select(func.min(o.c.retention_ms))

        postgres = self.engine.dialect.name == "postgresql"

        def read(conn: Connection) -> list[ExecutionRow]:
            if not postgres:
                return candidates(conn)
            # PostgreSQL guesses that few rows pass the filters (an
            # expression's default selectivity), so it read the whole table
            # and sorted it to take a batch: each batch cost grew with the
            # table. Without sorts it walks the index from the cursor, which
            # finds a batch after about as many rows. (The sweep's reads are
            # in autocommit mode, so the setting is the session's, and put
            # back at once.)
            conn.exec_driver_sql("SET enable_sort = off")
            try:
                return candidates(conn)
            finally:
                conn.exec_driver_sql("RESET enable_sort")

        def candidates(conn: Connection) -> list[ExecutionRow]:
            shortest = conn.execute(shortest_own).scalar()
            least = min([retention_ms, *declared.values()])
            bound = now_ms - min(least, least if shortest is None else shortest)
            rows = conn.execute(query, {"bound": bound}).all()
            if not rows:
                return []
            ids = [r.execution_id for r in rows]
            parents: dict[str, str] = {}
            for row in conn.execute(first, {"ids": ids}):
                parent = _parent_of(cast(str | None, row[1]))
                if parent is not None:
                    parents[cast(str, row[0])] = parent
            open_parents: set[str] = set()
            if parents:
                wanted = sorted(set(parents.values()))
                open_parents = {
                    cast(str, row[0])
                    for row in conn.execute(statuses, {"ids": wanted})
                    if row[1] not in TERMINAL
                }
            # A parent that has not finished may still read its child.
            return [
                _execution_row(r, 1)
                for r in rows
                if parents.get(r.execution_id) not in open_parents
            ]

        return self._read(read, self._sweep_reader)

    def retention_histories(
        self, execution_ids: Sequence[str]
    ) -> list[tuple[ExecutionRow, list[list[ev.Event]]]]:
        x, e, r = s.workflow_executions, s.execution_events, s.execution_run_events
        rows = select(x).where(x.c.execution_id.in_(bindparam("ids", expanding=True)))
        current = (
            select(e.c.execution_id, e.c.payload)
            .where(e.c.execution_id.in_(bindparam("ids", expanding=True)))
            .order_by(e.c.execution_id, e.c.seq)
        )
        earlier = (
            select(r.c.execution_id, r.c.run, r.c.payload)
            .where(r.c.execution_id.in_(bindparam("ids", expanding=True)))
            .order_by(r.c.execution_id, r.c.run, r.c.seq)
        )
        ids = list(execution_ids)

        def read(conn: Connection) -> list[tuple[ExecutionRow, list[list[ev.Event]]]]:
            found = {row.execution_id: row for row in conn.execute(rows, {"ids": ids})}
            runs: dict[str, dict[int, list[ev.Event]]] = {eid: {} for eid in found}
            for old in conn.execute(earlier, {"ids": ids}):
                runs[old.execution_id].setdefault(old.run, []).append(ev.loads(old.payload))
            last: dict[str, list[ev.Event]] = {eid: [] for eid in found}
            for now in conn.execute(current, {"ids": ids}):
                last[now.execution_id].append(ev.loads(now.payload))
            out = []
            for eid in ids:
                if eid not in found:
                    continue
                history = [runs[eid][n] for n in sorted(runs[eid])] + [last[eid]]
                out.append((_execution_row(found[eid], len(history)), history))
            return out

        return self._read(read, self._sweep_reader)

    def retention_search_values(self, execution_ids: Sequence[str]) -> dict[str, list[SearchValue]]:
        t, f = s.orbit_search_values, s.orbit_search_fields
        query = (
            select(t.c.execution_id, f.c.field, t.c.str_value, t.c.num_value)
            .join(f, f.c.field_id == t.c.field_id)
            .where(t.c.execution_id.in_(bindparam("ids", expanding=True)))
            .order_by(t.c.execution_id, f.c.field)
        )
        ids = list(execution_ids)

        def read(conn: Connection) -> dict[str, list[SearchValue]]:
            if not self._indexed:
                self._indexed = search.exists(conn)
                if not self._indexed:
                    return {}
            out: dict[str, list[SearchValue]] = {}
            for row in conn.execute(query, {"ids": ids}):
                value = SearchValue(row.field, row.str_value, row.num_value)
                out.setdefault(row.execution_id, []).append(value)
            return out

        if not ids:
            return {}
        return self._read(read, self._sweep_reader)

    def delete_executions(self, execution_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(execution_ids))
        if not ids:
            return 0
        deleted = 0

        def statements(cursor: Any) -> None:
            nonlocal deleted
            finished = [
                (eid,)
                for eid in ids
                if (rows := self._select_status.query(cursor, (eid,))) and rows[0][0] in TERMINAL
            ]
            self._delete_run.run(cursor, finished)
            self._delete_runs.run(cursor, finished)
            self._delete_execution.run(cursor, finished)
            self._delete_retention.run(cursor, finished)
            if self._indexed:
                self._delete_search.run(cursor, finished)
            deleted = len(finished)

        self.sweeper_write(statements)
        self._wrote_at = time.monotonic()
        return deleted

    def sweep_link(self) -> _Link:
        """The connection the sweeper's deletes are written on: the write
        connection (SQLite has one writer; a dialect with row locks gives
        the sweeper a connection of its own)."""
        return self._writer

    def sweeper_write(self, statements: Callable[[Any], None]) -> None:
        """One short transaction of the retention sweeper, on `sweep_link`;
        its wait for the connection is not an engine write's."""
        self._sweeping.on = True
        try:
            self._write(statements, None, link=self.sweep_link(), durable=False)
        finally:
            self._sweeping.on = False

    def writes_waited_s(self) -> float:
        """The longest any engine write waited for the write connection
        since the last call (the sweeper backs off when it grows)."""
        waited, self._write_waited = self._write_waited, 0.0
        return waited

    def close(self) -> None:
        self._writer.close()
        if self._reader is not self._writer:
            self._reader.close()
        if self._sweep_reader is not self._writer:
            self._sweep_reader.close()
        if (link := self.sweep_link()) is not self._writer:
            link.close()
        self.engine.dispose()


class _Sweeping(threading.local):
    """Whether the current thread is in one of the sweeper's writes."""

    on = False


def _again_if_lost(link: _Link, attempt: Callable[[], T]) -> T:
    """Runs `attempt`, and once more if a connection that was open before
    it turned out to be lost (a new one is opened for the second try)."""
    was_fresh = link.fresh
    try:
        return attempt()
    except Disconnected:
        if was_fresh:
            raise
    return attempt()


def _parent_of(payload: str | None) -> str | None:
    """The parent execution named by a run's first event (WorkflowCreated)."""
    if payload is None:
        return None
    created = ev.loads(payload)
    parent = getattr(created, "parent", None)
    return None if parent is None else parent["execution_id"]


def _event_row(execution_id: str, event: ev.Event) -> tuple[Any, ...]:
    # (`ev.dumps` in line: three of these are built per task step.)
    return (
        execution_id,
        event.seq,
        event.TYPE,
        getattr(event, "step", None),
        orjson.dumps(ev.to_json(event)).decode(),
        event.timestamp_ms,
    )


def _execution_row(row: Any, run: int) -> ExecutionRow:
    return ExecutionRow(
        row.execution_id,
        row.workflow,
        row.version,
        row.definition_hash,
        row.status,
        row.created_at_ms,
        row.updated_at_ms,
        row.last_seq,
        run,
    )
