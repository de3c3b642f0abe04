"""Restart and fork (issue 38): commands that start a new run of an
execution, or a new execution, from a recorded run's outcomes.

A restart ends the execution's current run with `WorkflowRestarted` (a
running one stops there: its attempts in flight are abandoned, their tokens
forgotten so their results are stale and their workers are told to stop at
the next heartbeat, and its children are cancelled, as when a run continues
as new) and starts the next run with the same input, `StepRestored` events
for what it keeps, and the signals its kept steps did not consume. The run
is decided at once; a paused execution's new run starts paused. A fork writes the same start into a new execution, after
a `WorkflowForked` naming its source, and leaves the source as it is.

What is kept and what runs again is `orbit_core.restarts`' pure plan; here
it is checked (`EFFECTS_REPEATED` without `force`) and written."""

from __future__ import annotations

from orbit_core import events as ev
from orbit_core import restarts as plan_of
from orbit_core.api import ActionAnswer
from orbit_core.engine.commands import Tx
from orbit_core.engine.control import Control
from orbit_core.engine.executions import Executions
from orbit_core.engine.live import Live
from orbit_core.errors import ConflictError, InvalidError, NotFoundError
from orbit_core.ir import Definition
from orbit_core.restarts import Outline, RestartRefused
from orbit_core.state import ExecutionState

DEFAULT_RESTART_REASON = "requested via API"


class Restarts:
    def __init__(self, executions: Executions, control: Control) -> None:
        self._x = executions
        self._control = control

    # ---- restart

    def restart(
        self, tx: Tx, execution_id: str, step: str, *, dry_run: bool, force: bool, reason: str
    ) -> ActionAnswer:
        x = self._x
        live = x.memory.get(execution_id)
        state = live.state if live is not None else x.stored_state(execution_id)
        if state.parent is not None:
            raise ConflictError(
                f"execution `{execution_id}` is a child workflow; restart its parent instead",
                "CHILD_EXECUTION",
            )
        plan = live.plan if live is not None else x.catalog.by_hash(state.definition_hash)
        if plan is None:
            raise NotFoundError(
                f"the definition of execution `{execution_id}` is not registered",
                "WORKFLOW_NOT_FOUND",
            )
        outline = _outline(state, plan.defn, step, None, fork=False)
        answer = _answer(
            "restart", execution_id, execution_id, state.run + 1, defn=plan.defn, outline=outline
        )
        answer["dry_run"] = dry_run
        if dry_run:
            return answer
        _check_force(outline, force)
        if live is None:
            live = Live(state, plan, x.limits.effective(plan), True)
            x.memory.add(live)
        old = live.state
        # A run that holds a workflow concurrency slot keeps it; one that had
        # ended or was still waiting for a slot goes through admission.
        held = old.started and not old.terminal
        x.record(tx, live, ev.WorkflowRestarted, old.run + 1, step, reason)
        # The old run's children and attempts go with it.
        x.children.check(tx, live)
        change = tx.changes[old.id]
        change.archive_run = old.run
        change.archived = change.events
        change.events = []
        x.memory.release(old.tokens())
        live.finalized = False
        live.state = ExecutionState(old.id)
        live.due_at = None
        d = plan.defn
        x.record(
            tx,
            live,
            ev.WorkflowCreated,
            d.name,
            d.version,
            d.definition_hash,
            old.input,
            old.parent,
            old.schedule_id,
            old.run + 1,
        )
        wait = x.admission.rerun(live, held)
        if wait is None:
            x.record(tx, live, ev.WorkflowStarted)
        else:
            x.record(
                tx,
                live,
                ev.WorkflowWaiting,
                wait.reason,
                wait.key,
                wait.label,
                wait.limit,
                wait.ticket,
            )
        self._restore(tx, live, old, outline)
        if old.paused_at_ms is not None:
            # The pause is the operator's hold on the execution, not on
            # one run: the new run starts held, with the same reason, and
            # runs once resumed (docs/restart-and-fork.md).
            x.record(tx, live, ev.WorkflowPaused, old.pause_reason)
        x.decide(tx, live)
        answer["started"] = True
        return answer

    # ---- fork

    def fork(
        self,
        tx: Tx,
        execution_id: str,
        step: str,
        *,
        new_id: str | None,
        version: str | None,
        dry_run: bool,
        force: bool,
    ) -> ActionAnswer:
        x = self._x
        live = x.memory.get(execution_id)
        state = live.state if live is not None else x.stored_state(execution_id)
        source = live.plan if live is not None else x.catalog.by_hash(state.definition_hash)
        if source is None:
            raise NotFoundError(
                f"the definition of execution `{execution_id}` is not registered",
                "WORKFLOW_NOT_FOUND",
            )
        target = source if version is None else x.catalog.find(state.workflow, version)
        outline = _outline(state, source.defn, step, target.defn, fork=True)
        if new_id is None:
            new_id = x.ids.execution_id()
        else:
            self._control.check_id(new_id)
        answer = _answer("fork", new_id, execution_id, 1, defn=target.defn, outline=outline)
        answer["dry_run"] = dry_run
        if dry_run:
            return answer
        _check_force(outline, force)
        if x.memory.get(new_id) is not None or x.store.execution_row(new_id) is not None:
            raise ConflictError(f"execution `{new_id}` already exists", "EXECUTION_EXISTS")
        created = x.create(tx, new_id, target, state.input, parent=None, schedule_id=None)
        x.record(tx, created, ev.WorkflowForked, execution_id, state.run, step)
        self._restore(tx, created, state, outline)
        x.counters.started += 1
        x.decide(tx, created)
        answer["started"] = True
        return answer

    # ---- the new run's start

    def _restore(self, tx: Tx, live: Live, old: ExecutionState, outline: Outline) -> None:
        x = self._x
        for key, status, output in outline.restored:
            x.record(tx, live, ev.StepRestored, key, status, output, old.run)
        kept = {key for key, _, _ in outline.restored}
        for sig in old.signals:
            if sig.get("delivered_to") not in kept:
                x.record(tx, live, ev.SignalReceived, sig["name"], sig["payload"])


def _outline(
    state: ExecutionState, source: Definition, step: str, target: Definition | None, fork: bool
) -> Outline:
    try:
        return plan_of.outline(state, source, step, target=target, fork=fork)
    except RestartRefused as exc:
        raise InvalidError(str(exc), exc.code) from None


def _check_force(outline: Outline, force: bool) -> None:
    refused = outline.refused
    if refused and not force:
        raise ConflictError(plan_of.refusal_message(refused), "EFFECTS_REPEATED")


def _answer(
    action: str, execution_id: str, source: str, run: int, *, defn: Definition, outline: Outline
) -> ActionAnswer:
    return {
        "action": action,
        "execution_id": execution_id,
        "source": source,
        "run": run,
        "workflow": defn.name,
        "version": defn.version,
        "step": outline.step,
        "dry_run": True,
        "started": False,
        "kept": list(outline.kept),
        "rerun": list(outline.rerun),
        "effects": [r.to_json() for r in outline.effects],
    }
