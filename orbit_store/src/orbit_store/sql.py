"""The store port on SQLAlchemy Core, for any SQL database the schema fits.

Every `commit` is one transaction: the events of every execution in the
group, the continue-as-new moves, the projection rows, new definitions and
worker registrations. Statements use only portable constructs (inserts,
updates by key, insert-from-select), so a dialect needs no code of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, bindparam, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from orbit_core import events as ev
from orbit_core.errors import StorageError
from orbit_core.ports import CommitBatch, DefinitionRow, ExecutionRow, WorkerRow
from orbit_core.state import TERMINAL
from orbit_store import schema as s

_Compiled = tuple[str, tuple[str, ...] | None]


class SqlStore:
    """One SQLAlchemy engine, used by one writer (the Engine's group leader)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        with self._errors():
            s.metadata.create_all(engine, checkfirst=True)
            with engine.begin() as conn:
                if conn.execute(select(func.count()).select_from(s.schema_version)).scalar() == 0:
                    conn.execute(insert(s.schema_version).values(version=s.SCHEMA_VERSION))
        e, r, w = s.execution_events, s.execution_run_events, s.worker_registry
        columns = ["execution_id", "run", "seq", "event_type", "step", "payload", "timestamp_ms"]
        self._insert_event = self._compile(insert(e))
        self._insert_row = self._compile(insert(s.workflow_executions))
        self._update_row = self._compile(
            update(s.workflow_executions)
            .where(s.workflow_executions.c.execution_id == bindparam("b_id"))
            .values(
                status=bindparam("status"),
                updated_at_ms=bindparam("updated_at_ms"),
                last_seq=bindparam("last_seq"),
                created_at_ms=bindparam("created_at_ms"),
            )
        )
        self._archive_run = self._compile(
            insert(r).from_select(
                columns,
                select(
                    e.c.execution_id,
                    bindparam("run", type_=r.c.run.type),
                    e.c.seq,
                    e.c.event_type,
                    e.c.step,
                    e.c.payload,
                    e.c.timestamp_ms,
                ).where(e.c.execution_id == bindparam("eid")),
            )
        )
        self._delete_run = self._compile(e.delete().where(e.c.execution_id == bindparam("eid")))
        self._insert_definition = self._compile(insert(s.workflow_definitions))
        self._insert_worker = self._compile(insert(w))
        self._delete_worker = self._compile(w.delete().where(w.c.worker_id == bindparam("wid")))

        x, r = s.workflow_executions, s.execution_run_events
        archived = (
            select(func.max(r.c.run))
            .where(r.c.execution_id == x.c.execution_id)
            .scalar_subquery()
            .label("archived")
        )
        self._select_row = select(x, archived).where(x.c.execution_id == bindparam("eid"))

    def _compile(self, statement: Any) -> _Compiled:
        """The statement's SQL for this dialect, and its parameter order when
        the driver's parameters are positional."""
        compiled = statement.compile(dialect=self.engine.dialect)
        order = tuple(compiled.positiontup or ()) if compiled.positional else None
        return str(compiled), order

    # ---- connection handling

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            self._conn = self.engine.connect()
        return self._conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            self._conn = None
            raise StorageError(str(getattr(exc, "orig", None) or exc)) from exc

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._lock, self._errors():
            conn = self._connection()
            try:
                yield conn
            finally:
                conn.rollback()

    # ---- the port

    def load_definitions(self) -> list[DefinitionRow]:
        t = s.workflow_definitions
        with self._read() as conn:
            rows = conn.execute(select(t).order_by(t.c.created_at_ms)).all()
        return [
            DefinitionRow(r.name, r.version, r.definition_hash, orjson.loads(r.ir), r.created_at_ms)
            for r in rows
        ]

    def load_active(self) -> list[tuple[str, list[ev.Event]]]:
        x, e = s.workflow_executions, s.execution_events
        with self._read() as conn:
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
        return list(out.items())

    def commit(self, batch: CommitBatch) -> None:
        """One DBAPI transaction, with statements compiled once for the dialect:
        this is the hot path, so it skips SQLAlchemy's per-call machinery."""
        events: list[Any] = []
        new_rows: list[Any] = []
        updates: list[Any] = []
        with self._lock, self._errors():
            raw = self._connection().connection.dbapi_connection
            assert raw is not None
            cursor = raw.cursor()
            try:
                for d in batch.definitions:
                    self._run(
                        cursor,
                        self._insert_definition,
                        [
                            {
                                "name": d.name,
                                "version": d.version,
                                "definition_hash": d.definition_hash,
                                "ir": orjson.dumps(d.ir).decode(),
                                "created_at_ms": d.created_at_ms,
                            }
                        ],
                    )
                for change in batch.executions:
                    eid = change.execution_id
                    if change.archive_run is not None:
                        if events:
                            self._run(cursor, self._insert_event, events)
                            events = []
                        self._run(
                            cursor,
                            self._insert_event,
                            [_event_row(eid, x) for x in change.archived],
                        )
                        self._run(
                            cursor, self._archive_run, [{"eid": eid, "run": change.archive_run}]
                        )
                        self._run(cursor, self._delete_run, [{"eid": eid}])
                    events.extend(_event_row(eid, x) for x in change.events)
                    row = change.row
                    values = {
                        "execution_id": eid,
                        "b_id": eid,
                        "workflow": row.workflow,
                        "version": row.version,
                        "definition_hash": row.definition_hash,
                        "status": row.status,
                        "created_at_ms": row.created_at_ms,
                        "updated_at_ms": row.updated_at_ms,
                        "last_seq": row.last_seq,
                    }
                    (new_rows if change.new else updates).append(values)
                self._run(cursor, self._insert_row, new_rows)
                self._run(cursor, self._insert_event, events)
                self._run(cursor, self._update_row, updates)
                for w in batch.workers:
                    self._run(cursor, self._delete_worker, [{"wid": w.worker_id}])
                    self._run(
                        cursor,
                        self._insert_worker,
                        [
                            {
                                "worker_id": w.worker_id,
                                "runtime": w.runtime,
                                "sdk": w.sdk,
                                "contracts": orjson.dumps(w.contracts).decode(),
                                "registered_at_ms": w.registered_at_ms,
                                "last_seen_ms": w.last_seen_ms,
                            }
                        ],
                    )
                raw.commit()
            except BaseException:
                raw.rollback()
                raise
            finally:
                cursor.close()

    @staticmethod
    def _run(cursor: Any, statement: _Compiled, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        sql, order = statement
        if order is not None:
            cursor.executemany(sql, [tuple(r[k] for k in order) for r in rows])
        else:
            cursor.executemany(sql, rows)

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        e, r = s.execution_events, s.execution_run_events
        with self._read() as conn:
            current = self._row(conn, execution_id)
            if current is None:
                return None
            if run is None or run == current.run:
                query = select(e.c.payload).where(e.c.execution_id == execution_id)
                rows = conn.execute(query.order_by(e.c.seq)).all()
            else:
                query = select(r.c.payload).where(r.c.execution_id == execution_id, r.c.run == run)
                rows = conn.execute(query.order_by(r.c.seq)).all()
                if not rows:
                    return None
        return [ev.loads(row.payload) for row in rows]

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        with self._read() as conn:
            return self._row(conn, execution_id)

    def _row(self, conn: Connection, execution_id: str) -> ExecutionRow | None:
        row = conn.execute(self._select_row, {"eid": execution_id}).first()
        if row is None:
            return None
        return _execution_row(row, (row.archived or 0) + 1)

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
        with self._read() as conn:
            return [_execution_row(row, 1) for row in conn.execute(query)]

    def list_workers(self) -> list[WorkerRow]:
        t = s.worker_registry
        with self._read() as conn:
            rows = conn.execute(select(t).order_by(t.c.worker_id)).all()
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

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self.engine.dispose()


def _event_row(execution_id: str, event: ev.Event) -> dict[str, Any]:
    return {
        "execution_id": execution_id,
        "seq": event.seq,
        "event_type": type(event).TYPE,
        "step": getattr(event, "step", None),
        "payload": ev.dumps(event).decode(),
        "timestamp_ms": event.timestamp_ms,
    }


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
