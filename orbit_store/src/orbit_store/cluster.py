"""Leader election for standby mode (chapter 44), done by PostgreSQL itself.

The leader is whichever server's election session holds one session-level
advisory lock (`ELECTION_LOCK_KEY`): PostgreSQL grants it to one session at
a time and releases it when that session ends, whether the server exited,
crashed or was cut off. There is no consensus of our own.

The election session is a connection of its own (named
`orbit-cluster:<node id>` in pg_stat_activity), separate from the store's,
so that whether it is alive says whether this server is. It sets
`idle_session_timeout`: a leader that stops talking (a frozen process, a
host gone without closing its connection) loses its session, and so the
lock, after that long; TCP keepalives do the same when the network is cut.

Winning the lock is not enough to write: `lead` also raises the term in the
`orbit_cluster` row, and the leader's store is fenced with it
(`PostgresStore(fence_term=...)`), so a deposed leader that still believes
it leads has every write refused by the database.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import attrs
import psycopg

from orbit_core.errors import StorageError
from orbit_store.postgres import PostgresStore
from orbit_store.schema import prepare_part

# pg_try_advisory_lock's key: "orbit" and a 2 (schema preparation uses a 1).
ELECTION_LOCK_KEY = 0x6F72626974_02
# How pg_locks shows a bigint key: its high and low 32 bits.
_CLASSID, _OBJID = ELECTION_LOCK_KEY >> 32, ELECTION_LOCK_KEY & 0xFFFFFFFF

# Only cluster servers have the table (single servers never read it), made
# on first start under the schema lock (schema.CLUSTER).
_ENSURE_ROW = "INSERT INTO orbit_cluster (id, term) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"
_RAISE_TERM = (
    "UPDATE orbit_cluster SET term = term + 1, leader_node = %s, leader_addr = %s, since_ms = %s "
    "WHERE id = 1 RETURNING term"
)
_MARK = (
    "SELECT (SELECT count(*) FROM workflow_definitions), "
    "(SELECT coalesce(max(created_at_ms), 0) FROM workflow_definitions), "
    "(SELECT count(*) FROM orbit_schedules), "
    "(SELECT coalesce(max(updated_at_ms), 0) FROM orbit_schedules), "
    "(SELECT coalesce(sum(fired_count + skipped_count), 0) FROM orbit_schedules)"
)
_READ = "SELECT term, leader_node, leader_addr FROM orbit_cluster WHERE id = 1"
_CHECK = (
    "SELECT (SELECT term FROM orbit_cluster WHERE id = 1), EXISTS ("
    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
    "AND classid = %s AND objid = %s AND objsubid = 1 AND granted)"
)


@attrs.frozen
class Leadership:
    """The `orbit_cluster` row: the latest term and who was elected in it."""

    term: int
    leader_node: str | None
    leader_addr: str | None


@attrs.frozen
class Mark:
    """`Election.mark`: the definitions as (count, newest) and
    the schedules as (count, latest change, fires)."""

    definitions: tuple[int, ...]
    schedules: tuple[int, ...]


class Election:
    """One server's election session. Not thread-safe: one thread (the
    server's cluster loop) drives it. Every method raises StorageError when
    the session fails; `close` and a later call open a new one."""

    def __init__(
        self,
        store: PostgresStore,
        node_id: str,
        advertise_addr: str | None,
        *,
        idle_timeout_ms: int = 5000,
    ) -> None:
        """`store` provides the URL and TLS rules (and must stay open while
        the election is used); `idle_timeout_ms` is the
        session's idle_session_timeout (and its keepalive idle time)."""
        self._store = store
        self.node_id = node_id
        self.advertise_addr = advertise_addr
        self.idle_timeout_ms = idle_timeout_ms
        self._conn: psycopg.Connection[Any] | None = None

    def _session(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            idle_s = max(1, self.idle_timeout_ms // 1000)
            conn = self._store.session(
                f"orbit-cluster:{self.node_id}",
                keepalives=1,
                keepalives_idle=idle_s,
                keepalives_interval=1,
                keepalives_count=3,
            )
            try:
                conn.execute(f"SET idle_session_timeout = {int(self.idle_timeout_ms)}")
                with conn.transaction():
                    prepare_part(conn, "cluster")
                    conn.execute(_ENSURE_ROW)
            except psycopg.Error as exc:
                conn.close()
                raise self._failed(exc) from exc
            except StorageError:  # the cluster tables are newer than this code
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        conn = self._session()
        try:
            cursor = conn.execute(sql, params)
            return cursor.fetchone() if cursor.description is not None else None
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: BaseException) -> StorageError:
        self.close()
        return StorageError(f"the election session failed: {self._store.describe_error(exc)}")

    def try_lead(self) -> int | None:
        """Tries for the lock; when won, raises the term, records this server
        as its leader and returns the new term. None: another server leads."""
        row = self._run(_TRY_LOCK, (ELECTION_LOCK_KEY,))
        if not (row and row[0]):
            return None
        now_ms = int(time.time() * 1000)
        row = self._run(_RAISE_TERM, (self.node_id, self.advertise_addr, now_ms))
        return int(row[0])

    def check(self, term: int) -> str | None:
        """For the leader of `term`: why it no longer leads, or None (the
        session answers, still holds the lock, and the term is unchanged)."""
        try:
            found, holds = self._run(_CHECK, (_CLASSID, _OBJID))
        except StorageError as exc:
            return exc.message
        if not holds:
            return "the election session no longer holds the leader lock"
        if found != term:
            return f"the cluster moved on to term {found}"
        return None

    def leadership(self) -> Leadership:
        row = self._run(_READ)
        if row is None:
            return Leadership(0, None, None)
        return Leadership(int(row[0]), row[1], row[2])

    def suspend_idle_timeout(self, suspended: bool) -> None:
        """While a newly elected leader recovers, its session is not ended
        for idleness (a long recovery must not release the lock)."""
        timeout = 0 if suspended else int(self.idle_timeout_ms)
        self._run(f"SET idle_session_timeout = {timeout}")

    def mark(self) -> Mark:
        """What a standby's read-only engine keeps in memory, in a few
        numbers: the definitions (count, newest) and the schedules (count,
        latest change, fires). The standby adds the new definitions when
        the first changes, and reads the schedules again when they do."""
        row = [int(x) for x in self._run(_MARK)]
        return Mark(definitions=tuple(row[:2]), schedules=tuple(row[2:]))

    def close(self) -> None:
        """Ends the session (which releases the lock if it held it)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
