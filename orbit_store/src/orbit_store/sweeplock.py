"""The right to sweep for retention among the servers of a shared cluster
(`orbit server --retention --cluster --cluster-mode shared`; docs/retention.md),
and likewise the right to run batch jobs (`BatchLock`,
docs/operating-executions.md).

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
# Batch jobs' ("orbit" and a 5; 4 creates the idempotency keys' table).
BATCH_LOCK_KEY = 0x6F72626974_05
_TRY = "SELECT pg_try_advisory_lock(%s)"
_UNLOCK = "SELECT pg_advisory_unlock(%s)"
_HELD = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
    "AND pid = pg_backend_pid() AND classid = %s AND objid = %s AND objsubid = 1 AND granted)"
)


class SweepLock:
    """One server's session for the sweep lock. Used by one thread (the
    sweeper's); a failed session is closed and a later call opens another."""

    key = SWEEP_LOCK_KEY
    purpose = "sweep"

    def __init__(self, store: PostgresStore, node_id: str) -> None:
        self._store = store
        self._name = f"orbit-{self.purpose}:{node_id}"
        self._conn: psycopg.Connection[Any] | None = None

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self._store.session(self._name)
        try:
            row = self._conn.execute(sql, params).fetchone()
        except psycopg.Error as exc:
            self.close()
            raise StorageError(
                f"the {self.purpose} lock's session failed: {self._store.describe_error(exc)}"
            ) from exc
        return None if row is None else row[0]

    def try_take(self) -> bool:
        return bool(self._one(_TRY, (self.key,)))

    def held(self) -> bool:
        try:
            return bool(self._one(_HELD, (self.key >> 32, self.key & 0xFFFFFFFF)))
        except StorageError:
            return False

    def release(self) -> None:
        with contextlib.suppress(StorageError):
            self._one(_UNLOCK, (self.key,))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()


class BatchLock(SweepLock):
    """The right to run batch jobs among the servers of a shared cluster
    (orbit_server/batches.py): held while a server works through open
    batches, so one server at a time acts on them; a server that dies
    leaves it to the next."""

    key = BATCH_LOCK_KEY
    purpose = "batch"
