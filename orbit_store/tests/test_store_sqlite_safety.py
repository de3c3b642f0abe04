"""The SQLite store guards its file: one owner at a time, a removed or
replaced file refuses writes, a corrupt file is refused at open (issue 11,
items 6 to 8)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlite_damage import corrupt_a_table_under_its_users, corrupt_an_event_page

from orbit_core import events as ev
from orbit_core.errors import StorageError
from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow, WorkerRow
from orbit_store.sqlite import SqliteStore


def change(eid: str, status: str = "RUNNING", payload: str = "") -> ExecutionChange:
    created = ev.WorkflowCreated(1, 1000, "Wf", "1.0.0", "sha256:x", {"p": payload}, None, None)
    row = ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", status, 1000, 1000, 2)
    return ExecutionChange(eid, row, [created, ev.WorkflowStarted(2, 1000)], new=True)


def start(store: SqliteStore, eid: str) -> None:
    store.commit(CommitBatch(executions=[change(eid)]))


def hold_in_another_process(db: Path) -> subprocess.Popen[str]:
    """A child process that opens the store at `db` and keeps it open until
    its stdin is closed; returned once the store is open."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from orbit_store.sqlite import SqliteStore; "
            "s = SqliteStore(sys.argv[1]); print('open', flush=True); sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    line = holder.stdout.readline()
    if line != "open\n":
        holder.kill()
        holder.wait(10)
        holder.stdout.close()
        raise AssertionError(f"the holder did not open the store: {line!r}")
    return holder


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_removed_or_replaced_file_refuses_every_later_write(tmp_path: Path, how: str) -> None:
    db = tmp_path / "orbit.db"
    store = SqliteStore(db)
    start(store, "a-1")
    assert store.write_problem() is None
    if how == "removed":
        db.unlink()
    else:
        other = tmp_path / "other.db"
        SqliteStore(other).close()
        os.replace(other, db)
    problem = store.write_problem()
    assert problem is not None and str(db) in problem and how in problem
    for eid in ("a-2", "a-3"):
        with pytest.raises(StorageError) as info:
            start(store, eid)
        assert info.value.message == problem
    store.close()


def test_a_commit_that_raced_the_removal_is_not_acknowledged(tmp_path: Path) -> None:
    """The file goes away while a commit is written: that commit landed in a
    file nobody will open again, so it fails too."""
    db = tmp_path / "orbit.db"

    class Racing(SqliteStore):
        def _commit(self, batch: CommitBatch) -> None:
            super()._commit(batch)
            db.unlink()

    store = Racing(db)
    with pytest.raises(StorageError, match="was removed while in use"):
        start(store, "r-1")
    store.close()


def test_the_identity_check_costs_little_beside_a_commit(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "orbit.db")
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        store.check_file()
    check = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for i in range(20):
        start(store, f"c-{i}")
    commit = (time.perf_counter() - t0) / 20
    store.close()
    # Measured: a few microseconds per check against about a millisecond
    # (an fsync) per commit.
    assert check < commit / 20, (check, commit)


def test_a_second_store_on_the_same_file_in_one_process_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    first = SqliteStore(db)
    with pytest.raises(StorageError) as info:
        SqliteStore(db)
    assert info.value.message == (
        f"the database {db} is open already in this process (pid {os.getpid()}); "
        f"a database belongs to one server (lock file {db}.lock)"
    )
    start(first, "s-1")  # the first store is unharmed
    first.close()
    again = SqliteStore(db)  # and closing it frees the file
    assert again.execution_row("s-1") is not None
    again.close()


