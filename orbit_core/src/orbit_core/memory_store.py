"""An in-memory store: the fake used by tests and by `orbit test`, and the
`--store memory` of the benchmarks. Nothing survives the process, but the
contract (one batch at a time, histories per run, the projection) is the
same as the SQL stores'."""

from __future__ import annotations

import threading

from orbit_core.events import Event
from orbit_core.ports import CommitBatch, DefinitionRow, ExecutionRow, WorkerRow
from orbit_core.state import TERMINAL


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._definitions: dict[tuple[str, str], DefinitionRow] = {}
        self._events: dict[str, list[Event]] = {}
        self._runs: dict[str, dict[int, list[Event]]] = {}
        self._rows: dict[str, ExecutionRow] = {}
        self._workers: dict[str, WorkerRow] = {}

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
            for w in batch.workers:
                self._workers[w.worker_id] = w

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

    def list_workers(self) -> list[WorkerRow]:
        with self._lock:
            return sorted(self._workers.values(), key=lambda w: w.worker_id)

    def close(self) -> None:
        pass
