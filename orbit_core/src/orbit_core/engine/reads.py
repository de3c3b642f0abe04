"""Reads: histories, queries and waits for an execution to finish.

A read of what memory holds (a running execution, a parked wait) runs as a
command of a group, after its writes, and is answered after its commit, so it
only ever sees committed state. A read that only the store can answer (a
history, a listing, an execution no longer in memory) runs on the caller's
thread instead, outside any group: the store holds only committed state too,
and a group's leader never waits on a database read made for somebody else
(on a database server, a round trip per read while every other command waits)."""

from __future__ import annotations

from orbit_core import evaluate as _evaluate
from orbit_core import events as ev
from orbit_core.api import (
    EXEC_CONTINUED_AS_NEW,
    HistoryPage,
    QueryAnswer,
)
from orbit_core.engine.commands import Command, Parked
from orbit_core.engine.executions import Executions
from orbit_core.engine.live import Live
from orbit_core.engine.pipeline import GroupCommit
from orbit_core.errors import InvalidError, NotFoundError, not_found

DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 300_000
# What a command answers when only the store knows the execution.
STORED: object = object()


class Reads:
    def __init__(self, executions: Executions, pipeline: GroupCommit) -> None:
        self._x = executions
        self._pipeline = pipeline
        # Parked waits, by execution id.
        self._waiters: dict[str, list[Command]] = {}

    def events(self, execution_id: str, run: int | None) -> list[ev.Event]:
        store = self._x.store
        row = store.execution_row(execution_id)
        if row is None:
            raise not_found(execution_id)
        if run is not None and not 1 <= run <= row.run:
            raise NotFoundError(
                f"execution `{execution_id}` has runs 1 to {row.run}; there is no run {run}",
                "RUN_NOT_FOUND",
            )
        return store.history(execution_id, run) or []

    def history(self, execution_id: str, run: int | None) -> HistoryPage:
        events = self.events(execution_id, run)
        out: HistoryPage = {
            "execution_id": execution_id,
            "events": [ev.to_json(e) for e in events],
        }
        current = events[0].run if events and isinstance(events[0], ev.WorkflowCreated) else None
        if run is not None or (current or 1) > 1:
            out["run"] = run if run is not None else current
        return out

    def query(self, execution_id: str, name: str) -> QueryAnswer:
        state = self._x.state_of(execution_id)
        plan = self._x.catalog.by_hash(state.definition_hash)
        if plan is None:
            raise not_found(execution_id)
        defn = plan.defn
        query = defn.query(name)
        if query is None:
            names = ", ".join(q.name for q in defn.queries)
            message = (
                f"{defn.key} has no query `{name}`; declared: {names}"
                if names
                else f"{defn.key} declares no queries"
            )
            raise NotFoundError(message, "UNKNOWN_QUERY")
        scope = _evaluate.Scope(
            input=state.input,
            execution={"id": state.id, "workflow": state.workflow, "version": state.version},
            steps=state.outputs,
        )
        try:
            value = _evaluate.evaluate(query.expr, scope)
        except _evaluate.EvalError as exc:
            raise InvalidError(f"evaluating query `{name}`: {exc}", "QUERY_FAILED") from None
        return {"execution_id": execution_id, "query": name, "value": value}

    def park_wait(self, execution_id: str, cmd: Command) -> object:
        """The state document of a finished execution, PENDING once parked,
        or STORED for an execution memory does not hold (its caller reads it
        from the store, outside the group)."""
        live = self._x.memory.get(execution_id)
        if live is None:
            return STORED
        if live.state.terminal and live.state.status != EXEC_CONTINUED_AS_NEW:
            return live.state.to_json()
        pending = self._pipeline.park(cmd)
        waiters = [c for c in self._waiters.get(execution_id, ()) if c.parked is Parked.WAITING]
        waiters.append(cmd)
        self._waiters[execution_id] = waiters
        return pending

    def expire_all(self) -> None:
        """Ends every parked wait; each caller answers with the state as it is."""
        # A snapshot: the group leader owns the dict; expired entries are
        # dropped by it later, like waits that timed out.
        parked = [cmd for waiters in list(self._waiters.values()) for cmd in list(waiters)]
        for cmd in parked:
            self._pipeline.expire(cmd)

    def finished(self, live: Live) -> None:
        """Answers the waits of an execution whose end was committed."""
        waiters = self._waiters.pop(live.state.id, None)
        if waiters:
            doc = live.state.to_json()
            for cmd in waiters:
                if self._pipeline.claim(cmd):
                    cmd.result = doc
                    self._pipeline.finish(cmd)
