"""Recovery on start: load the definitions and every running execution into
memory, then resume what the previous process left in flight."""

from __future__ import annotations

from collections.abc import Iterable

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.api import (
    UNIT_DISPATCHED,
)
from orbit_core.engine.catalog import Catalog
from orbit_core.engine.commands import Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.workers import Workers
from orbit_core.plan import Plan
from orbit_core.ports import DefinitionRow
from orbit_core.state import fold

BUILTIN_RESTART_REASON = "runtime restarted while the built-in task was running"


def load(executions: Executions, workers: Workers, now: int) -> tuple[int, int]:
    """Loads the store into memory; returns how many executions were
    recovered and how many of their attempts were in flight at a worker."""
    store = executions.store
    add_definitions(executions.catalog, store.load_definitions())
    rates = store.load_rates()
    executions.gates.load(rates)
    executions.gate.rates.load(rates)
    recovered = 0
    in_flight: list[str] = []
    for eid, events in store.load_active():
        state = fold(events, eid)
        if executions.adopt(state) is None:
            continue
        recovered += 1
        for event in events:
            if isinstance(event, ev.StepDispatched):
                workers.issued_to[event.token] = event.worker_id
        for unit in state.units.values():
            if unit.status == UNIT_DISPATCHED and unit.token is not None:
                session = unit.worker_session or ""
                if not session.startswith(("child:", "builtin:")):
                    in_flight.append(unit.token)
    workers.expect_reports(in_flight, now + workers.session_timeout_ms)
    return recovered, len(in_flight)


def add_definitions(catalog: Catalog, rows: Iterable[DefinitionRow]) -> int:
    """Adds the stored definitions `catalog` does not hold yet (at recovery,
    and when other servers deploy into the same store); returns how many.
    A document that no longer reads as IR is left out."""
    added = 0
    for row in rows:
        if catalog.by_hash(row.definition_hash) is not None:
            continue
        try:
            catalog.add(Plan(ir.from_json(row.ir)))
        except ir.IRError:
            continue
        added += 1
    return added


def resume(tx: Tx, executions: Executions, workers: Workers) -> None:
    """Built-in attempts died with the process; children and built-ins that
    were scheduled start again; every execution is decided once."""
    for live in executions.memory.all():
        state = live.state
        for unit in list(state.units.values()):
            if unit.status == UNIT_DISPATCHED and (unit.worker_session or "").startswith(
                "builtin:"
            ):
                workers.make_uncertain(tx, unit.token or "", BUILTIN_RESTART_REASON)
    executions.route_unrouted(tx)
    executions.children.resume(tx)
    executions.children.reconcile(tx)
    for live in executions.memory.all():
        if not live.state.terminal:
            executions.decide(tx, live)
