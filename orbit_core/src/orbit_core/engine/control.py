"""Commands that start or steer executions: start, cancel and signal."""

from __future__ import annotations

import re

from orbit_core import events as ev
from orbit_core import ir
from orbit_core import values as _values
from orbit_core.api import ExecutionDoc, SignalAccepted, Started
from orbit_core.engine.commands import Command, Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.idempotency import Idempotency
from orbit_core.errors import (
    ConflictError,
    InvalidError,
    LimitError,
    NotFoundError,
    StorageError,
)
from orbit_core.jsontypes import JsonValue

DEFAULT_CANCEL_REASON = "requested via API"
_EXECUTION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


class Control:
    def __init__(
        self,
        executions: Executions,
        max_active_executions: int | None,
        idempotency: Idempotency | None = None,
    ) -> None:
        self._x = executions
        self._max_active = max_active_executions
        self.idempotency = idempotency or Idempotency(executions.store)

    def start(
        self,
        tx: Tx,
        *,
        workflow: str,
        version: str | None,
        input: JsonValue,
        execution_id: str | None,
        schedule_id: str | None,
        idempotency_key: str | None = None,
    ) -> Started:
        """Checks in the order of RULINGS §18, then creates and decides.
        An idempotency key is checked once the workflow is known, before
        the execution id: a key that names an execution answers for it."""
        x = self._x
        if execution_id is not None:
            self.check_id(execution_id)
        plan = x.catalog.find(workflow, version)
        if idempotency_key is not None:
            found = self.idempotency.existing(
                tx, idempotency_key, plan.defn.name, input, execution_id
            )
            if found is not None:
                return {"execution_id": found, "created": False}
        if execution_id is None:
            execution_id = x.ids.execution_id()
        else:
            existing_hash = self.existing_hash(execution_id, tx)
            if existing_hash is not None:
                if existing_hash == plan.defn.definition_hash:
                    return {"execution_id": execution_id, "created": False}
                raise ConflictError(
                    self._exists_message(execution_id, existing_hash, plan.defn),
                    "EXECUTION_EXISTS",
                )
        limits = x.limits.effective(plan)
        raw = {} if input is None else input
        try:
            value = _values.conform(raw, plan.defn.input, strict=True)
            error = None
        except _values.ValidationError as exc:
            value, error = raw, exc
        limits.check_payload("execution input", value)
        if error is not None:
            raise InvalidError(f"workflow input is invalid at {error}", "INVALID_INPUT")
        joined = x.gates.pending(plan, value, tx.now)
        if joined is not None:
            # A debounced workflow's start folded into the pending execution.
            pending, due = joined
            x.debounce(tx, pending, value, due)
            return {"execution_id": pending.state.id, "created": False}
        x.gates.refuse(plan, value, execution_id, tx.now)
        if self._max_active is not None and x.memory.active_top >= self._max_active:
            raise LimitError(
                f"{x.memory.active_top} executions are already running (--max-active-executions)",
                "RESOURCE_EXHAUSTED",
            )
        live = x.create(tx, execution_id, plan, value, parent=None, schedule_id=schedule_id)
        if idempotency_key is not None:
            self.idempotency.record(tx, idempotency_key, execution_id, plan.defn.name, input)
        x.counters.started += 1
        x.decide(tx, live)
        return {"execution_id": execution_id, "created": True}

    @staticmethod
    def check_id(execution_id: str) -> None:
        if not _EXECUTION_ID.match(execution_id):
            raise InvalidError(
                "execution_id must be 1 to 200 letters, digits, `-`, `_`, `.` or `:`",
                "INVALID_EXECUTION_ID",
            )

    def _exists_message(self, execution_id: str, existing_hash: str, wanted: ir.Definition) -> str:
        """The book's message, naming the version when the id belongs to the
        same workflow at another version (the usual slip after a bump), or
        to the definition a development server replaced."""
        existing = self._x.catalog.by_hash(existing_hash)
        workflow = wanted.name
        if existing is not None and existing.defn.key == wanted.key:
            return (
                f"execution `{execution_id}` already exists for an earlier definition of "
                f"{wanted.key}, since replaced (orbit server --dev)"
            )
        if existing is not None and existing.defn.name == workflow:
            return (
                f"execution `{execution_id}` already exists for "
                f"{workflow}@{existing.defn.version}, a different version"
            )
        return f"execution `{execution_id}` already exists for a different workflow"

    def look_up(self, tx: Tx, batch: list[Command]) -> None:
        """Reads the definition hashes of the stored executions that the
        group's starts name, in one store call instead of one per start
        (a lone start reads its own row). A failed read is left to each start,
        which reports it to its own caller."""
        known = self._x.memory.get
        ids = [c.lookup for c in batch if c.lookup is not None and known(c.lookup) is None]
        if len(ids) < 2:
            return  # a lone start reads its own row
        try:
            found = self._x.store.execution_hashes(ids)
        except StorageError:
            return
        tx.known = {eid: found.get(eid) for eid in ids}

    def existing_hash(self, execution_id: str, tx: Tx | None = None) -> str | None:
        """The definition hash of the execution `execution_id`, or None when
        there is none: in memory, among `tx`'s lookups, or in the store."""
        live = self._x.memory.get(execution_id)
        if live is not None:
            return live.state.definition_hash
        if tx is not None and execution_id in tx.known:
            return tx.known[execution_id]
        row = self._x.store.execution_row(execution_id)
        return row.definition_hash if row is not None else None

    def cancel(self, tx: Tx, execution_id: str, reason: str) -> ExecutionDoc:
        live = self._x.running(execution_id)
        if live.state.abort is None or live.state.paused:
            self._x.request_cancel(tx, live, reason)
        return live.state.to_json()

    def pause(self, tx: Tx, execution_id: str, reason: str | None) -> ExecutionDoc:
        """Holds a running execution: nothing is decided, dispatched or
        started for it until `resume` (docs/operating-executions.md)."""
        live = self._x.running(execution_id)
        state = live.state
        if state.paused_at_ms is not None:
            raise ConflictError(f"execution `{execution_id}` is already paused", "ALREADY_PAUSED")
        self._x.record(tx, live, ev.WorkflowPaused, reason)
        return state.to_json()

    def resume(self, tx: Tx, execution_id: str) -> ExecutionDoc:
        """Lets a paused execution go on: its queued work is offered again
        and what fell due while it was paused happens now."""
        live = self._x.running(execution_id)
        state = live.state
        if state.paused_at_ms is None:
            raise ConflictError(f"execution `{execution_id}` is not paused", "NOT_PAUSED")
        self._x.record(tx, live, ev.WorkflowResumed)
        self._x.route_scheduled(tx, live)
        self._x.decide(tx, live)
        return state.to_json()

    def signal(self, tx: Tx, execution_id: str, name: str, payload: JsonValue) -> SignalAccepted:
        live = self._x.running(execution_id)
        defn = live.plan.defn
        declared = defn.signal(name)
        if declared is None:
            names = ", ".join(s.name for s in defn.signals)
            detail = f"declared: {names}" if names else ""
            message = (
                f"{defn.key} has no signal `{name}`; {detail}"
                if names
                else f"{defn.key} declares no signals"
            )
            raise NotFoundError(message, "UNKNOWN_SIGNAL")
        payload = {} if payload is None else payload
        live.limits.check_payload("signal payload", payload)
        try:
            value = _values.conform(payload, declared.payload)
        except _values.ValidationError as exc:
            raise InvalidError(
                f"payload for signal `{name}` is invalid at {exc}", "SIGNAL_PAYLOAD_INVALID"
            ) from None
        seq = self._x.record(tx, live, ev.SignalReceived, name, value).seq
        self._x.decide(tx, live)
        return {"execution_id": execution_id, "signal": name, "accepted": True, "seq": seq}
