"""The store contract, run against the in-memory store, SQLite and PostgreSQL:
executions, definitions, workers and schedules (rows, compare-and-set claims
and advances)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from orbit_core import events as ev
from orbit_core.errors import StorageError
from orbit_core.jsontypes import JsonObject
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import (
    CommitBatch,
    DefinitionRow,
    ExecutionChange,
    ExecutionRow,
    ScheduleAdvance,
    ScheduleRow,
    Store,
    WorkerRow,
)
from orbit_store.postgres import PostgresStore
from orbit_store.sqlite import SqliteStore


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        "sqlite-in-memory",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store(request: Any, tmp_path: Path) -> Iterator[Store]:
    made: Store
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SqliteStore(tmp_path / "o.db")
    elif request.param == "postgres":
        made = PostgresStore(request.getfixturevalue("pg_url"))
    else:
        made = SqliteStore(":memory:")  # one connection holds the whole database
    yield made
    made.close()


def created(seq: int = 1, run: int | None = None, ts: int = 1000) -> ev.WorkflowCreated:
    return ev.WorkflowCreated(seq, ts, "Wf", "1.0.0", "sha256:x", {"a": 1}, None, None, run)


def row(eid: str, status: str = "RUNNING", last: int = 2, ts: int = 1000) -> ExecutionRow:
    return ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", status, ts, ts, last)


def start(store: Store, eid: str, ts: int = 1000) -> None:
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(
                    eid,
                    row(eid, ts=ts),
                    [created(ts=ts), ev.WorkflowStarted(2, ts)],
                    new=True,
                )
            ]
        )
    )


def test_events_round_trip_in_order(store: Store) -> None:
    start(store, "e-1")
    more: list[ev.Event] = [
        ev.StepScheduled(3, 1001, "a", 1, {"x": [1, 2.5]}, "e-1/a", False),
        ev.StepDispatched(4, 1002, "a", 1, "tok", "w", "s", None),
        ev.StepAttemptFailed(4 + 1, 1003, "a", 1, ev.make_error("X", "m", True, {"d": 1})),
    ]
    store.commit(CommitBatch(executions=[ExecutionChange("e-1", row("e-1", last=5), more)]))
    history = store.history("e-1")
    assert history is not None
    assert [type(x).TYPE for x in history] == [
        "WorkflowCreated",
        "WorkflowStarted",
        "StepScheduled",
        "StepDispatched",
        "StepAttemptFailed",
    ]
    assert history[2:] == more
    assert store.execution_row("e-1") == row("e-1", last=5)


def test_unknown_execution(store: Store) -> None:
    assert store.history("nope") is None
    assert store.execution_row("nope") is None


def test_active_executions_exclude_terminal_ones(store: Store) -> None:
    start(store, "a")
    start(store, "b")
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange("b", row("b", "COMPLETED", 3), [ev.WorkflowCompleted(3, 1001, {})])
            ]
        )
    )
    active = dict(store.load_active())
    assert list(active) == ["a"]
    assert len(active["a"]) == 2


def test_continue_as_new_archives_the_run(store: Store) -> None:
    start(store, "c")
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(
                    "c",
                    row("c", last=2),
                    [created(1, 2, 2000), ev.WorkflowStarted(2, 2000)],
                    archive_run=1,
                    archived=[ev.WorkflowContinuedAsNew(3, 2000, 2, {"a": 2})],
                )
            ]
        )
    )
    first = store.history("c", 1)
    assert first is not None and [x.seq for x in first] == [1, 2, 3]
    current = store.history("c")
    assert current is not None and isinstance(current[0], ev.WorkflowCreated)
    assert current[0].run == 2
    assert store.history("c", 2) == current
    assert store.history("c", 3) is None
    found = store.execution_row("c")
    assert found is not None and found.run == 2


def test_listing_is_newest_first_with_filters(store: Store) -> None:
    start(store, "old", ts=1)
    start(store, "new", ts=2)
    assert [r.execution_id for r in store.list_executions(None, None, 10)] == ["new", "old"]
    assert [r.execution_id for r in store.list_executions(None, None, 1)] == ["new"]
    assert store.list_executions("FAILED", None, 10) == []
    assert store.list_executions(None, "Other", 10) == []


def test_definitions_and_workers(store: Store) -> None:
    ir: JsonObject = {"ir_version": "orbit-ir/1", "name": "Wf", "steps": []}
    store.commit(
        CommitBatch(
            definitions=[DefinitionRow("Wf", "1.0.0", "sha256:x", ir, 5)],
            workers=[
                WorkerRow(
                    "w", "python", None, [{"task_name": "t", "contract_version": "1.0.0"}], 1, 1
                )
            ],
        )
    )
    store.commit(CommitBatch(workers=[WorkerRow("w", "go", "sdk", [], 2, 3)]))
    assert store.load_definitions() == [DefinitionRow("Wf", "1.0.0", "sha256:x", ir, 5)]
    assert store.list_workers() == [WorkerRow("w", "go", "sdk", [], 2, 3)]


def test_a_replacing_definition_takes_the_rows_place(store: Store) -> None:
    """A development server's replacement (DefinitionRow.replaces): the
    version keeps one row, the newest; twice in one group works too."""
    old: JsonObject = {"ir_version": "orbit-ir/1", "name": "Wf", "steps": []}
    new: JsonObject = {**old, "description": "edited"}
    newer: JsonObject = {**old, "description": "edited again"}
    store.commit(CommitBatch(definitions=[DefinitionRow("Wf", "1.0.0", "sha256:a", old, 5)]))
    store.commit(
        CommitBatch(definitions=[DefinitionRow("Wf", "1.0.0", "sha256:b", new, 6, replaces=True)])
    )
    [row] = store.load_definitions()
    assert (row.definition_hash, row.ir, row.created_at_ms) == ("sha256:b", new, 6)
    store.commit(
        CommitBatch(
            definitions=[
                DefinitionRow("Wf", "1.0.0", "sha256:c", new, 7, replaces=True),
                DefinitionRow("Wf", "1.0.0", "sha256:d", newer, 7, replaces=True),
            ]
        )
    )
    [row] = store.load_definitions()
    assert (row.definition_hash, row.ir) == ("sha256:d", newer)


def test_a_large_group_and_repeated_updates(store: Store) -> None:
    """Enough rows for a backend's bulk paths (one statement fed arrays on
    PostgreSQL); an execution changed twice in one group keeps the later."""
    ids = [f"g-{i:02}" for i in range(20)]
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(i, row(i), [created(), ev.WorkflowStarted(2, 1000)], new=True)
                for i in ids
            ]
        )
    )
    changes = [
        ExecutionChange(i, row(i, last=3), [ev.StepScheduled(3, 1001, "a", 1, {}, "k", False)])
        for i in ids
    ]
    changes.append(
        ExecutionChange(
            "g-00", row("g-00", "COMPLETED", 4), [ev.WorkflowCompleted(4, 1002, {"ok": 1})]
        )
    )
    store.commit(CommitBatch(executions=changes))
    assert store.execution_row("g-00") == row("g-00", "COMPLETED", 4)
    assert store.execution_row("g-19") == row("g-19", last=3)
    history = store.history("g-00")
    assert history is not None and [x.seq for x in history] == [1, 2, 3, 4]
    assert sorted(eid for eid, _ in store.load_active()) == ids[1:]


def test_bulk_rows_keep_every_character(store: Store) -> None:
    """Payloads with quotes, backslashes, braces, commas, non-ASCII text and
    escaped control characters survive the bulk paths unchanged."""
    tricky: JsonObject = {"s": 'a"b\\c{d},e\u0000\n\t é 日本 🚀', "n": None, "big": 2**62}
    ids = [f"q-{i:02}" for i in range(12)]
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(
                    i,
                    row(i),
                    [created(), ev.StepScheduled(2, 1000, 'st"e\\p', 1, tricky, "k", False)],
                    new=True,
                )
                for i in ids
            ]
        )
    )
    for i in ids:
        history = store.history(i)
        assert history is not None
        scheduled = history[1]
        assert isinstance(scheduled, ev.StepScheduled)
        assert (scheduled.step, scheduled.input) == ('st"e\\p', tricky)


def test_execution_hashes_answer_many_ids_in_one_read(store: Store) -> None:
    start(store, "h-1")
    start(store, "h-2")
    assert isinstance(store, (MemoryStore, SqliteStore, PostgresStore))
    read = store.execution_hashes
    assert read([]) == {}
    assert read(["h-1", "nope", "h-2", "h-1"]) == {"h-1": "sha256:x", "h-2": "sha256:x"}
    many = [f"absent-{i}" for i in range(1200)] + ["h-2"]
    assert read(many) == {"h-2": "sha256:x"}


def test_a_failed_batch_writes_nothing(store: Store) -> None:
    if isinstance(store, MemoryStore):
        pytest.skip("the memory store does not check keys: its commits cannot fail")
    start(store, "d")
    duplicate = ExecutionChange("d", row("d"), [created(), ev.WorkflowStarted(2, 1)], new=True)
    with pytest.raises(StorageError) as refused:
        store.commit(CommitBatch(executions=[duplicate]))
    # The database's own refusal (a key already taken), not a lost connection.
    assert type(refused.value) is StorageError, refused.value
    assert re.search(r"unique|duplicate", refused.value.message, re.IGNORECASE), refused.value
    history = store.history("d")
    assert history is not None and len(history) == 2


def test_sqlite_runs_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "w.db")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
    store.close()


def test_sqlite_reads_do_not_wait_for_a_commit_in_progress(tmp_path: Path) -> None:
    import threading

    store = SqliteStore(tmp_path / "r.db")
    start(store, "r-1")
    found: list[ExecutionRow | None] = []
    # White box: a commit holds the write connection's lock until its fsync ends.
    with store._writer.lock:
        reader = threading.Thread(target=lambda: found.append(store.execution_row("r-1")))
        reader.start()
        reader.join(timeout=5)
        assert not reader.is_alive()
    assert found[0] is not None and found[0].execution_id == "r-1"
    store.close()


# ---- schedules


def schedule(sid: str = "s-1", next_fire: int | None = 10_000, **changes: Any) -> ScheduleRow:
    row = ScheduleRow(
        sid,
        {"schedule_id": sid, "workflow": "Wf", "input": {"a": [1, 2.5]}, "interval": "10s"},
        False,
        next_fire,
        next_fire,
        None,
        None,
        0,
        0,
        None,
        1000,
        1000,
    )
    return attrs.evolve(row, **changes)


def advance(sid: str, occurrence: int, **changes: Any) -> ScheduleAdvance:
    base = ScheduleAdvance(
        sid,
        occurrence,
        occurrence + 10_000,
        occurrence + 10_000,
        occurrence,
        f"{sid}:x",
        1,
        0,
        None,
        2000,
    )
    return attrs.evolve(base, **changes)


def test_schedules_round_trip_and_ids_are_unique(store: Store) -> None:
    assert store.insert_schedule(schedule("b"))
    assert store.insert_schedule(schedule("a", paused=True, next_fire=None))
    assert not store.insert_schedule(schedule("a", next_fire=5))
    assert [r.schedule_id for r in store.load_schedules()] == ["a", "b"]
    assert store.get_schedule("b") == schedule("b")
    assert store.get_schedule("a") == schedule("a", paused=True, next_fire=None)
    assert store.get_schedule("zz") is None


def test_a_schedule_update_keeps_the_counters_and_drops_the_claim(store: Store) -> None:
    store.insert_schedule(schedule())
    assert store.claim_schedules([("s-1", 10_000)], "me", 40_000, 10_000) == ["s-1"]
    assert store.advance_schedules([advance("s-1", 10_000, skipped=2)], "me") == ["s-1"]
    assert store.claim_schedules([("s-1", 20_000)], "me", 50_000, 20_000) == ["s-1"]
    spec = {"schedule_id": "s-1", "workflow": "Wf", "input": {}, "cron": "* * * * *"}
    changed = schedule(spec=spec, next_fire=60_000, last_error=None, updated_at_ms=3000)
    assert store.update_schedule(changed)
    row = store.get_schedule("s-1")
    assert row is not None
    assert (row.spec, row.next_fire_ms, row.fired, row.skipped, row.last_fire_ms) == (
        spec,
        60_000,
        1,
        2,
        10_000,
    )
    assert (row.claimed_by, row.claimed_until_ms, row.updated_at_ms) == (None, None, 3000)
    assert not store.update_schedule(schedule("nope"))


def test_claims_are_compare_and_set(store: Store) -> None:
    store.insert_schedule(schedule("s-1"))
    store.insert_schedule(schedule("s-2", paused=True))
    store.insert_schedule(schedule("s-3"))
    claims = [("s-1", 10_000), ("s-2", 10_000), ("s-3", 9_999), ("missing", 1)]
    assert store.claim_schedules(claims, "me", 40_000, 10_000) == ["s-1"]
    # A live claim blocks another server; an expired one does not.
    assert store.claim_schedules([("s-1", 10_000)], "other", 70_000, 39_999) == []
    assert store.claim_schedules([("s-1", 10_000)], "other", 70_000, 40_001) == ["s-1"]
    # Only the holder of the claim advances the row.
    assert store.advance_schedules([advance("s-1", 10_000)], "me") == []
    assert store.advance_schedules([advance("s-1", 10_000)], "other") == ["s-1"]
    row = store.get_schedule("s-1")
    assert row is not None
    assert (row.next_fire_ms, row.due_ms, row.last_fire_ms, row.last_execution_id) == (
        20_000,
        20_000,
        10_000,
        "s-1:x",
    )
    assert (row.fired, row.claimed_by, row.updated_at_ms) == (1, None, 2000)
    # A stale advance (the occurrence moved on) changes nothing.
    assert store.advance_schedules([advance("s-1", 10_000)], "other") == []


def test_an_advance_without_a_start_keeps_the_last_execution(store: Store) -> None:
    store.insert_schedule(schedule())
    store.claim_schedules([("s-1", 10_000)], "me", 40_000, 10_000)
    store.advance_schedules([advance("s-1", 10_000)], "me")
    store.claim_schedules([("s-1", 20_000)], "me", 50_000, 20_000)
    retry = advance(
        "s-1",
        20_000,
        next_fire_ms=20_000,
        due_ms=25_000,
        last_fire_ms=None,
        last_execution_id=None,
        fired=0,
        skipped=3,
        last_error="RESOURCE_EXHAUSTED: full",
    )
    assert store.advance_schedules([retry], "me") == ["s-1"]
    row = store.get_schedule("s-1")
    assert row is not None
    assert (row.next_fire_ms, row.due_ms, row.last_fire_ms, row.last_execution_id) == (
        20_000,
        25_000,
        10_000,
        "s-1:x",
    )
    assert (row.fired, row.skipped, row.last_error) == (1, 3, "RESOURCE_EXHAUSTED: full")


def test_triggers_deletes_and_released_claims(store: Store) -> None:
    store.insert_schedule(schedule("s-1"))
    store.insert_schedule(schedule("s-2"))
    assert store.record_schedule_trigger("s-1", "s-1:manual:t", 5000)
    assert not store.record_schedule_trigger("nope", "x", 5000)
    row = store.get_schedule("s-1")
    assert row is not None
    assert (row.fired, row.last_execution_id, row.updated_at_ms) == (1, "s-1:manual:t", 5000)
    # A trigger the overlap policy declined: counted as skipped, nothing else changes.
    assert store.record_schedule_skip("s-1", 6000)
    assert not store.record_schedule_skip("nope", 6000)
    row = store.get_schedule("s-1")
    assert row is not None
    assert (row.fired, row.skipped, row.last_execution_id, row.updated_at_ms) == (
        1,
        1,
        "s-1:manual:t",
        6000,
    )
    store.claim_schedules([("s-1", 10_000), ("s-2", 10_000)], "gone", 40_000, 10_000)
    store.release_schedule_claims()
    assert all(r.claimed_by is None for r in store.load_schedules())
    assert store.delete_schedule("s-1")
    assert not store.delete_schedule("s-1")
    assert [r.schedule_id for r in store.load_schedules()] == ["s-2"]


def test_schedules_survive_reopening_the_database(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path / "o.db")
    first.insert_schedule(schedule())
    first.close()
    again = SqliteStore(tmp_path / "o.db")
    try:
        assert again.load_schedules() == [schedule()]
    finally:
        again.close()


def finish(store: Store, eid: str, at: int, status: str = "COMPLETED") -> None:
    done = ev.WorkflowCompleted(3, at, {"ok": True})
    changed = attrs.evolve(row(eid, status, last=3), updated_at_ms=at)
    store.commit(CommitBatch(executions=[ExecutionChange(eid, changed, [done])]))


def test_retention_candidates_and_deletion(store: Store) -> None:
    """Finished executions ended before the cutoff are offered oldest first;
    running ones, a running parent's children and a schedule's last execution
    are not; deletion removes every run and leaves unfinished ones alone."""
    retention: Any = store
    retention.prepare_retention()
    for eid in ("old", "young", "running", "kept"):
        start(store, eid)
    finish(store, "old", 2000)
    finish(store, "young", 9000)
    finish(store, "kept", 1500)
    child = ev.WorkflowCreated(
        1, 1000, "Wf", "1.0.0", "sha256:x", {}, {"execution_id": "running", "step": "s"}
    )
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(
                    "child", row("child"), [child, ev.WorkflowStarted(2, 1000)], new=True
                )
            ]
        )
    )
    finish(store, "child", 1800)
    store.insert_schedule(schedule(last_execution_id="kept"))
    assert [r.execution_id for r in retention.retention_candidates(6000, 1000, 10)] == ["old"]
    assert retention.retention_candidates(6000, 1000, 10, (2000, "old")) == []
    # An execution's own retention counts instead of the server's.
    retention.set_retention("old", 10_000)
    retention.set_retention("young", 10)
    assert [r.execution_id for r in retention.retention_candidates(9500, 1000, 10)] == ["young"]
    retention.set_retention("old", 100)
    assert retention.delete_executions(["old", "running", "old"]) == 1
    assert store.execution_row("old") is None and store.history("old") is None
    assert store.execution_row("running") is not None
    finish(store, "running", 3000)
    assert [r.execution_id for r in retention.retention_candidates(6000, 1000, 10)] == [
        "child",
        "running",
    ]


def test_retention_of_a_definition_comes_between_own_and_default(store: Store) -> None:
    """`by_definition` (a workflow's `retention`) replaces the server's
    retention for executions of that hash; an execution's own still wins."""
    retention: Any = store
    retention.prepare_retention()
    for eid in ("a", "b", "c"):
        start(store, eid)
        finish(store, eid, 9000)
    assert retention.retention_candidates(9500, 1000, 10) == []
    assert retention.retention_candidates(9500, 1000, 10, None, {"sha256:other": 10}) == []
    retention.set_retention("c", 100_000)
    found = retention.retention_candidates(9500, 1000, 10, None, {"sha256:x": 100})
    assert [r.execution_id for r in found] == ["a", "b"]
    assert [
        r.execution_id
        for r in retention.retention_candidates(9500, 1000, 10, (9000, "a"), {"sha256:x": 100})
    ] == ["b"]


def test_retention_histories_hold_every_run(store: Store) -> None:
    retention: Any = store
    start(store, "c")
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(
                    "c",
                    row("c", last=2),
                    [created(1, 2, 2000), ev.WorkflowStarted(2, 2000)],
                    archive_run=1,
                    archived=[ev.WorkflowContinuedAsNew(3, 2000, 2, {"a": 2})],
                )
            ]
        )
    )
    start(store, "d")
    found = retention.retention_histories(["d", "missing", "c"])
    assert [(r.execution_id, r.run) for r, _ in found] == [("d", 1), ("c", 2)]
    assert [[x.seq for x in run] for run in found[1][1]] == [[1, 2, 3], [1, 2]]
    assert [[x.seq for x in run] for run in found[0][1]] == [[1, 2]]
