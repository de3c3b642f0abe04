"""The SQLite store: one file in WAL mode with `synchronous=FULL`, so every
committed group survives power loss. One connection writes; another reads,
which WAL lets run while a commit is in progress. `:memory:` (a database that
lives in its connection) uses one connection for both.

A database file belongs to one store at a time. Opening one:

- takes an exclusive `flock` on `<file>.lock` beside it, holding the owner's
  pid, so a second server (or a second store in the same process: `flock`
  locks belong to open files, not processes) is refused with an error naming
  the holder instead of serving a stale copy (after waiting `lock_wait_s`
  for a holder that may be exiting). The lock file is never deleted:
  removing it would let two openers lock two different files;
- runs `PRAGMA quick_check` (unless `verify=False`) and one write transaction,
  so a corrupt or read-only database is refused at once instead of failing
  every later write;
- notes whether the file had to be created (`created`), and whether a lock
  file showed that a database had been used there before
  (`replaced_missing`): the server logs either. A missing file is created
  only when nothing shows it was lost: SQLite's `-wal` or `-shm` left
  beside it (what a file removed while open leaves, as SQLite keeps them
  when it cannot checkpoint into the file), or a lock file in which the
  store that last held it recorded that it saw the file go, refuse the
  open, naming those files. Deleting them is the way to ask for a new
  database: it is what the book's "start over" already says (delete
  orbit.db, orbit.db-wal and orbit.db-shm), so no option was added to
  `orbit server`, whose options the book lists. A lock file alone does
  not refuse: it outlives every clean start-over.

While open, the store remembers the device and inode of the file it opened.
After every commit it compares them with what the path names now (one
`stat`: about 10 microseconds measured on a busy 2-core machine, beside
3 ms for a durable commit there):
a file that was removed or replaced means the commit went to a file nobody
will find again, so that commit and every later one fail with a StorageError
naming the path. Closing a store whose file is gone writes `removed` into the
lock file (where the holder's pid was), for the next open.

A statement that SQLite fails with SQLITE_CORRUPT or SQLITE_NOTADB (a page
that does not parse) refuses every later write the same way, and keeps
readiness failing: the damage is in the file and a restart would refuse it
(`PRAGMA quick_check`), so accepting more work only grows what a restore
from backup loses. Only pages a statement reads are seen: damage nothing
touches stays unseen until the next open checks the file.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.pool import QueuePool, StaticPool

from orbit_core.errors import StorageError
from orbit_core.ports import CommitBatch
from orbit_store import search
from orbit_store.sql import SqlStore

if sys.platform != "win32":
    import fcntl

# SQLite's primary result codes of a damaged file (an extended code keeps its
# primary code in the low byte).
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
# What the lock file holds after its holder saw the database removed.
_REMOVED = b"removed\n"


class SqliteStore(SqlStore):
    # A search row's missing values, stored as NULL without the sqlite3
    # module's adapter lookup a None costs (orbit_store.search.SQLITE_UPSERT).
    NO_TEXT = 0
    NO_NUMBER = math.nan

    def __init__(
        self, path: str | os.PathLike[str], *, verify: bool = True, lock_wait_s: float = 0.0
    ) -> None:
        """`verify=False` skips the integrity check, for a second open of a
        file that was just checked (the server checks before it forks).
        `lock_wait_s` is how long another process's lock is waited for before
        the open is refused: a supervisor may restart a server while the
        killed one is still exiting (a process blocked in fsync dies late)."""
        self.path = os.fspath(path)
        in_memory = self.path in ("", ":memory:") or "mode=memory" in self.path
        self.created = False
        self.replaced_missing = False
        self._lock_fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._lost: str | None = None
        # The last connection given `temp_store=MEMORY` (`transaction_scope`).
        self._journal_in_memory: Any = None
        if not in_memory:
            self.path = os.path.abspath(self.path)
            lock_path = self.path + ".lock"
            had_lock = os.path.exists(lock_path)
            self._lock_fd, previous = _lock(self.path, lock_path, lock_wait_s)
            self.created = not os.path.exists(self.path)
            self.replaced_missing = self.created and had_lock
            if self.created:
                left = _left_behind(self.path, lock_path, previous)
                if left:
                    self.close()
                    raise StorageError(
                        f"the database {self.path} is missing, but {' and '.join(left)} "
                        f"{'shows' if len(left) == 1 else 'show'} that it was in use; restore "
                        f"it from a backup, or delete {' and '.join(left)} to start with an "
                        "empty database"
                    )
        engine = create_engine(
            f"sqlite+pysqlite:///{self.path}",
            connect_args={"check_same_thread": False},
            poolclass=StaticPool if in_memory else QueuePool,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            # Takes effect only on a database with no table yet (a new one),
            # before WAL: retention's sweeper then gives the pages it frees
            # back to the file system (`reclaim_space`). An existing
            # database keeps its setting (docs/retention.md: VACUUM once),
            # and is not written to here: a read-only one must get as far
            # as the write probe, which names the fault.
            if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:
                cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        try:
            try:
                super().__init__(engine, separate_reads=not in_memory)
            except StorageError as exc:
                raise StorageError(
                    f"the database {self.path} cannot be opened: {exc.message}"
                ) from exc
            if not in_memory:
                if verify:
                    self._quick_check()
                self._identity = _identity(self.path)
                try:
                    self.probe_write()
                except StorageError as exc:
                    raise StorageError(
                        f"the database {self.path} is not writable: {exc.message}"
                    ) from exc
        except BaseException:
            self.close()
            raise

    def transaction_scope(self, raw: Any) -> contextlib.AbstractContextManager[Any]:
        """Keeps the statement journals of a writing connection in memory
        (`temp_store=MEMORY`, set before its first transaction: SQLite reads
        it when a transaction begins). A statement of several rows into an
        indexed table, such as `upsert_search`'s, journals the pages it
        changes so that it can be undone alone; past 64 KiB that copy went to
        a temporary file, written and deleted for every statement. Only the
        connections that write get it: a query's temporary tables (a large
        `IN (SELECT ..)`) keep spilling to a file rather than to memory."""
        if raw is not self._journal_in_memory:
            raw.execute("PRAGMA temp_store=MEMORY")
            self._journal_in_memory = raw
        return super().transaction_scope(raw)

    def upsert_search(self, cursor: Any, found: list[tuple[Any, ...]]) -> None:
        """Upserts the rows in statements of 64, 16, 4 rows and single ones
        (`search.sqlite_upsert`), in order, so a later row of a key
        replaces an earlier one."""
        start, left = 0, len(found)
        for size in search.SQLITE_CHUNKS:
            if left < size:
                continue
            sql = search.sqlite_upsert(size)
            while left >= size:
                end = start + size
                cursor.execute(sql, [x for row in found[start:end] for x in row])
                start, left = end, left - size

    @contextlib.contextmanager
    def lax_commit(self, raw: Any) -> Iterator[None]:
        """`synchronous=NORMAL` for one transaction on the write connection
        (WAL then writes the commit without an fsync; the engine's next
        commit, back at FULL, syncs it with its own), FULL again after."""
        cursor = raw.cursor()
        try:
            cursor.execute("PRAGMA synchronous=NORMAL")
            yield
        finally:
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.close()

    def reclaim_space(self, max_pages: int) -> int:
        """Gives up to `max_pages` free pages back to the file system (a
        database made with auto_vacuum=INCREMENTAL; others have none to
        give) in one short write; returns how many free pages are left.
        The file itself shrinks at the next WAL checkpoint."""
        left = 0

        def statements(cursor: Any) -> None:
            nonlocal left
            # Python's sqlite3 steps a statement that returns no rows once,
            # and one step of `incremental_vacuum(N)` frees one page: so the
            # pages are freed one statement each, and in one transaction (a
            # PRAGMA does not open one), so the step costs one commit.
            if not cursor.connection.in_transaction:
                cursor.execute("BEGIN")
            free = int(cursor.execute("PRAGMA freelist_count").fetchone()[0])
            step = min(max(int(max_pages), 0), free)
            for _ in range(step):
                cursor.execute("PRAGMA incremental_vacuum(1)")
            # (Also resets the last PRAGMA, which a COMMIT would find still
            # in progress.)
            left = int(cursor.execute("PRAGMA freelist_count").fetchone()[0])

        mode = self._read(lambda conn: conn.exec_driver_sql("PRAGMA auto_vacuum").scalar())
        if mode != 2:  # 2: INCREMENTAL
            return 0
        self.sweeper_write(statements)
        return left

    def _quick_check(self) -> None:
        try:
            found = self._read(
                lambda conn: [row[0] for row in conn.exec_driver_sql("PRAGMA quick_check(5)")]
            )
        except StorageError as exc:  # a page too damaged to even check
            found = [exc.message]
        if found != ["ok"]:
            detail = "; ".join(" ".join(str(line).split()) for line in found)
            raise StorageError(
                f"the database {self.path} is corrupt (PRAGMA quick_check: {detail}); "
                "restore it from a backup"
            )

    def check_file(self) -> None:
        """Raises a StorageError if the file opened is no longer the one
        its path names (removed, or replaced by another file)."""
        if self._lost is not None:
            raise StorageError(self._lost)
        if self._identity is None:
            return
        try:
            now: tuple[int, int] | None = _identity(self.path)
        except FileNotFoundError:
            now = None
        except OSError:
            return  # cannot tell (a transient error): the commit itself will say
        if now == self._identity:
            return
        what = "removed" if now is None else "replaced by another file"
        self._lost = (
            f"the database {self.path} was {what} while in use; every write is refused "
            "from now on (restore the file, then restart)"
        )
        raise StorageError(self._lost)

    def describe_error(self, exc: BaseException, *, lost: bool = False) -> str:
        message = super().describe_error(exc, lost=lost)
        code = getattr(exc, "sqlite_errorcode", None)
        damaged = isinstance(code, int) and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
        if not damaged or self._identity is None:  # opening: quick_check reports it
            return message
        if self._lost is None:
            self._lost = (
                f"the database {self.path} is corrupt ({message}); every write is refused "
                "from now on (restore it from a backup, then restart)"
            )
        return self._lost

    def commit(self, batch: CommitBatch) -> None:
        if self._lost is not None:
            raise StorageError(self._lost)
        super().commit(batch)
        # After the commit, not before: a file removed just before (or during)
        # it holds this group too, which nobody will read again.
        self.check_file()

    def write_problem(self) -> str | None:
        try:
            self.check_file()
        except StorageError as exc:
            return exc.message
        return super().write_problem()

    def close(self) -> None:
        try:
            if hasattr(self, "_writer"):  # not when the constructor failed early
                super().close()
        finally:
            fd, self._lock_fd = self._lock_fd, None
            if fd is not None:
                if self._identity is not None and not os.path.exists(self.path):
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, 0)
                        os.pwrite(fd, _REMOVED, 0)
                os.close(fd)  # releases the flock


def _identity(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _left_behind(path: str, lock_path: str, previous: bytes) -> list[str]:
    """The files beside a missing database that show it was in use and lost
    (`previous`: what its lock file held before we took it)."""
    left = [f"{path}{suffix}" for suffix in ("-wal", "-shm") if os.path.exists(f"{path}{suffix}")]
    if previous == _REMOVED:
        left.append(lock_path)
    return left


def _lock(path: str, lock_path: str, wait_s: float) -> tuple[int | None, bytes]:
    """An open, exclusively locked `lock_path` holding our pid, and what it
    held before."""
    if sys.platform == "win32":  # pragma: no cover - no flock: no lock is taken
        return None, b""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StorageError(
            f"the database {path} cannot be opened: its lock file {lock_path} cannot be "
            f"opened: {exc.strerror or exc}"
        ) from exc
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            holder = b""
            with contextlib.suppress(OSError):
                holder = os.pread(fd, 32, 0)
            pid = holder.decode(errors="replace").strip()
            if pid != str(os.getpid()) and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            os.close(fd)
            raise _held(path, lock_path, pid, exc) from exc
    previous = b""
    with contextlib.suppress(OSError):
        previous = os.pread(fd, 32, 0)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the lock holds without the pid; only the message would lack it
    return fd, previous


def _held(path: str, lock_path: str, pid: str, exc: OSError) -> StorageError:
    """The refusal when someone else holds the lock: named by the pid the
    lock file holds, when it holds one."""
    if pid == str(os.getpid()):
        who = f"open already in this process (pid {pid})"
    elif pid.isascii() and pid.isdigit():
        who = f"in use by another process (pid {pid})"
    else:
        who = f"in use by another process ({exc.strerror or exc})"
    return StorageError(
        f"the database {path} is {who}; a database belongs to one server (lock file {lock_path})"
    )
