"""The retention sweeper on the in-memory store: what it archives and
deletes, the counters and gauge the metrics read, and that an archive that
cannot write stops the deletion."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

from orbit_core import events as ev
from orbit_core.jsontypes import JsonObject
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch, DefinitionRow, ExecutionChange, ExecutionRow
from orbit_server.archive import ArchivedExecution, DirectoryArchive, NoArchive
from orbit_server.retention import Sweeper, SweepSummary


def sweep(sweeper: Sweeper) -> SweepSummary:
    summary = sweeper.sweep()
    assert summary is not None
    return summary


def finished(store: MemoryStore, eid: str, ended: int, status: str = "COMPLETED") -> None:
    created = ev.WorkflowCreated(1, 0, "Wf", "1.0.0", "sha256:x", {})
    row = ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", "RUNNING", 0, 0, 2)
    store.commit(
        CommitBatch(
            executions=[ExecutionChange(eid, row, [created, ev.WorkflowStarted(2, 0)], new=True)]
        )
    )
    done = attrs.evolve(row, status=status, updated_at_ms=ended, last_seq=3)
    store.commit(
        CommitBatch(executions=[ExecutionChange(eid, done, [ev.WorkflowCompleted(3, ended, 1)])])
    )


def test_a_sweep_archives_then_deletes_what_is_old_enough(tmp_path: Path) -> None:
    store = MemoryStore()
    for i in range(7):
        finished(store, f"old-{i}", 1000 + i)
    finished(store, "young", 9_500)
    archive = DirectoryArchive(tmp_path)
    sweeper = Sweeper(store, archive, 5000, clock=lambda: 10_000, batch=3, pause_s=0)
    assert sweep(sweeper).swept == 7
    assert store.execution_row("old-0") is None and store.execution_row("young") is not None
    found = archive.get("old-3")
    assert found is not None and found.document["status"] == "COMPLETED"
    assert found.runs[0]["events"][-1]["type"] == "WorkflowCompleted"
    assert (sweeper.swept_total, sweeper.archived_total) == (7, 7)
    assert sweeper.oldest_eligible_age_s() == 0.0
    assert sweep(sweeper).swept == 0


def test_the_gauge_shows_what_waits(tmp_path: Path) -> None:
    store = MemoryStore()
    finished(store, "a", 1000)
    now = [7000]
    sweeper = Sweeper(store, NoArchive(), 5000, clock=lambda: now[0])
    sweeper._oldest_eligible_ms = 1000  # as a sweep that fell behind leaves it
    assert sweeper.oldest_eligible_age_s() == 1.0
    summary = sweep(sweeper)
    assert (summary.swept, summary.archived, sweeper.archived_total) == (1, 0, 0)


class BrokenArchive(NoArchive):
    location = "broken"

    def write(self, executions: Sequence[ArchivedExecution]) -> None:
        raise OSError(28, "No space left on device")


def test_nothing_is_deleted_when_the_archive_cannot_write() -> None:
    store = MemoryStore()
    finished(store, "a", 1000)
    sweeper = Sweeper(store, BrokenArchive(), 10, clock=lambda: 5000)
    with pytest.raises(OSError):
        sweeper.sweep()
    assert store.execution_row("a") is not None and sweeper.swept_total == 0


def deployed(store: MemoryStore, definition_hash: str, retention_ms: int | None) -> None:
    ir: JsonObject = {"name": "Wf", "version": definition_hash}
    if retention_ms is not None:
        ir["retention_ms"] = retention_ms
    store.commit(
        CommitBatch(definitions=[DefinitionRow("Wf", definition_hash, definition_hash, ir, 0)])
    )


def finished_of(store: MemoryStore, eid: str, ended: int, definition_hash: str) -> None:
    created = ev.WorkflowCreated(1, 0, "Wf", "1.0.0", definition_hash, {})
    row = ExecutionRow(eid, "Wf", "1.0.0", definition_hash, "RUNNING", 0, 0, 2)
    store.commit(
        CommitBatch(
            executions=[ExecutionChange(eid, row, [created, ev.WorkflowStarted(2, 0)], new=True)]
        )
    )
    done = attrs.evolve(row, status="COMPLETED", updated_at_ms=ended, last_seq=3)
    store.commit(
        CommitBatch(executions=[ExecutionChange(eid, done, [ev.WorkflowCompleted(3, ended, 1)])])
    )


def test_a_workflow_retention_comes_between_the_execution_own_and_the_server() -> None:
    store = MemoryStore()
    deployed(store, "sha256:short", 1_000)
    deployed(store, "sha256:long", 100_000)
    deployed(store, "sha256:plain", None)
    finished_of(store, "short", 5_000, "sha256:short")  # its workflow's 1 s has passed
    finished_of(store, "long", 5_000, "sha256:long")  # 100 s have not
    finished_of(store, "plain", 5_000, "sha256:plain")  # the server's 10 s have not
    finished_of(store, "own", 5_000, "sha256:long")
    store.set_retention("own", 500)  # its own start-time retention wins
    sweeper = Sweeper(store, NoArchive(), 10_000, clock=lambda: 8_000, pause_s=0)
    assert sweeper.declared_retentions() == {"sha256:short": 1_000, "sha256:long": 100_000}
    assert sweep(sweeper).swept == 2
    assert store.execution_row("short") is None and store.execution_row("own") is None
    assert store.execution_row("long") is not None and store.execution_row("plain") is not None


class Gate:
    """A stand-in for shared mode's advisory lock."""

    def __init__(self, free: bool = True) -> None:
        self.free = free
        self.holds = False
        self.lose_after = -1  # held() turns False after this many checks

    def try_take(self) -> bool:
        self.holds = self.free
        return self.free

    def held(self) -> bool:
        self.lose_after -= 1
        return self.holds and self.lose_after != -1

    def release(self) -> None:
        self.holds = False

    def close(self) -> None:
        self.holds = False


