"""The schedule half of the store port on SQLAlchemy Core (`orbit_schedules`).

Mixed into `SqlStore`: every method is one transaction on the store's write
connection (reads use the read connection, tried again once on a new
connection if that one was lost). The two compare-and-sets of a
fire are plain `UPDATE ... WHERE` statements whose row count says whether
they matched, so they work unchanged on every dialect; a batch of them runs
in one transaction, one statement per schedule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import orjson
from sqlalchemy import Connection, and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from orbit_core.ports import ScheduleAdvance, ScheduleRow
from orbit_store import schema as s

T = TypeVar("T")
_t = s.orbit_schedules


class Writer(Protocol):
    """What the schedule methods need of the store's write connection
    (`sql.SqlStore`'s link; declared here so neither module imports the
    other)."""

    lock: threading.Lock

    def connection(self) -> Connection: ...

    def errors(self) -> AbstractContextManager[None]: ...


class _Exists(Exception):
    """The schedule id was taken between the check and the insert."""


class ScheduleTables:
    """The schedule methods of the store port (see `orbit_core.ports.Store`)."""

    _writer: Writer
    _read: Callable[[Callable[[Connection], Any]], Any]

    def _transaction(self, fn: Callable[[Connection], T]) -> T:
        with self._writer.lock, self._writer.errors():
            conn = self._writer.connection()
            try:
                result = fn(conn)
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            return result

    def load_schedules(self) -> list[ScheduleRow]:
        query = select(_t).order_by(_t.c.schedule_id)
        rows: list[ScheduleRow] = self._read(lambda conn: [_row(r) for r in conn.execute(query)])
        return rows

    def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        query = select(_t).where(_t.c.schedule_id == schedule_id)
        found = self._read(lambda conn: conn.execute(query).first())
        return None if found is None else _row(found)

    def insert_schedule(self, row: ScheduleRow) -> bool:
        def run(conn: Connection) -> bool:
            exists = conn.execute(
                select(_t.c.schedule_id).where(_t.c.schedule_id == row.schedule_id)
            ).first()
            if exists is not None:
                return False
            try:
                conn.execute(insert(_t).values(**_columns(row)))
            except IntegrityError:  # another server inserted it meanwhile
                raise _Exists from None
            return True

        try:
            return self._transaction(run)
        except _Exists:
            return False

    def update_schedule(self, row: ScheduleRow) -> bool:
        statement = (
            update(_t)
            .where(_t.c.schedule_id == row.schedule_id)
            .values(
                spec=orjson.dumps(row.spec).decode(),
                paused=int(row.paused),
                next_fire_ms=row.next_fire_ms,
                due_ms=row.due_ms,
                last_error=row.last_error,
                updated_at_ms=row.updated_at_ms,
                claimed_by=None,
                claimed_until_ms=None,
            )
        )
        return self._transaction(lambda conn: conn.execute(statement).rowcount == 1)

    def delete_schedule(self, schedule_id: str) -> bool:
        statement = delete(_t).where(_t.c.schedule_id == schedule_id)
        return self._transaction(lambda conn: conn.execute(statement).rowcount == 1)

    def claim_schedules(
        self, claims: list[tuple[str, int]], owner: str, until_ms: int, now_ms: int
    ) -> list[str]:
        def run(conn: Connection) -> list[str]:
            claimed = []
            for sid, occurrence in claims:
                statement = (
                    update(_t)
                    .where(
                        _t.c.schedule_id == sid,
                        _t.c.next_fire_ms == occurrence,
                        _t.c.paused == 0,
                        or_(_t.c.claimed_by.is_(None), _t.c.claimed_until_ms < now_ms),
                    )
                    .values(claimed_by=owner, claimed_until_ms=until_ms)
                )
                if conn.execute(statement).rowcount == 1:
                    claimed.append(sid)
            return claimed

        return self._transaction(run) if claims else []

    def advance_schedules(self, advances: list[ScheduleAdvance], owner: str) -> list[str]:
        def run(conn: Connection) -> list[str]:
            applied = []
            for a in advances:
                values: dict[str, Any] = {
                    "next_fire_ms": a.next_fire_ms,
                    "due_ms": a.due_ms,
                    "fired_count": _t.c.fired_count + a.fired,
                    "skipped_count": _t.c.skipped_count + a.skipped,
                    "last_error": a.last_error,
                    "updated_at_ms": a.updated_at_ms,
                    "claimed_by": None,
                    "claimed_until_ms": None,
                }
                if a.last_fire_ms is not None:
                    values["last_fire_ms"] = a.last_fire_ms
                if a.last_execution_id is not None:
                    values["last_execution_id"] = a.last_execution_id
                statement = (
                    update(_t)
                    .where(
                        and_(
                            _t.c.schedule_id == a.schedule_id,
                            _t.c.claimed_by == owner,
                            _t.c.next_fire_ms == a.occurrence_ms,
                        )
                    )
                    .values(**values)
                )
                if conn.execute(statement).rowcount == 1:
                    applied.append(a.schedule_id)
            return applied

        return self._transaction(run) if advances else []

    def record_schedule_trigger(self, schedule_id: str, execution_id: str, now_ms: int) -> bool:
        statement = (
            update(_t)
            .where(_t.c.schedule_id == schedule_id)
            .values(
                fired_count=_t.c.fired_count + 1,
                last_execution_id=execution_id,
                updated_at_ms=now_ms,
            )
        )
        return self._transaction(lambda conn: conn.execute(statement).rowcount == 1)

    def record_schedule_skip(self, schedule_id: str, now_ms: int) -> bool:
        statement = (
            update(_t)
            .where(_t.c.schedule_id == schedule_id)
            .values(skipped_count=_t.c.skipped_count + 1, updated_at_ms=now_ms)
        )
        return self._transaction(lambda conn: conn.execute(statement).rowcount == 1)

    def release_schedule_claims(self) -> None:
        statement = (
            update(_t)
            .where(_t.c.claimed_by.is_not(None))
            .values(claimed_by=None, claimed_until_ms=None)
        )
        self._transaction(lambda conn: conn.execute(statement))


def _columns(row: ScheduleRow) -> dict[str, Any]:
    return {
        "schedule_id": row.schedule_id,
        "spec": orjson.dumps(row.spec).decode(),
        "paused": int(row.paused),
        "next_fire_ms": row.next_fire_ms,
        "due_ms": row.due_ms,
        "last_fire_ms": row.last_fire_ms,
        "last_execution_id": row.last_execution_id,
        "fired_count": row.fired,
        "skipped_count": row.skipped,
        "last_error": row.last_error,
        "claimed_by": row.claimed_by,
        "claimed_until_ms": row.claimed_until_ms,
        "created_at_ms": row.created_at_ms,
        "updated_at_ms": row.updated_at_ms,
    }


def _row(r: Any) -> ScheduleRow:
    return ScheduleRow(
        r.schedule_id,
        orjson.loads(r.spec),
        bool(r.paused),
        r.next_fire_ms,
        r.due_ms,
        r.last_fire_ms,
        r.last_execution_id,
        r.fired_count,
        r.skipped_count,
        r.last_error,
        r.created_at_ms,
        r.updated_at_ms,
        r.claimed_by,
        r.claimed_until_ms,
    )
