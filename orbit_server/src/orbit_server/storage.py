"""The store as the server uses it: every storage error is logged.

The store adapters raise StorageError and never log (orbit_store does not
depend on structlog). `LoggedStore` stands between the engine and the adapter,
so a failed store call is logged once, at `error`, with the operation and the
database, whichever engine thread made it (a request, the committer, a timer
or a handler), and then raised unchanged.

The adapter's notices (`on_notice`: "reconnected to PostgreSQL") are logged
at `warn`. It also serves readiness: `write_problem` is the adapter's answer
(None while writes work) when it has one. A change between writable and not
is logged the first time anyone notices it, by a commit or by a readiness
check. Every batch the store accepted goes on to `telemetry` (metrics, event
logs, traces), after the commit and before any caller hears of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from orbit_core import events as ev
from orbit_core.errors import StorageError
from orbit_core.ports import (
    CommitBatch,
    DefinitionRow,
    ExecutionRow,
    IdempotencyRow,
    PauseMark,
    RateRow,
    ScheduleAdvance,
    ScheduleRow,
    Store,
    WorkerRow,
)
from orbit_core.visibility.page import SearchQuery
from orbit_server.logs import enabled, logger
from orbit_server.telemetry import Telemetry

T = TypeVar("T")


class LoggedStore:
    """A `Store` that logs the storage errors of the one it wraps."""

    def __init__(self, store: Store, db: str, telemetry: Telemetry | None = None) -> None:
        self.inner = store
        # Told of every batch once the store has it (telemetry.py).
        self.telemetry = telemetry
        self.db = getattr(store, "path", db)
        self._problem: str | None = None
        self._log = logger()
        if hasattr(store, "on_notice"):
            store.on_notice = self._notice

    def _notice(self, message: str) -> None:
        # A reconnection means the database went away for a moment: a
        # warning in chapter 46's table.
        self._log.warning(message, db=self.db)

    def _run(self, op: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except StorageError as exc:
            self._log.error("storage error", op=op, db=self.db, error=exc.message)
            raise

    def commit(self, batch: CommitBatch) -> None:
        try:
            self.inner.commit(batch)
        except StorageError as exc:
            self._log.error("storage error", op="commit", db=self.db, error=exc.message)
            if enabled(logging.DEBUG):
                # What the failed group carried (it may have been taken after all).
                self._log.debug(
                    "commit failed",
                    executions=[c.execution_id for c in batch.executions],
                    offers=[f"{o.execution_id}/{o.unit_key}" for o in batch.offers],
                    receipts=list(batch.receipts),
                )
            self._problem = exc.message
            raise
        if self._problem is not None:
            self._writable_again()
        if self.telemetry is not None:
            self.telemetry.committed(batch)

    def write_problem(self) -> str | None:
        """Why the database cannot be written now, or None."""
        check: Callable[[], str | None] | None = getattr(self.inner, "write_problem", None)
        problem = check() if check is not None else None
        if problem is None and self._problem is not None:
            self._writable_again()
        elif problem is not None and self._problem is None:
            # Once per outage, not again for each new wording of it.
            self._log.error("the database cannot be written", db=self.db, error=problem)
            self._problem = problem
        return problem

    def _writable_again(self) -> None:
        self._problem = None
        self._log.info("the database accepts writes again", db=self.db)

    def load_definitions(self) -> list[DefinitionRow]:
        return self._run("load_definitions", self.inner.load_definitions)

    def load_active(self) -> list[tuple[str, list[ev.Event]]]:
        return self._run("load_active", self.inner.load_active)

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        return self._run("history", lambda: self.inner.history(execution_id, run))

    def execution_row(self, execution_id: str) -> ExecutionRow | None:
        return self._run("execution_row", lambda: self.inner.execution_row(execution_id))

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        read = getattr(self.inner, "execution_hashes", None)
        if read is None:  # one read per id, as the engine would make them
            rows = [self.execution_row(eid) for eid in execution_ids]
            return {r.execution_id: r.definition_hash for r in rows if r is not None}
        return self._run("execution_hashes", lambda: dict(read(execution_ids)))

    def find_idempotency(self, key: str, now_ms: int) -> IdempotencyRow | None:
        return self._run("find_idempotency", lambda: self.inner.find_idempotency(key, now_ms))

    def load_rates(self) -> list[RateRow]:
        return self._run("load_rates", self.inner.load_rates)

    def list_executions(
        self, status: str | None, workflow: str | None, limit: int
    ) -> list[ExecutionRow]:
        return self._run(
            "list_executions", lambda: self.inner.list_executions(status, workflow, limit)
        )

    def search_executions(self, query: SearchQuery) -> list[ExecutionRow]:
        return self._run("search_executions", lambda: self.inner.search_executions(query))

    def pauses(self, execution_ids: list[str]) -> dict[str, PauseMark]:
        return self._run("pauses", lambda: self.inner.pauses(execution_ids))

    def list_workers(self) -> list[WorkerRow]:
        return self._run("list_workers", self.inner.list_workers)

    def load_schedules(self) -> list[ScheduleRow]:
        return self._run("load_schedules", self.inner.load_schedules)

    def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        return self._run("get_schedule", lambda: self.inner.get_schedule(schedule_id))

    def insert_schedule(self, row: ScheduleRow) -> bool:
        return self._run("insert_schedule", lambda: self.inner.insert_schedule(row))

    def update_schedule(self, row: ScheduleRow) -> bool:
        return self._run("update_schedule", lambda: self.inner.update_schedule(row))

    def delete_schedule(self, schedule_id: str) -> bool:
        return self._run("delete_schedule", lambda: self.inner.delete_schedule(schedule_id))

    def claim_schedules(
        self, claims: list[tuple[str, int]], owner: str, until_ms: int, now_ms: int
    ) -> list[str]:
        return self._run(
            "claim_schedules", lambda: self.inner.claim_schedules(claims, owner, until_ms, now_ms)
        )

    def advance_schedules(self, advances: list[ScheduleAdvance], owner: str) -> list[str]:
        return self._run("advance_schedules", lambda: self.inner.advance_schedules(advances, owner))

    def record_schedule_trigger(self, schedule_id: str, execution_id: str, now_ms: int) -> bool:
        return self._run(
            "record_schedule_trigger",
            lambda: self.inner.record_schedule_trigger(schedule_id, execution_id, now_ms),
        )

    def record_schedule_skip(self, schedule_id: str, now_ms: int) -> bool:
        return self._run(
            "record_schedule_skip", lambda: self.inner.record_schedule_skip(schedule_id, now_ms)
        )

    def release_schedule_claims(self) -> None:
        self._run("release_schedule_claims", self.inner.release_schedule_claims)

    def close(self) -> None:
        self._run("close", self.inner.close)
