"""An in-memory store: the fake used by tests and by `orbit test`, and the
`--store memory` of the benchmarks. Nothing survives the process, but the
contract (one batch at a time, histories per run, the projection) is the
same as the SQL stores'."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import attrs

from orbit_core import events as ev
from orbit_core.events import Event
from orbit_core.ports import (
    CommitBatch,
    DefinitionRow,
    ExecutionRow,
    IdempotencyRow,
    PauseMark,
    RateRow,
    ScheduleAdvance,
    ScheduleRow,
    WorkerRow,
    pause_marks,
)
from orbit_core.state import TERMINAL
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.query import SearchQuery, in_page, matches


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._definitions: dict[tuple[str, str], DefinitionRow] = {}
        self._events: dict[str, list[Event]] = {}
        self._runs: dict[str, dict[int, list[Event]]] = {}
        self._rows: dict[str, ExecutionRow] = {}
        self._workers: dict[str, WorkerRow] = {}
        self._schedules: dict[str, ScheduleRow] = {}
        self._retention: dict[str, int] = {}
        # The search index (orbit_core.visibility): execution -> field -> row.
        self._search: dict[str, dict[str, SearchValue]] = {}
        # Idempotency keys of starts (engine/idempotency.py).
        self._idempotency: dict[str, IdempotencyRow] = {}
        # Buckets of start rates (orbit_core/flow/rate.py).
        self._rates: dict[tuple[str, str], RateRow] = {}

    def _share(self, other: MemoryStore) -> None:
        """Makes this store another view of `other`'s rows: the servers of
        memory_cluster.py share one database."""
        self._lock = other._lock
        self._definitions = other._definitions
        self._events = other._events
        self._runs = other._runs
        self._rows = other._rows
        self._workers = other._workers
        self._schedules = other._schedules
        self._search = other._search
        self._idempotency = other._idempotency
        self._rates = other._rates

    def load_definitions(self) -> list[DefinitionRow]:
        with self._lock:
            return sorted(self._definitions.values(), key=lambda d: d.created_at_ms)

    def load_active(self) -> list[tuple[str, list[Event]]]:
        with self._lock:
            return [
                (eid, list(self._events[eid]))
                for eid, row in self._rows.items()
                if row.status not in TERMINAL
            ]

    def commit(self, batch: CommitBatch) -> None:
        with self._lock:
            for d in batch.definitions:
                if d.replaces:
                    self._definitions[(d.name, d.version)] = d
                else:
                    self._definitions.setdefault((d.name, d.version), d)
            for change in batch.executions:
                eid = change.execution_id
                current = self._events.setdefault(eid, [])
                if change.archive_run is not None:
                    current.extend(change.archived)
                    self._runs.setdefault(eid, {})[change.archive_run] = current
                    current = self._events[eid] = []
                current.extend(change.events)
                row = change.row
                row.run = len(self._runs.get(eid, ())) + 1
                self._rows[eid] = row
                if change.search:
                    index = self._search.setdefault(eid, {})
                    for value in change.search:
                        index[value.field] = value
                if change.idempotency is not None:
                    self._idempotency[change.idempotency.key] = change.idempotency
            for w in batch.workers:
                self._workers[w.worker_id] = w
            for rate in batch.rates:
                self._rates[(rate.workflow, rate.key)] = rate

    def history(self, execution_id: str, run: int | None = None) -> list[Event] | None:
        with self._lock:
            row = self._rows.get(execution_id)
            if row is None:
                return None
            if run is None or run == row.run:
                return list(self._events.get(execution_id, ()))
            archived = self._runs.get(execution_id, {}).get(run)
            return None if archived is None else list(archived)

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        with self._lock:
            return self._rows.get(execution_id)

    def find_idempotency(self, key: str, now_ms: int) -> IdempotencyRow | None:
        with self._lock:
            row = self._idempotency.get(key)
        return row if row is not None and row.expires_ms >= now_ms else None

    def load_rates(self) -> list[RateRow]:
        with self._lock:
            return list(self._rates.values())

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        with self._lock:
            rows = [self._rows.get(eid) for eid in execution_ids]
        return {row.execution_id: row.definition_hash for row in rows if row is not None}

    def list_executions(
        self, status: str | None, workflow: str | None, limit: int
    ) -> list[ExecutionRow]:
        with self._lock:
            rows = [
                r
                for r in self._rows.values()
                if (status is None or r.status == status)
                and (workflow is None or r.workflow == workflow)
            ]
        rows.sort(key=lambda r: (r.created_at_ms, r.execution_id), reverse=True)
        return rows[:limit]

    def search_executions(self, query: SearchQuery) -> list[ExecutionRow]:
        none: dict[str, SearchValue] = {}
        with self._lock:
            rows = [
                r
                for r in self._rows.values()
                if in_page(query, r)
                and (
                    query.filter is None
                    or matches(query.filter, r, self._search.get(r.execution_id, none))
                )
            ]
        rows.sort(key=lambda r: (r.created_at_ms, r.execution_id), reverse=True)
        return rows[: query.limit]

    def pauses(self, execution_ids: list[str]) -> dict[str, PauseMark]:
        with self._lock:
            pairs = [
                (eid, event)
                for eid in execution_ids
                for event in self._events.get(eid, ())
                if isinstance(event, (ev.WorkflowPaused, ev.WorkflowResumed))
            ]
        return pause_marks(pairs)

    # ---- retention (ports.RetentionStore)

    def prepare_retention(self) -> None:
        return None

    def set_retention(self, execution_id: str, retention_ms: int) -> None:
        with self._lock:
            self._retention[execution_id] = retention_ms

    def retention_candidates(
        self,
        now_ms: int,
        retention_ms: int,
        limit: int,
        after: tuple[int, str] | None = None,
        by_definition: Mapping[str, int] | None = None,
    ) -> list[ExecutionRow]:
        own = by_definition or {}

        def kept_for(r: ExecutionRow) -> int:
            found = self._retention.get(r.execution_id)
            return found if found is not None else own.get(r.definition_hash, retention_ms)

        with self._lock:
            kept = {r.last_execution_id for r in self._schedules.values()}
            rows = sorted(
                (
                    r
                    for r in self._rows.values()
                    if r.status in TERMINAL
                    and r.updated_at_ms + kept_for(r) < now_ms
                    and r.execution_id not in kept
                    and (after is None or (r.updated_at_ms, r.execution_id) > after)
                    and not self._parent_running(r.execution_id)
                ),
                key=lambda r: (r.updated_at_ms, r.execution_id),
            )
        return rows[:limit]

    def _parent_running(self, execution_id: str) -> bool:
        events = self._events.get(execution_id)
        parent = getattr(events[0], "parent", None) if events else None
        if parent is None:
            return False
        row = self._rows.get(parent["execution_id"])
        return row is not None and row.status not in TERMINAL

    def retention_histories(
        self, execution_ids: Sequence[str]
    ) -> list[tuple[ExecutionRow, list[list[Event]]]]:
        out: list[tuple[ExecutionRow, list[list[Event]]]] = []
        with self._lock:
            for eid in execution_ids:
                row = self._rows.get(eid)
                if row is None:
                    continue
                runs = self._runs.get(eid, {})
                history = [list(runs[n]) for n in sorted(runs)] + [list(self._events[eid])]
                out.append((row, history))
        return out

    def retention_search_values(self, execution_ids: Sequence[str]) -> dict[str, list[SearchValue]]:
        with self._lock:
            return {
                eid: list(found.values())
                for eid in execution_ids
                if (found := self._search.get(eid))
            }

    def delete_executions(self, execution_ids: Sequence[str]) -> int:
        deleted = 0
        with self._lock:
            for eid in dict.fromkeys(execution_ids):
                row = self._rows.get(eid)
                if row is None or row.status not in TERMINAL:
                    continue
                del self._rows[eid]
                self._events.pop(eid, None)
                self._runs.pop(eid, None)
                self._retention.pop(eid, None)
                self._search.pop(eid, None)
                deleted += 1
        return deleted

    def list_workers(self) -> list[WorkerRow]:
        with self._lock:
            return sorted(self._workers.values(), key=lambda w: w.worker_id)

    # ---- schedules

    def load_schedules(self) -> list[ScheduleRow]:
        with self._lock:
            return [self._schedules[k] for k in sorted(self._schedules)]

    def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        with self._lock:
            return self._schedules.get(schedule_id)

    def insert_schedule(self, row: ScheduleRow) -> bool:
        with self._lock:
            if row.schedule_id in self._schedules:
                return False
            self._schedules[row.schedule_id] = row
            return True

    def update_schedule(self, row: ScheduleRow) -> bool:
        with self._lock:
            old = self._schedules.get(row.schedule_id)
            if old is None:
                return False
            self._schedules[row.schedule_id] = attrs.evolve(
                old,
                spec=row.spec,
                paused=row.paused,
                next_fire_ms=row.next_fire_ms,
                due_ms=row.due_ms,
                last_error=row.last_error,
                updated_at_ms=row.updated_at_ms,
                claimed_by=None,
                claimed_until_ms=None,
            )
            return True

    def delete_schedule(self, schedule_id: str) -> bool:
        with self._lock:
            return self._schedules.pop(schedule_id, None) is not None

    def claim_schedules(
        self, claims: list[tuple[str, int]], owner: str, until_ms: int, now_ms: int
    ) -> list[str]:
        claimed = []
        with self._lock:
            for sid, occurrence in claims:
                row = self._schedules.get(sid)
                if (
                    row is None
                    or row.paused
                    or row.next_fire_ms != occurrence
                    or (row.claimed_by is not None and (row.claimed_until_ms or 0) >= now_ms)
                ):
                    continue
                self._schedules[sid] = attrs.evolve(
                    row, claimed_by=owner, claimed_until_ms=until_ms
                )
                claimed.append(sid)
        return claimed

    def advance_schedules(self, advances: list[ScheduleAdvance], owner: str) -> list[str]:
        applied = []
        with self._lock:
            for a in advances:
                row = self._schedules.get(a.schedule_id)
                if row is None or row.claimed_by != owner or row.next_fire_ms != a.occurrence_ms:
                    continue
                self._schedules[a.schedule_id] = attrs.evolve(
                    row,
                    next_fire_ms=a.next_fire_ms,
                    due_ms=a.due_ms,
                    last_fire_ms=row.last_fire_ms if a.last_fire_ms is None else a.last_fire_ms,
                    last_execution_id=a.last_execution_id or row.last_execution_id,
                    fired=row.fired + a.fired,
                    skipped=row.skipped + a.skipped,
                    last_error=a.last_error,
                    updated_at_ms=a.updated_at_ms,
                    claimed_by=None,
                    claimed_until_ms=None,
                )
                applied.append(a.schedule_id)
        return applied

    def record_schedule_trigger(self, schedule_id: str, execution_id: str, now_ms: int) -> bool:
        with self._lock:
            row = self._schedules.get(schedule_id)
            if row is None:
                return False
            self._schedules[schedule_id] = attrs.evolve(
                row, fired=row.fired + 1, last_execution_id=execution_id, updated_at_ms=now_ms
            )
            return True

    def record_schedule_skip(self, schedule_id: str, now_ms: int) -> bool:
        with self._lock:
            row = self._schedules.get(schedule_id)
            if row is None:
                return False
            self._schedules[schedule_id] = attrs.evolve(
                row, skipped=row.skipped + 1, updated_at_ms=now_ms
            )
            return True

    def release_schedule_claims(self) -> None:
        with self._lock:
            for sid, row in list(self._schedules.items()):
                if row.claimed_by is not None:
                    self._schedules[sid] = attrs.evolve(row, claimed_by=None, claimed_until_ms=None)

    def close(self) -> None:
        pass
