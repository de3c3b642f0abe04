"""SQLite space after retention (docs/retention.md, "Disk space"): a new
database is made with auto_vacuum=INCREMENTAL, and the sweeper gives the
pages it frees back to the file system, so the file shrinks instead of
staying at its largest."""

from __future__ import annotations

from pathlib import Path

from orbit_core import events as ev
from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow
from orbit_server.archive import NoArchive
from orbit_server.retention import Sweeper
from orbit_store.sqlite import SqliteStore

BIG = "x" * 4000


def _fill(store: SqliteStore, count: int) -> list[str]:
    ids = []
    for i in range(count):
        eid = f"e-{i}"
        created = ev.WorkflowCreated(1, 0, "Wf", "1.0.0", "sha256:x", {"blob": BIG})
        row = ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", "COMPLETED", 0, 1000, 3)
        events: list[ev.Event] = [
            created,
            ev.WorkflowStarted(2, 0),
            ev.WorkflowCompleted(3, 1000, {"b": BIG}),
        ]
        store.commit(CommitBatch(executions=[ExecutionChange(eid, row, events, new=True)]))
        ids.append(eid)
    return ids


def _size(path: Path) -> int:
    return path.stat().st_size


def test_a_new_database_is_incremental_and_shrinks_after_a_sweep(tmp_path: Path) -> None:
    path = tmp_path / "o.db"
    store = SqliteStore(path)
    try:
        mode = store._read(lambda conn: conn.exec_driver_sql("PRAGMA auto_vacuum").scalar())
        assert mode == 2  # INCREMENTAL
        ids = _fill(store, 400)
        store._write(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)"), None)
        full = _size(path)
        sweeper = Sweeper(store, NoArchive(), 1, clock=lambda: 10_000, pause_s=0)
        summary = sweeper.sweep()
        assert summary is not None and summary.swept == len(ids)
        store._write(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)"), None)
        assert _size(path) < full / 4, (full, _size(path))
    finally:
        store.close()
    # It opens again as it was (the setting is in the file).
    again = SqliteStore(path)
    again.close()


def test_an_old_database_without_auto_vacuum_is_left_as_it_is(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # made before: no auto_vacuum
        conn.execute("CREATE TABLE t (x)")
    store = SqliteStore(path)
    try:
        mode = store._read(lambda conn: conn.exec_driver_sql("PRAGMA auto_vacuum").scalar())
        assert mode == 0
        assert store.reclaim_space(64) == 0
    finally:
        store.close()


def test_one_reclaim_step_gives_back_as_many_pages_as_asked(tmp_path: Path) -> None:
    # Python's sqlite3 runs `PRAGMA incremental_vacuum(N)` one step only
    # (one page): a step must free its N pages, in one transaction, or the
    # reclaim after a large sweep takes one fsync'd write per page.
    store = SqliteStore(tmp_path / "o.db")
    try:
        store.prepare_retention()
        ids = _fill(store, 200)
        assert store.delete_executions(ids) == len(ids)

        def free() -> int:
            return int(
                store._read(lambda c: c.exec_driver_sql("PRAGMA freelist_count").scalar_one())
            )

        before = free()
        assert before > 300
        left = store.reclaim_space(64)
        assert left == free() == before - 64
        assert store.reclaim_space(10_000) == 0 == free()
    finally:
        store.close()


def test_the_sweepers_deletes_skip_the_fsync_and_the_engines_commits_keep_it(
    tmp_path: Path,
) -> None:
    # A delete a crash undoes leaves executions that are already archived
    # (swept again later), so it commits with synchronous=NORMAL; the write
    # connection is FULL again for the engine's next group.
    store = SqliteStore(tmp_path / "o.db")
    seen: list[int] = []
    try:
        store.prepare_retention()
        ids = _fill(store, 3)

        def statements(cursor: object) -> None:
            seen.append(cursor.execute("PRAGMA synchronous").fetchone()[0])  # type: ignore[attr-defined]

        store.sweeper_write(statements)
        store._write(statements, None)
        assert seen == [1, 2]  # NORMAL for the sweeper, FULL for the engine
        assert store.delete_executions(ids) == 3
        store._write(statements, None)
        assert seen[-1] == 2
    finally:
        store.close()


def _fill_many(store: SqliteStore, count: int) -> None:
    """`count` small finished executions ending 1 ms apart, in large commits."""
    for first in range(0, count, 500):
        changes = []
        for i in range(first, min(first + 500, count)):
            eid = f"m-{i:06d}"
            row = ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", "COMPLETED", i, i, 3)
            events: list[ev.Event] = [
                ev.WorkflowCreated(1, i, "Wf", "1.0.0", "sha256:x", {}),
                ev.WorkflowStarted(2, i),
                ev.WorkflowCompleted(3, i, {}),
            ]
            changes.append(ExecutionChange(eid, row, events, new=True))
        store.commit(CommitBatch(executions=changes))


def _steps_of_a_later_batch(tmp_path: Path, count: int) -> int:
    """SQLite virtual machine steps of one small batch of candidates read
    past a cursor near the start of `count` eligible executions."""
    store = SqliteStore(tmp_path / f"c{count}.db")
    try:
        store.prepare_retention()
        _fill_many(store, count)
        steps = 0

        def step() -> int:
            nonlocal steps
            steps += 1
            return 0

        raw = store._sweep_reader.raw()
        raw.set_progress_handler(step, 1)
        try:
            rows = store.retention_candidates(10 * count, 1, 10, (5, "m-000005"), None)
        finally:
            raw.set_progress_handler(None, 1)
        assert [r.execution_id for r in rows] == [f"m-{i:06d}" for i in range(6, 16)]
        return steps
    finally:
        store.close()


def test_a_batch_of_candidates_costs_the_same_however_many_are_eligible(
    tmp_path: Path,
) -> None:
    """Each batch after the first starts at the sweep's cursor in the index:
    its cost must not grow with what is eligible (the keyset spelled as an
    OR read every eligible row after the cursor and sorted them, per batch,
    and a million swept at under 100 a second)."""
    small = _steps_of_a_later_batch(tmp_path, 300)
    large = _steps_of_a_later_batch(tmp_path, 3000)
    assert large < small * 1.5, (small, large)