def test_only_the_holder_of_the_gate_sweeps(tmp_path: Path) -> None:
    store = MemoryStore()
    for i in range(4):
        finished(store, f"x-{i}", 1000 + i)
    sweeper = Sweeper(None, DirectoryArchive(tmp_path), 10, clock=lambda: 9_000, pause_s=0, batch=2)
    assert sweeper.sweep() is None  # no store: a standby cluster's follower
    taken = Gate(free=False)
    sweeper.attach(store, taken)
    assert sweeper.sweep() is None and store.execution_row("x-0") is not None
    lost = Gate()
    lost.lose_after = 1  # held for the first batch, lost before the second's delete
    sweeper.attach(store, lost)
    summary = sweep(sweeper)
    assert (summary.swept, summary.archived) == (2, 4)
    assert store.execution_row("x-1") is None and store.execution_row("x-2") is not None
    assert not lost.holds  # released after the sweep
    sweeper.attach(store, Gate())
    assert sweep(sweeper).swept == 2  # the next holder archives them again, then deletes
    sweeper.detach()
    assert sweeper.sweep() is None


def test_an_archived_execution_keeps_its_search_rows(tmp_path: Path) -> None:
    from orbit_core.visibility.fields import SearchValue

    store = MemoryStore()
    created = ev.WorkflowCreated(1, 0, "Wf", "1.0.0", "sha256:x", {"customer": "c-1"})
    row = ExecutionRow("s", "Wf", "1.0.0", "sha256:x", "COMPLETED", 0, 1000, 2)
    customer = SearchValue("customer", "c-1", None)
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(
                    "s",
                    row,
                    [created, ev.WorkflowCompleted(2, 1000, 1)],
                    new=True,
                    search=[customer],
                )
            ]
        )
    )
    finished(store, "plain", 1000)
    archive = DirectoryArchive(tmp_path)
    assert sweep(Sweeper(store, archive, 10, clock=lambda: 5000)).swept == 2
    kept = archive.get("s")
    assert kept is not None and kept.search == (customer,)
    plain = archive.get("plain")
    assert plain is not None and plain.search == ()


def test_the_pace_backs_off_while_engine_writes_queue_and_recovers() -> None:
    from orbit_server.retention import Pace

    pace = Pace(0.01, most=0.5, ratio=3.0)
    # Never shorter than three times the step itself.
    assert pace.after(0.02, 0.0) == pytest.approx(0.06)
    # Engine writes waited: the pause doubles, up to the most.
    assert pace.after(0.0, 0.01) == pytest.approx(0.01)  # a short wait is no reason
    assert [pace.after(0.0, 0.03) for _ in range(7)] == pytest.approx(
        [0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5]
    )
    # None waited: it halves back to the least.
    assert [pace.after(0.0, 0.0) for _ in range(7)][-1] == pytest.approx(0.01)


def test_deletes_follow_the_archive_in_small_transactions(tmp_path: Path) -> None:
    """A chunk is archived whole (one write) before any of it is deleted,
    then deleted `batch` at a time."""
    store = MemoryStore()
    for i in range(7):
        finished(store, f"old-{i}", 1000 + i)
    order: list[str] = []
    archive = DirectoryArchive(tmp_path)
    write, delete = archive.write, store.delete_executions

    def archived(records: Sequence[ArchivedExecution]) -> None:
        order.append(f"archive {len(records)}")
        write(records)

    def deleted(ids: Sequence[str]) -> int:
        order.append(f"delete {len(ids)}")
        return delete(ids)

    archive.write = archived  # type: ignore[method-assign, assignment]
    store.delete_executions = deleted  # type: ignore[method-assign, assignment]
    sweeper = Sweeper(store, archive, 10, clock=lambda: 5000, batch=2, archive_batch=5, pause_s=0)
    assert sweep(sweeper).swept == 7
    assert order == [
        "archive 5",
        "delete 2",
        "delete 2",
        "delete 1",
        "archive 2",
        "delete 2",
    ]
