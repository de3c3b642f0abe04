"""The batch half of the store (`orbit_core.ports.BatchStore`) on SQLAlchemy
Core: `orbit_batches` and `orbit_batch_items` (schema.py, part
"operations"). Mixed into `SqlStore` like `ScheduleTables`: every write is
one short transaction on the store's write connection, so a batch of
10,000 executions never holds it for more than one slice; reads use the
read connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson
from sqlalchemy import Connection, and_, func, insert, inspect, or_, select, update
from sqlalchemy.schema import CreateTable

from orbit_core.ports import BatchItem, BatchRow
from orbit_core.visibility.check import Filter
from orbit_store import schema as s
from orbit_store import search

T = TypeVar("T")
_b = s.orbit_batches
_i = s.orbit_batch_items
_x = s.workflow_executions


class BatchTables:
    """The batch methods (see `orbit_core.ports.BatchStore`)."""

    _transaction: Callable[[Callable[[Connection], Any]], Any]
    _read: Callable[[Callable[[Connection], Any]], Any]

    def prepare_batches(self) -> None:
        def run(conn: Connection) -> None:
            dialect = conn.dialect
            for table in (s.schema_parts, *s.OPERATIONS):
                conn.exec_driver_sql(
                    str(CreateTable(table, if_not_exists=True).compile(dialect=dialect))
                )
            p = s.schema_parts
            found = conn.execute(select(p.c.version).where(p.c.part == s.OPERATIONS_PART)).scalar()
            if found is None:
                conn.execute(insert(p).values(part=s.OPERATIONS_PART, version=s.OPERATIONS_VERSION))

        self._transaction(run)

    def has_batches(self) -> bool:
        found: bool = self._read(lambda conn: inspect(conn).has_table(_b.name))
        return found

    def insert_batch(self, row: BatchRow) -> None:
        self._transaction(lambda conn: conn.execute(insert(_b).values(**_columns(row))))

    def batch_targets(
        self,
        workflow: str | None,
        status: str | None,
        after: tuple[int, str] | None,
        limit: int,
        where: Filter | None = None,
    ) -> list[tuple[int, str]]:
        query = select(_x.c.created_at_ms, _x.c.execution_id)
        if workflow is not None:
            query = query.where(_x.c.workflow == workflow)
        if status is not None:
            query = query.where(_x.c.status == status)
        if after is not None:
            query = query.where(
                or_(
                    _x.c.created_at_ms > after[0],
                    and_(_x.c.created_at_ms == after[0], _x.c.execution_id > after[1]),
                )
            )
        query = query.order_by(_x.c.created_at_ms, _x.c.execution_id).limit(limit)

        def read(conn: Connection) -> list[tuple[int, str]]:
            chosen = query
            if where is not None:
                # The same SQL as `GET /v1/executions?where=` (search.py).
                chosen = chosen.where(search.where(where, search.exists(conn)))
            return [(int(r[0]), str(r[1])) for r in conn.execute(chosen)]

        rows: list[tuple[int, str]] = self._read(read)
        return rows

    def add_batch_items(
        self, batch_id: str, first: int, execution_ids: Sequence[str], now_ms: int
    ) -> bool:
        if not execution_ids:
            return True
        rows = [
            {"batch_id": batch_id, "position": first + n, "execution_id": eid}
            for n, eid in enumerate(execution_ids)
        ]
        # The total counts what is written, in the same transaction: a
        # selection interrupted goes on from there. Only from `first`: of
        # two servers going on with one selection, the second writes nothing.
        total = (
            update(_b)
            .where(_b.c.batch_id == batch_id, _b.c.total == first, _b.c.state == "selecting")
            .values(total=first + len(rows), updated_at_ms=now_ms)
        )

        def run(conn: Connection) -> bool:
            if conn.execute(total).rowcount != 1:
                return False
            conn.execute(insert(_i), rows)
            return True

        added: bool = self._transaction(run)
        return added

    def set_batch(self, batch_id: str, *, state: str, total: int, now_ms: int) -> None:
        statement = (
            update(_b)
            .where(_b.c.batch_id == batch_id)
            .values(state=state, total=total, updated_at_ms=now_ms)
        )
        self._transaction(lambda conn: conn.execute(statement))

    def batch(self, batch_id: str) -> BatchRow | None:
        query = select(_b).where(_b.c.batch_id == batch_id)
        found = self._read(lambda conn: conn.execute(query).first())
        return None if found is None else _row(found)

    def batches(self, limit: int) -> list[BatchRow]:
        query = select(_b).order_by(_b.c.created_at_ms.desc(), _b.c.batch_id.desc()).limit(limit)
        rows: list[BatchRow] = self._read(lambda conn: [_row(r) for r in conn.execute(query)])
        return rows

    def open_batches(self) -> list[BatchRow]:
        query = select(_b).where(_b.c.state != "done").order_by(_b.c.created_at_ms, _b.c.batch_id)
        rows: list[BatchRow] = self._read(lambda conn: [_row(r) for r in conn.execute(query)])
        return rows

    def batch_items(
        self, batch_id: str, *, pending: bool, after: int, limit: int
    ) -> list[BatchItem]:
        query = select(_i).where(_i.c.batch_id == batch_id, _i.c.position > after)
        if pending:
            query = query.where(_i.c.outcome.is_(None))
        query = query.order_by(_i.c.position).limit(limit)
        rows: list[BatchItem] = self._read(
            lambda conn: [
                BatchItem(
                    int(r.position),
                    r.execution_id,
                    r.claimed_at_ms,
                    r.outcome,
                    r.code,
                    r.message,
                )
                for r in conn.execute(query)
            ]
        )
        return rows

    def batch_outcomes(self, batch_id: str) -> dict[str, int]:
        query = (
            select(_i.c.outcome, func.count())
            .where(_i.c.batch_id == batch_id, _i.c.outcome.is_not(None))
            .group_by(_i.c.outcome)
        )
        found: dict[str, int] = self._read(
            lambda conn: {str(r[0]): int(r[1]) for r in conn.execute(query)}
        )
        return found

    def claim_batch_items(self, batch_id: str, positions: Sequence[int], now_ms: int) -> None:
        if not positions:
            return
        statement = (
            update(_i)
            .where(
                _i.c.batch_id == batch_id,
                _i.c.position.in_(list(positions)),
                _i.c.claimed_at_ms.is_(None),
            )
            .values(claimed_at_ms=now_ms)
        )
        self._transaction(lambda conn: conn.execute(statement))

    def finish_batch_items(
        self, batch_id: str, items: Sequence[BatchItem], now_ms: int, done: bool
    ) -> None:
        def run(conn: Connection) -> None:
            for item in items:
                conn.execute(
                    update(_i)
                    .where(_i.c.batch_id == batch_id, _i.c.position == item.position)
                    .values(outcome=item.outcome, code=item.code, message=item.message)
                )
            values: dict[str, Any] = {
                "processed": _b.c.processed + len(items),
                "updated_at_ms": now_ms,
            }
            if done:
                values["state"] = "done"
                values["finished_at_ms"] = now_ms
            conn.execute(update(_b).where(_b.c.batch_id == batch_id).values(**values))

        self._transaction(run)


def _columns(row: BatchRow) -> dict[str, Any]:
    return {
        "batch_id": row.batch_id,
        "action": row.action,
        "params": orjson.dumps(row.params).decode(),
        "filter": orjson.dumps(row.filter).decode(),
        "state": row.state,
        "total": row.total,
        "processed": row.processed,
        "created_at_ms": row.created_at_ms,
        "updated_at_ms": row.updated_at_ms,
        "finished_at_ms": row.finished_at_ms,
    }


def _row(r: Any) -> BatchRow:
    return BatchRow(
        r.batch_id,
        r.action,
        orjson.loads(r.params),
        orjson.loads(r.filter),
        r.state,
        int(r.total),
        int(r.processed),
        int(r.created_at_ms),
        int(r.updated_at_ms),
        None if r.finished_at_ms is None else int(r.finished_at_ms),
    )
