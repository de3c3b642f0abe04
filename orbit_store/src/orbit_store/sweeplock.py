"""The right to sweep for retention among the servers of a shared cluster
(`orbit server --retention --cluster --cluster-mode shared`; docs/retention.md).

A session-level PostgreSQL advisory lock (`SWEEP_LOCK_KEY`) on a connection
of its own: PostgreSQL grants it to one session at a time, and frees it when
the session ends, so a server that dies mid-sweep leaves it to the next.
The sweeper takes it with `try_take` for one sweep, checks it with `held`
before each batch's delete (a session cut off loses it) and gives it back
with `release`. It shares the election's way of reading `pg_locks`
(orbit_store/cluster.py), with its own key.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg

from orbit_core.errors import StorageError
from orbit_store.postgres import PostgresStore

# The advisory lock's key: "orbit" and a 3 (schema preparation 1, election 2).
SWEEP_LOCK_KEY = 0x6F72626974_03
_CLASSID, _OBJID = SWEEP_LOCK_KEY >> 32, SWEEP_LOCK_KEY & 0xFFFFFFFF
_TRY = "SELECT pg_try_advisory_lock(%s)"
_UNLOCK = "SELECT pg_advisory_unlock(%s)"
_HELD = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
    "AND pid = pg_backend_pid() AND classid = %s AND objid = %s AND objsubid = 1 AND granted)"
)


class SweepLock:
    """One server's session for the sweep lock. Used by one thread (the
    sweeper's); a failed session is closed and a later call opens another."""

    def __init__(self, store: PostgresStore, node_id: str) -> None:
        self._store = store
        self._name = f"orbit-sweep:{node_id}"
        self._conn: psycopg.Connection[Any] | None = None

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self._store.session(self._name)
        try:
            row = self._conn.execute(sql, params).fetchone()
        except psycopg.Error as exc:
            self.close()
            raise StorageError(
                f"the sweep lock's session failed: {self._store.describe_error(exc)}"
            ) from exc
        return None if row is None else row[0]

    def try_take(self) -> bool:
        return bool(self._one(_TRY, (SWEEP_LOCK_KEY,)))

    def held(self) -> bool:
        try:
            return bool(self._one(_HELD, (_CLASSID, _OBJID)))
        except StorageError:
            return False

    def release(self) -> None:
        with contextlib.suppress(StorageError):
            self._one(_UNLOCK, (SWEEP_LOCK_KEY,))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()
