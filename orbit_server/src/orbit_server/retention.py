"""Retention: finished executions older than `--retention` are archived, then
deleted from the store, by a background thread (docs/retention.md).

The sweeper works on the store beside the engine, never through it: it asks
the store for candidates (`RetentionStore.retention_candidates`, which leaves
out a running parent's children and a schedule's last execution), reads
their histories, folds the state document itself (`orbit_core.state.fold`,
what the engine answers for an execution it no longer holds), hands the
chunk (`ARCHIVE_BATCH`) to the archive, which returns once it is on disk,
and only then deletes the chunk `BATCH` at a time, each delete its own
short transaction (`SqlStore.sweeper_write`: on PostgreSQL a connection of
its own; a commit that need not be durable, since a delete a crash undoes
only means the executions are archived again). Every step is followed by a
pause (`Pace`) that keeps the sweeper busy at most about two fifths of the
time and grows while the engine's writes queue behind it: the sweeper's
Python work competes with the engine's threads for the interpreter, and
its writes for the disk, so the p99 of starts holds during a sweep
(docs/retention.md, "What it costs").

It sweeps once at start and then every `SWEEP_INTERVAL_S` (the hidden
environment variable `ORBIT_RETENTION_SWEEP_INTERVAL`, in seconds, shortens
it for tests). A sweep that fails (the database away) is logged and tried
again at the next interval.

An execution's retention is its own (given at start), else its workflow's
(`retention` in the source: `retention_ms` of the definition, read from the
deployed definitions at every sweep), else the server's.

Several servers. The sweeper sweeps only while it has a store
(`attach`/`detach`) and, when it has a gate, while it holds it:
- standby mode: the leader attaches its fenced store when elected and
  detaches it when it steps down, so only the leader sweeps, and a deposed
  leader's delete is refused by the database (its term has passed);
- shared mode: every server has its store attached and a gate, a
  PostgreSQL advisory lock (orbit_store/sweeplock.py) taken for each sweep
  and checked before each batch's delete, so one server sweeps at a time.
Neither rests on the gate for safety: a batch is archived (fsynced) before
its delete, two writers of one archive take turns on its lock file
(orbit_server/archive.py), and a second copy of an execution is ignored by
readers.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from orbit_core import events as ev
from orbit_core.api import HistoryPage
from orbit_core.errors import OrbitError
from orbit_core.ports import ExecutionRow, RetentionStore, Store
from orbit_core.state import fold
from orbit_core.visibility.fields import SearchValue
from orbit_server.archive import Archive, ArchivedExecution

SWEEP_INTERVAL_S = 60.0
INTERVAL_ENV = "ORBIT_RETENTION_SWEEP_INTERVAL"
# Executions deleted per transaction, and the least pause after each.
BATCH = 50
PAUSE_S = 0.01
# Executions read and archived (one append and fsync) at a time, then
# deleted BATCH at a time: the archive's fsyncs, which share the disk with
# the engine's commits, come once per ARCHIVE_BATCH rather than per BATCH.
ARCHIVE_BATCH = 500
# The pace (`Pace`): after each step (reading a batch's histories and
# folding them, the archive's write, a delete) the sweeper pauses. The
# pause grows, up to MAX_PAUSE_S, while an engine write waited longer than
# WAIT_LIMIT_S for the write connection since the last step (the 20 ms by
# which issue 45 lets the p99 of starts rise; a commit waits for a short
# delete anyway, which is no reason to slow down), and shrinks
# back to the least when none did; and it is never shorter than HOLD_RATIO
# times the step itself, so the sweeper is busy at most about two fifths of
# the time: its Python work holds the interpreter lock the engine's threads
# need, and its writes hold the write connection. (Measured over a million
# on SQLite, docs/retention.md: 3.0 kept the p99 of starts within 2 ms but
# swept 320 a second; 1.5 swept 624 a second with the p99 9 ms up, within
# the 20 ms issue 45 allows.)
MAX_PAUSE_S = 0.5
WAIT_LIMIT_S = 0.02
HOLD_RATIO = 1.5
# SQLite pages (4 KiB) given back per step after a sweep: one short write each.
RECLAIM_PAGES = 128

T = TypeVar("T")


class SweepStore(Store, RetentionStore, Protocol):
    """A store the sweeper can read histories from and delete from."""


class SweepGate(Protocol):
    """Who may sweep among servers sharing one database (shared mode)."""

    def try_take(self) -> bool:
        """Takes the right to sweep if nobody holds it; False otherwise."""
        ...

    def held(self) -> bool:
        """Whether this server still holds it (checked before each delete)."""
        ...

    def release(self) -> None: ...

    def close(self) -> None: ...


@attrs.define(slots=True)
class Pace:
    """How long the sweeper pauses after each of its writes: backs off while
    the engine's writes queue behind it (module constants above)."""

    least: float
    most: float = MAX_PAUSE_S
    ratio: float = HOLD_RATIO
    pause: float = attrs.field(default=0.0)

    def __attrs_post_init__(self) -> None:
        self.pause = self.least

    def after(self, held_s: float, waited_s: float) -> float:
        """The pause after a write that held the connection `held_s`, when
        the engine's writes waited up to `waited_s` since the last one."""
        if waited_s > WAIT_LIMIT_S:
            self.pause = min(self.most, max(self.pause * 2, self.least * 2, 0.001))
        else:
            self.pause = max(self.least, self.pause / 2)
        return min(self.most, max(self.pause, held_s * self.ratio))