def test_a_store_held_by_another_process_is_refused_naming_its_pid(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    holder = hold_in_another_process(db)
    try:
        with pytest.raises(
            StorageError, match=rf"is in use by another process \(pid {holder.pid}\);"
        ):
            SqliteStore(db)
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(10)
        holder.stdout.close()
    SqliteStore(db).close()  # its exit released the lock


def test_a_store_may_wait_for_an_exiting_holder(tmp_path: Path) -> None:
    """A restart while the old process is still exiting: the lock is waited
    for (`lock_wait_s`), not refused at once."""
    db = tmp_path / "orbit.db"
    holder = hold_in_another_process(db)
    assert holder.stdout is not None
    assert holder.stdin is not None
    holder.stdin.close()  # it exits now, without closing the store
    store = SqliteStore(db, lock_wait_s=30)
    assert holder.wait(10) == 0
    holder.stdout.close()
    store.close()


def fill(db: Path, n: int = 300) -> None:
    store = SqliteStore(db)
    for k in range(0, n, 50):
        changes = [change(f"x-{i}", "COMPLETED", "y" * 200) for i in range(k, k + 50)]
        store.commit(CommitBatch(executions=changes))
    store.close()


def test_a_corrupt_database_is_refused_at_open(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    fill(db)
    corrupt_an_event_page(db)
    with pytest.raises(StorageError) as info:
        SqliteStore(db)
    assert info.value.message.startswith(f"the database {db} is corrupt (PRAGMA quick_check: ")
    assert info.value.message.endswith("); restore it from a backup")
    SqliteStore(db, verify=False).close()  # what skipping the check would have let in


def test_creation_is_reported(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    first = SqliteStore(db)
    assert (first.created, first.replaced_missing, first.path) == (True, False, str(db))
    first.close()
    second = SqliteStore(db)
    assert (second.created, second.replaced_missing) == (False, False)
    second.close()
    for leftover in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        leftover.unlink(missing_ok=True)
    third = SqliteStore(db)  # the lock file says a database was here
    assert (third.created, third.replaced_missing) == (True, True)
    third.close()


def test_a_file_removed_while_open_is_refused_not_recreated(tmp_path: Path) -> None:
    """The database was removed while a store had it open: SQLite leaves its
    -wal and -shm behind, and the store, which saw the file go, says so in
    the lock file. A new empty database there would hide the loss."""
    db = tmp_path / "orbit.db"
    store = SqliteStore(db)
    start(store, "m-1")
    db.unlink()
    store.close()
    left = [f"{db}-wal", f"{db}-shm", f"{db}.lock"]
    with pytest.raises(StorageError) as info:
        SqliteStore(db)
    assert info.value.message == (
        f"the database {db} is missing, but {' and '.join(left)} show that it was in use; "
        f"restore it from a backup, or delete {' and '.join(left)} to start with an empty "
        "database"
    )
    assert not db.exists()
    for name in left:  # the way to ask for a new database
        Path(name).unlink()
    again = SqliteStore(db)
    assert (again.created, again.replaced_missing) == (True, False)
    again.close()


@pytest.mark.parametrize("left", ["-wal", "-shm"])
def test_a_missing_file_whose_wal_is_left_is_refused(tmp_path: Path, left: str) -> None:
    """A store killed with its file open leaves -wal and -shm; with the file
    itself gone, either one shows that a database was lost."""
    db = tmp_path / "orbit.db"
    holder = hold_in_another_process(db)
    holder.kill()
    holder.wait(10)
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.close()
    holder.stdout.close()
    db.unlink()
    for name in {"-wal", "-shm"} - {left}:
        Path(f"{db}{name}").unlink()
    with pytest.raises(StorageError) as info:
        SqliteStore(db)
    assert info.value.message == (
        f"the database {db} is missing, but {db}{left} shows that it was in use; restore it "
        f"from a backup, or delete {db}{left} to start with an empty database"
    )
    Path(f"{db}{left}").unlink()
    again = SqliteStore(db)  # the lock file alone, as after a clean start-over
    assert (again.created, again.replaced_missing) == (True, True)
    again.close()


def test_a_file_removed_with_its_wal_while_open_is_refused_by_its_lock_file(
    tmp_path: Path,
) -> None:
    """Every file of the database went while the store ran: the store, which
    saw it, leaves word in the lock file for the next open."""
    db = tmp_path / "orbit.db"
    store = SqliteStore(db)
    start(store, "m-1")
    for name in ("", "-wal", "-shm"):
        Path(f"{db}{name}").unlink()
    store.close()
    with pytest.raises(StorageError) as info:
        SqliteStore(db)
    assert info.value.message == (
        f"the database {db} is missing, but {db}.lock shows that it was in use; restore it "
        f"from a backup, or delete {db}.lock to start with an empty database"
    )
    Path(f"{db}.lock").unlink()
    SqliteStore(db).close()


def test_corruption_met_by_a_commit_refuses_every_later_write(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    store = SqliteStore(db)
    for i in range(5):
        start(store, f"c-{i}")
    corrupt_a_table_under_its_users(db, "workflow_executions")
    with pytest.raises(StorageError) as info:
        start(store, "c-9")
    refusal = (
        f"the database {db} is corrupt (database disk image is malformed); every write is "
        "refused from now on (restore it from a backup, then restart)"
    )
    assert info.value.message == refusal
    # A write that touches no damaged page is refused too, and readiness
    # says why (a probe write that works does not clear it).
    assert store.write_problem() == refusal
    worker = WorkerRow("w", "python", None, [], 1, 1)
    with pytest.raises(StorageError) as again:
        store.commit(CommitBatch(workers=[worker]))
    assert again.value.message == refusal
    assert store.write_problem() == refusal
    store.close()


def test_a_failed_write_makes_the_store_unready_until_a_write_works(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "orbit.db")
    start(store, "w-1")
    with pytest.raises(StorageError):
        start(store, "w-1")  # the same key again: the commit fails
    assert store._write_error is not None
    # A readiness check tries a write of its own, which works.
    assert store.write_problem() is None
    store.close()