@attrs.frozen(slots=True)
class SweepSummary:
    swept: int
    archived: int
    seconds: float
    oldest_eligible_ms: int | None


class Sweeper:
    """Archives then deletes eligible executions; see the module docstring."""

    def __init__(
        self,
        store: Any | None,
        archive: Archive,
        retention_ms: int,
        *,
        clock: Callable[[], int] | None = None,
        log: Any = None,
        interval_s: float | None = None,
        batch: int = BATCH,
        pause_s: float = PAUSE_S,
        archive_batch: int = ARCHIVE_BATCH,
        hold_ratio: float = HOLD_RATIO,
    ) -> None:
        self._store: SweepStore | None = None
        self._gate: SweepGate | None = None
        self.archive = archive
        self.retention_ms = retention_ms
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._log = log
        self._batch = batch
        self._archive_batch = max(archive_batch, batch)
        self._pause_s = pause_s
        self._hold_ratio = hold_ratio
        self.interval_s = interval_s if interval_s is not None else interval_from_env()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.swept_total = 0
        self.archived_total = 0
        self.sweeps = 0
        # The end time of the oldest execution eligible now (None: none).
        self._oldest_eligible_ms: int | None = None
        if store is not None:
            self.attach(store)

    def attach(self, store: Any, gate: SweepGate | None = None) -> None:
        """Sweeps `store` from now on (a single server's store; a standby
        cluster's leader's fenced store; a shared server's, with `gate`)."""
        store.prepare_retention()
        self._store, self._gate = store, gate

    def detach(self) -> None:
        """Stops sweeping (a standby cluster's leader stepping down): a sweep
        under way stops before its next batch."""
        self._store, gate = None, self._gate
        self._gate = None
        if gate is not None:
            gate.close()

    def remember(self, execution_id: str, retention_ms: int) -> None:
        """An execution's own retention (`"retention"` in its start request).
        Written after the start committed: a crash in between leaves the
        execution with the server's retention."""
        store = self._store
        if store is not None:  # None: a cluster server that stopped leading
            store.set_retention(execution_id, retention_ms)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="orbit-retention", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.detach()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                summary = self.sweep()
            except Exception as exc:  # the next interval tries again
                if self._log is not None:
                    self._log.warning("retention sweep failed", error=_message(exc))
            else:
                if summary is not None and self._log is not None:
                    self._log.info(
                        "retention sweep",
                        swept=summary.swept,
                        archived=summary.archived,
                        seconds=round(summary.seconds, 3),
                    )
            self._stop.wait(self.interval_s)

    def oldest_eligible_age_s(self) -> float:
        """How long ago the oldest execution eligible now became eligible
        (0 when none waits): a sweeper that falls behind shows here."""
        oldest = self._oldest_eligible_ms
        if oldest is None:
            return 0.0
        return max(0.0, (self._clock() - self.retention_ms - oldest) / 1000)

    def sweep(self) -> SweepSummary | None:
        """One pass over everything eligible now, a batch at a time; None
        when this server may not sweep now (no store, or the gate is held
        by another server)."""
        with self._lock:
            store, gate = self._store, self._gate
            if store is None:
                return None
            if gate is not None and not gate.try_take():
                return None
            try:
                return self._sweep(store, gate)
            finally:
                if gate is not None:
                    gate.release()

    def _sweep(self, store: SweepStore, gate: SweepGate | None) -> SweepSummary:
        began = time.monotonic()
        now = self._clock()
        swept = archived = 0
        after: tuple[int, str] | None = None
        declared = self.declared_retentions(store)
        first = store.retention_candidates(now, self.retention_ms, 1, None, declared)
        self._oldest_eligible_ms = first[0].updated_at_ms if first else None
        pace = Pace(self._pause_s, ratio=self._hold_ratio)
        waited = getattr(store, "writes_waited_s", lambda: 0.0)
        stopped = False
        while not stopped and not self._stop.is_set() and self._store is store:
            rows = store.retention_candidates(
                now, self.retention_ms, self._archive_batch, after, declared
            )
            if not rows:
                break
            after = (rows[-1].updated_at_ms, rows[-1].execution_id)
            records: list[ArchivedExecution] = []
            for part in _slices(rows, self._batch):
                began_read = time.monotonic()
                records += self._records(store, part)
                self._stop.wait(pace.after(time.monotonic() - began_read, waited()))
            began_write = time.monotonic()
            self.archive.write(records)
            self._stop.wait(pace.after(time.monotonic() - began_write, waited()))
            count = 0 if self.archive.location == "none" else len(records)
            archived += count
            self.archived_total += count
            # Deleted in small transactions, each after the whole chunk is
            # in the archive; the pause between them leaves the write
            # connection to the engine's group commits.
            for chunk in _slices(records, self._batch):
                if self._stop.is_set() or self._store is not store:
                    stopped = True
                    break  # archived, not deleted: the next sweep takes them again
                if gate is not None and not gate.held():
                    stopped = True
                    break
                began_delete = time.monotonic()
                deleted = store.delete_executions([r.execution_id for r in chunk])
                held = time.monotonic() - began_delete
                swept += deleted
                self.swept_total += deleted
                self._stop.wait(pace.after(held, waited()))
        if swept:
            self._reclaim(store, pace, waited)
        self.sweeps += 1
        left = store.retention_candidates(now, self.retention_ms, 1, None, declared)
        self._oldest_eligible_ms = left[0].updated_at_ms if left else None
        return SweepSummary(swept, archived, time.monotonic() - began, self._oldest_eligible_ms)

    def _reclaim(self, store: SweepStore, pace: Pace, waited: Callable[[], float]) -> None:
        """SQLite: gives the pages the sweep freed back to the file system,
        `RECLAIM_PAGES` at a time, paced like the deletes (PostgreSQL's
        autovacuum needs nothing from us)."""
        reclaim = getattr(store, "reclaim_space", None)
        if reclaim is None:
            return
        while not self._stop.is_set() and self._store is store:
            began = time.monotonic()
            if reclaim(RECLAIM_PAGES) == 0:
                break
            self._stop.wait(pace.after(time.monotonic() - began, waited()))

    def declared_retentions(self, store: SweepStore | None = None) -> dict[str, int]:
        """The `retention` each deployed definition declares, by hash (read
        at every sweep, so a definition deployed since counts)."""
        source = store if store is not None else self._store
        if source is None:
            return {}
        return {
            row.definition_hash: value
            for row in source.load_definitions()
            if isinstance(value := row.ir.get("retention_ms"), int) and value > 0
        }

    def _records(self, store: SweepStore, rows: Sequence[ExecutionRow]) -> list[ArchivedExecution]:
        ids = [r.execution_id for r in rows]
        found = store.retention_histories(ids)
        values = store.retention_search_values(ids)
        return [
            record(row, runs, values.get(row.execution_id, ()))
            for row, runs in found
            if runs and runs[-1]
        ]


def _slices(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), max(size, 1)):
        yield items[start : start + size]


def record(
    row: ExecutionRow, runs: list[list[ev.Event]], search: Sequence[SearchValue] = ()
) -> ArchivedExecution:
    """The archive record of an execution: its state document folded from
    the last run, each run's history page and its search index rows."""
    eid = row.execution_id
    pages: list[HistoryPage] = []
    for number, events in enumerate(runs, 1):
        page: HistoryPage = {"execution_id": eid, "events": [ev.to_json(e) for e in events]}
        if len(runs) > 1:
            page["run"] = number
        pages.append(page)
    document = fold(runs[-1], eid).to_json()
    return ArchivedExecution(
        row.to_json(), row.definition_hash, document, tuple(pages), tuple(search)
    )


def interval_from_env() -> float:
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        value = float(raw) if raw else SWEEP_INTERVAL_S
    except ValueError:
        return SWEEP_INTERVAL_S
    return min(max(value, 0.05), SWEEP_INTERVAL_S)


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, OrbitError) else f"{type(exc).__name__}: {exc}"
