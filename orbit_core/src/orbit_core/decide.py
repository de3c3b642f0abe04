"""The decider: `decide(state, plan, now, limits)` returns the events that
should happen next, and nothing else. It performs no I/O, reads no clock and
draws no random numbers; the engine calls it until it returns nothing and
commits everything as one batch with one timestamp.

One call is one iteration: every unit gets at most one transition, computed
against the state as it was at the start of the call. That fixes the order
the book shows (a `for` step's `StepFanOut` in one iteration, its elements
scheduled in the next).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs
import orjson

from orbit_core import evaluate as _evaluate
from orbit_core import events as ev
from orbit_core import unitkeys
from orbit_core import values as _values
from orbit_core.api import (
    UNIT_ATTEMPT_FAILED,
    UNIT_DISPATCHED,
    UNIT_FAILED,
    UNIT_RETRY_WAIT,
    UNIT_SCHEDULED,
    UNIT_SKIPPED,
    UNIT_SUCCEEDED,
    UNIT_UNCERTAIN,
    UNIT_WAITING,
    ErrorDoc,
)
from orbit_core.errors import payload_too_large
from orbit_core.eval.jsonvalue import describe_value
from orbit_core.history import Batch, into_slots, stamp
from orbit_core.ir import Step
from orbit_core.ir.expr import Expr
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.plan import Plan, UnitSpec
from orbit_core.state import ExecutionState, Unit

# Statuses after which a unit never changes again.
_SETTLED = frozenset((UNIT_SUCCEEDED, UNIT_SKIPPED, UNIT_FAILED, "CANCELLED"))
# Statuses of a dependency that let its dependents start.
_DONE_OK = frozenset((UNIT_SUCCEEDED, UNIT_SKIPPED))
WHEN_FALSE = "`when` condition was false"
HANDLER_KIND = {"failed": "failure", "cancelled": "cancel", "timed_out": "timeout"}
LIMIT_HINT = "(--max-{} or the workflow's `limits`)"


@attrs.frozen
class Limits:
    """Server-side resource limits; None means unlimited."""

    max_fan_out: int | None = None
    max_history_events: int | None = None
    max_payload_bytes: int | None = None

    def effective(self, plan: Plan) -> Limits:
        """The stricter of the server's limits and the workflow's `limits`."""
        if not plan.limits:
            return self
        return Limits(
            _stricter(self.max_fan_out, plan.limits.get("max_fan_out")),
            _stricter(self.max_history_events, plan.limits.get("max_history_events")),
            _stricter(self.max_payload_bytes, plan.limits.get("max_payload_bytes")),
        )

    def check_payload(self, what: str, value: JsonValue) -> None:
        """PAYLOAD_TOO_LARGE when `value` encodes to more JSON bytes than allowed."""
        limit = self.max_payload_bytes
        if limit is not None:
            size = len(orjson.dumps(value))
            if size > limit:
                raise payload_too_large(what, size, limit)


def _stricter(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def history_limit_message(limit: int) -> str:
    return f"the execution reached {limit} history events {LIMIT_HINT.format('history-events')}"


def decide(state: ExecutionState, plan: Plan, now: int, limits: Limits) -> list[ev.Event]:
    """The next events for `state` at time `now` (one iteration). A paused
    execution gets none: what falls due meanwhile waits for its resume."""
    if state.terminal or not state.started or state.paused_at_ms is not None:
        return []
    d = _Decider(state, plan, now, limits)
    if state.abort is None:
        d.main()
        limit = limits.max_history_events
        if (
            d.out
            and limit is not None
            and d.batch.last_seq > limit
            and not isinstance(d.out[0], ev.WorkflowTimeoutReached)
        ):
            return [
                stamp(
                    state, now, ev.LimitExceeded, "max_history_events", history_limit_message(limit)
                )
            ]
    else:
        d.abort()
    if state.resumed_seq and state.resumed_seq == state.last_seq:
        return _timers_in_order(d.out, state)
    return d.out


def _timers_in_order(out: list[ev.Event], state: ExecutionState) -> list[ev.Event]:
    """The first decision after a resume: the timers that fell due while
    the execution was paused fire in the order they fell due (the decider
    visits units in step order), in the slots the timer events took."""
    slots = [i for i, e in enumerate(out) if isinstance(e, ev.TimerFired)]
    if len(slots) < 2:
        return out

    def due(e: ev.Event) -> int:
        unit = state.units.get(e.step) if isinstance(e, ev.TimerFired) else None
        return unit.wake_at_ms or 0 if unit is not None else 0

    return into_slots(out, slots, sorted((out[i] for i in slots), key=due))


def next_due_ms(state: ExecutionState, plan: Plan) -> int | None:
    """The earliest time at which `decide` would act without any new input
    (never, while paused: only a resume or a cancel moves it)."""
    if state.terminal or state.paused_at_ms is not None:
        return None
    due: int | None = None

    def consider(t: int | None) -> None:
        nonlocal due
        if t is not None and (due is None or t < due):
            due = t

    if state.abort is None and plan.defn.timeout_ms is not None:
        consider(state.created_at_ms + plan.defn.timeout_ms)
    for key, unit in state.units.items():
        status = unit.status
        if status == UNIT_DISPATCHED:
            consider(unit.deadline_ms)
        elif status in (UNIT_RETRY_WAIT, UNIT_WAITING):
            consider(unit.wake_at_ms)
        elif status == UNIT_SCHEDULED and not unit.redelivery:
            spec = plan.spec(key)
            if spec is not None and spec.queue_timeout_ms is not None:
                consider((unit.scheduled_at_ms or 0) + spec.queue_timeout_ms)
    return due


class _Decider:
    # One is made per decision: slots make it, and each attribute read, cheaper.
    __slots__ = ("_execution", "batch", "failed", "limits", "now", "out", "plan", "s", "taken")

    def __init__(self, state: ExecutionState, plan: Plan, now: int, limits: Limits) -> None:
        self.s = state
        self.plan = plan
        self.now = now
        self.limits = limits
        self.batch = Batch(state, now)
        self.out = self.batch.events
        self.taken: set[int] = set()
        self.failed = False
        self._execution: dict[str, str] | None = None

    # ------------------------------------------------------------ emitting

    def emit(self, cls: Callable[..., ev.Event], *fields: object) -> None:
        self.batch.add(cls, *fields)

    def fail_unit(self, key: str, code: str, message: str, details: JsonValue = None) -> None:
        self.emit(ev.StepFailed, key, ev.make_error(code, message, False, details))
        self.failed = True

    # ------------------------------------------------------------ scopes

    def execution(self) -> dict[str, str]:
        if self._execution is None:
            s = self.s
            self._execution = {"id": s.id, "workflow": s.workflow, "version": s.version}
        return self._execution

    def scope(
        self,
        steps: JsonObject | None = None,
        vars: JsonObject | None = None,
        failure: JsonValue = None,
        event: JsonValue = None,
    ) -> _evaluate.Scope:
        if steps is None and vars is None and failure is None and event is None:
            # The main scope reads the state's own (live) dicts, so one object
            # serves every decision of the execution's run.
            cached = self.s.main_scope
            if cached is None:
                cached = self.s.main_scope = _evaluate.Scope(
                    input=self.s.input, execution=self.execution(), steps=self.s.outputs
                )
            return cached
        return _evaluate.Scope(
            input=self.s.input,
            execution=self.execution(),
            steps=self.s.outputs if steps is None else steps,
            vars=vars or {},
            failure=failure,
            event=event,
        )

    def eval(
        self, expr: Expr, scope: _evaluate.Scope, what: str, key: str
    ) -> tuple[bool, JsonValue]:
        """(ok, value); on an error the unit fails with EXPRESSION_ERROR."""
        try:
            return True, _evaluate.evaluate(expr, scope)
        except _evaluate.EvalError as exc:
            self.fail_unit(key, "EXPRESSION_ERROR", f"evaluating `{what}`: {exc}")
            return False, None

    def due(self, at: int | None, since: int | None) -> bool:
        # A timer set in this very batch waits for the next tick (`sleep 0s`).
        return at is not None and self.now >= at and (since is None or self.now > since)

    # ------------------------------------------------------------ main phase

    def main(self) -> None:
        s, plan = self.s, self.plan
        timeout = plan.defn.timeout_ms
        if timeout is not None and self.now >= s.created_at_ms + timeout:
            self.emit(ev.WorkflowTimeoutReached)
            return
        units = s.units
        steps = plan.defn.steps
        # Steps before `settled` have settled units (the state's memo): the
        # walk starts after them and moves the mark past those it finds.
        memo = s.main_settled
        settled = memo[1] if memo is not None and memo[0] is plan else 0
        for i in range(settled, len(steps)):
            step = steps[i]
            # Inlined `main_step` and, for a main step, `deps_done`: this loop
            # runs at every decision, and most steps are settled or waiting
            # for a dependency.
            unit = units.get(step.name)
            if unit is None or (status := unit.status) is None:
                for name in step.depends_on:
                    dep = units.get(name)
                    if dep is None or dep.status not in _DONE_OK:
                        break
                else:
                    self.start_step(step, step.name, self.scope())
            elif status in _SETTLED:
                if i == settled:
                    settled += 1
                continue
            else:
                self.progress_step(step, unit, retries=True)
            if self.failed:
                break
        s.main_settled = (plan, settled)
        if self.failed:
            return
        if plan.events or s.instances:
            self.event_handlers()
        if self.failed or self.out:
            return
        # A main step not settled yet (the one at the mark) means not finished.
        if settled == len(steps) and self.all_finished():
            self.finish()

    def deps_done(self, deps: Iterable[str], prefix: str = "") -> bool | None:
        """True when every dependency succeeded or was skipped; None when one
        can never finish that way (a handler's failed dependency)."""
        units = self.s.units
        for name in deps:
            unit = units.get(unitkeys.scoped(prefix, name))
            status = unit.status if unit is not None else None
            if status in (UNIT_SUCCEEDED, UNIT_SKIPPED):
                continue
            if status in ("FAILED", "CANCELLED"):
                return None
            return False
        return True

    def progress_step(self, step: Step, unit: Unit, retries: bool) -> None:
        status = unit.status
        if status == "RUNNING":
            self.fan_out(step, unit, self.scope(), retries)
        elif status == UNIT_WAITING:
            self.waiting(step, unit)
        elif status is not None and status not in _SETTLED:
            spec = self.plan.spec(unit.key)
            if spec is not None:
                self.progress(unit, spec, retries)

    def start_step(
        self,
        step: Step,
        key: str,
        scope: _evaluate.Scope,
    ) -> None:
        if step.when is not None:
            ok, value = self.eval(step.when, scope, "when", key)
            if not ok:
                return
            if value is None or value is False:
                self.emit(ev.StepSkipped, key, WHEN_FALSE)
                return
            if value is not True:
                self.fail_unit(
                    key,
                    "EXPRESSION_ERROR",
                    f"`when` condition must be a Bool, found {describe_value(value)}",
                )
                return
        if step.for_each is not None:
            ok, items = self.eval(step.for_each.over, scope, "for", key)
            if not ok:
                return
            if items is None:
                items = []
            if not isinstance(items, list):
                self.fail_unit(
                    key, "EXPRESSION_ERROR", f"`for` needs a list, found {describe_value(items)}"
                )
                return
            limit = self.limits.max_fan_out
            if limit is not None and len(items) > limit:
                self.fail_unit(
                    key,
                    "LIMIT_EXCEEDED",
                    f"`for` over {len(items)} elements exceeds the fan-out limit of {limit} "
                    + LIMIT_HINT.format("fan-out"),
                )
                return
            self.emit(ev.StepFanOut, key, items)
            return
        self.start_unit(self.plan.step_spec(step), key, scope)

    def start_unit(self, spec: UnitSpec, key: str, scope: _evaluate.Scope) -> None:
        step = spec.step
        kind = spec.kind
        if kind == "compute":
            assert step.compute is not None  # a compute step has its expression
            ok, value = self.eval(step.compute, scope, "compute", key)
            if ok:
                self.emit(ev.StepSucceeded, key, 1, value)
        elif kind == "sleep":
            self.emit(ev.TimerStarted, key, self.now + (step.sleep_ms or 0))
        elif kind == "await":
            deadline = None if step.timeout_ms is None else self.now + step.timeout_ms
            self.emit(ev.SignalAwaitStarted, key, step.signal, deadline)
        else:
            self.schedule(spec, key, step.with_, step.idempotency_key, scope)

    def schedule(
        self,
        spec: UnitSpec,
        key: str,
        with_: Expr | None,
        key_expr: Expr | None,
        scope: _evaluate.Scope,
    ) -> None:
        value: JsonValue = {}
        if with_ is not None:
            ok, value = self.eval(with_, scope, "with", key)
            if not ok:
                return
            if value is None:
                value = {}
        contract = self.plan.contract(spec.task or "")
        if contract is not None:
            try:
                value = _values.conform(value, contract.input)
            except _values.ValidationError as exc:
                self.fail_unit(
                    key,
                    "INPUT_CONTRACT_VIOLATION",
                    f"step input for `{spec.task}` does not match its contract at {exc}",
                )
                return
        idem = None
        if key_expr is not None:
            ok, idem = self.eval(key_expr, scope, "idempotency_key", key)
            if not ok:
                return
            if idem is not None and not isinstance(idem, str):
                self.fail_unit(
                    key,
                    "EXPRESSION_ERROR",
                    f"`idempotency_key` must be a String, found {describe_value(idem)}",
                )
                return
        if idem is None:
            idem = unitkeys.default_idempotency_key(self.s.id, self.s.run, key)
        self.emit(ev.StepScheduled, key, 1, value, idem, False)

    # ------------------------------------------------------------ task units

    def progress(self, unit: Unit, spec: UnitSpec, retries: bool) -> None:
        """One step of a task-like unit's attempt cycle."""
        status = unit.status
        key = unit.key
        if status == UNIT_SCHEDULED:
            qt = spec.queue_timeout_ms
            if (
                qt is not None
                and not unit.redelivery
                and not spec.is_child
                and self.due((unit.scheduled_at_ms or 0) + qt, unit.scheduled_at_ms)
            ):
                self.emit(
                    ev.StepAttemptFailed,
                    key,
                    unit.attempt,
                    ev.make_error(
                        "QUEUE_TIMEOUT", "no worker picked up the task before queue_timeout", False
                    ),
                )
        elif status == UNIT_DISPATCHED:
            if self.due(unit.deadline_ms, unit.dispatched_at_ms):
                message = (
                    f"child workflow did not finish within {spec.timeout_ms}ms"
                    if spec.is_child
                    else f"attempt timed out after {spec.timeout_ms}ms"
                )
                self.emit(
                    ev.StepAttemptFailed,
                    key,
                    unit.attempt,
                    ev.make_error("TIMEOUT", message, True),
                )
        elif status == UNIT_ATTEMPT_FAILED:
            error = unit.last_error or ev.make_error("UNKNOWN", "", False)
            retry = spec.retry
            if (
                retries
                and not spec.is_child
                and error.get("retryable", False)
                and error["code"] not in retry.non_retryable
                and unit.attempt < retry.attempts
            ):
                delay = retry.delay_before(unit.attempt + 1)
                self.emit(ev.RetryScheduled, key, unit.attempt + 1, delay, self.now + delay)
                return
            final = dict(error)
            if retry.attempts > 1 and unit.attempt >= retry.attempts:
                final["message"] = f"{error['message']} (gave up after {retry.attempts} attempts)"
            self.emit(ev.StepFailed, key, final)
            if not unitkeys.is_recovery(key):
                self.failed = True
        elif status == UNIT_UNCERTAIN:
            self.emit(
                ev.StepScheduled, key, unit.attempt, unit.input, unit.idempotency_key or "", True
            )
        elif status == UNIT_RETRY_WAIT and self.due(unit.wake_at_ms, None):
            self.emit(
                ev.StepScheduled,
                key,
                unit.attempt + 1,
                unit.input,
                unit.idempotency_key or "",
                False,
            )

    def waiting(self, step: Step, unit: Unit) -> None:
        if step.kind == "sleep":
            if self.due(unit.wake_at_ms, unit.scheduled_at_ms):
                self.emit(ev.TimerFired, unit.key)
            return
        name = step.signal
        for sig in self.s.signals:
            if sig["name"] == name and "delivered_to" not in sig and sig["seq"] not in self.taken:
                self.taken.add(sig["seq"])
                self.emit(ev.SignalDelivered, unit.key, sig["seq"])
                return
        if self.due(unit.wake_at_ms, unit.scheduled_at_ms):
            self.fail_unit(
                unit.key,
                "SIGNAL_TIMEOUT",
                f"no `{name}` signal arrived before the step's timeout",
            )

    # ------------------------------------------------------------ fan-out

    def fan_out(self, step: Step, parent: Unit, scope: _evaluate.Scope, retries: bool) -> None:
        items = parent.input if isinstance(parent.input, list) else []
        key = parent.key
        units = self.s.units
        if not items:
            if retries:
                self.emit(ev.StepSucceeded, key, 1, [])
            else:
                self.emit(ev.StepCancelled, key)
            return
        active = 0
        pending: list[int] = []
        outputs: list[JsonValue] = []
        failed: Unit | None = None
        for i in range(len(items)):
            unit = units.get(unitkeys.element(key, i))
            status = unit.status if unit is not None else None
            if unit is None or status is None:
                pending.append(i)
            elif status == UNIT_SUCCEEDED:
                outputs.append(unit.output)
            elif status == UNIT_FAILED:
                failed = failed or unit
            elif status != "CANCELLED":
                active += 1
                if retries:
                    self.progress_step(step, unit, True)
                else:
                    self.abort_unit(step, unit)
        if not retries or failed is not None:
            # Aborting: withdraw what has not started, wait for the rest.
            if active == 0:
                if failed is not None:
                    self.emit(ev.StepFailed, key, failed.error)
                else:
                    self.emit(ev.StepCancelled, key)
            return
        if not pending and active == 0:
            self.emit(ev.StepSucceeded, key, 1, outputs)
            return
        limit = step.max_parallel
        spec = self.plan.step_spec(step)
        var = step.for_each.var if step.for_each is not None else ""
        for i in pending:
            if limit is not None and active >= limit:
                break
            element_scope = attrs.evolve(scope, vars={**scope.vars, var: items[i]})
            self.start_unit(attrs.evolve(spec, element=i), unitkeys.element(key, i), element_scope)
            active += 1
            if self.failed:
                return

    # ------------------------------------------------------------ event handlers

    def event_handlers(self) -> None:
        plan, s = self.plan, self.s
        if plan.events:
            for sig in s.signals:
                name = sig["name"]
                if name in plan.events and "delivered_to" not in sig:
                    self.emit(
                        ev.SignalDelivered, unitkeys.event_instance(name, sig["seq"]), sig["seq"]
                    )
        for instance in s.instances:
            signal = unitkeys.event_signal(instance)
            payload = s.units[instance].output
            prefix = unitkeys.instance_prefix(instance)
            block = "event:" + signal
            steps = self.instance_steps(plan.events.get(signal, ()), prefix)
            for step in plan.events.get(signal, ()):
                key = unitkeys.scoped(prefix, step.name)
                unit = s.units.get(key)
                if unit is None or unit.status is None:
                    ready = self.deps_done(plan.block_deps[(block, step.name)], prefix)
                    if ready:
                        self.start_step(step, key, self.scope(steps=steps, event=payload))
                    elif ready is None:
                        self.emit(ev.StepCancelled, key)
                else:
                    self.instance_progress(step, unit)
                if self.failed:
                    return

    def instance_steps(self, steps: Iterable[Step], prefix: str) -> JsonObject:
        merged = dict(self.s.outputs)
        units = self.s.units
        for step in steps:
            unit = units.get(unitkeys.scoped(prefix, step.name))
            if unit is not None and unit.status in (UNIT_SUCCEEDED, UNIT_SKIPPED):
                merged[step.name] = unit.output
        return merged

    def instance_progress(self, step: Step, unit: Unit) -> None:
        if unit.status == UNIT_WAITING:
            self.waiting(step, unit)
        elif not unit.done:
            spec = self.plan.spec(unit.key)
            if spec is not None:
                self.progress(unit, spec, True)

    def all_finished(self) -> bool:
        units = self.s.units
        for step in self.plan.defn.steps:
            unit = units.get(step.name)
            if unit is None or unit.status not in (UNIT_SUCCEEDED, UNIT_SKIPPED):
                return False
        for instance in self.s.instances:
            prefix = unitkeys.instance_prefix(instance)
            for step in self.plan.events.get(unitkeys.event_signal(instance), ()):
                unit = units.get(unitkeys.scoped(prefix, step.name))
                if unit is None or not unit.done:
                    return False
        return True

    def finish(self) -> None:
        defn = self.plan.defn
        scope = self.scope()
        can = defn.continue_as_new
        if can is not None:
            proceed: object = True
            if can.when is not None:
                proceed = self.eval_workflow(can.when, scope, "continue_as_new")
                if proceed is _FAILED:
                    return
            if proceed is True:
                nxt = self.eval_workflow(can.with_, scope, "continue_as_new")
                if nxt is _FAILED:
                    return
                try:
                    nxt = _values.conform({} if nxt is None else nxt, defn.input, strict=True)
                except _values.ValidationError as exc:
                    self.workflow_failed(
                        "INPUT_CONTRACT_VIOLATION",
                        f"continue_as_new input does not match the workflow input at {exc}",
                    )
                    return
                self.emit(ev.WorkflowContinuedAsNew, self.s.run + 1, nxt)
                return
        output = self.eval_workflow(defn.result, scope, "return")
        if output is _FAILED:
            return
        try:
            output = _values.conform(output, defn.output)
        except _values.ValidationError as exc:
            self.workflow_failed(
                "OUTPUT_CONTRACT_VIOLATION",
                f"workflow output does not match its output type at {exc}",
            )
            return
        self.emit(ev.WorkflowCompleted, output)

    def eval_workflow(self, expr: Expr, scope: _evaluate.Scope, what: str) -> object:
        """The value, or _FAILED once the workflow failed because of it."""
        try:
            return _evaluate.evaluate(expr, scope)
        except _evaluate.EvalError as exc:
            self.workflow_failed("EXPRESSION_ERROR", f"evaluating `{what}`: {exc}")
            return _FAILED

    def workflow_failed(self, code: str, message: str) -> None:
        self.emit(ev.WorkflowFailed, ev.make_error(code, message, False), "none")

    # ------------------------------------------------------------ abort phase

    def abort(self) -> None:
        s, plan = self.s, self.plan
        busy = False
        for step in plan.defn.steps:
            unit = s.units.get(step.name)
            if unit is None or unit.status is None:
                self.emit(ev.StepCancelled, step.name)
            elif not unit.done:
                busy = True
                if unit.status == "RUNNING":
                    self.fan_out(step, unit, self.scope(), retries=False)
                else:
                    self.abort_unit(step, unit)
        for instance in s.instances:
            prefix = unitkeys.instance_prefix(instance)
            for step in plan.events.get(unitkeys.event_signal(instance), ()):
                key = unitkeys.scoped(prefix, step.name)
                unit = s.units.get(key)
                if unit is None or unit.status is None:
                    self.emit(ev.StepCancelled, key)
                elif not unit.done:
                    busy = True
                    self.abort_unit(step, unit)
        if busy or self.out:
            return
        if s.compensation_outcome is None and s.compensation_order is not None:
            self.compensate(s.compensation_order)
            return
        if s.compensation_outcome is None and s.handlers is None:
            targets = self.compensation_targets()
            if targets:
                self.emit(ev.CompensationStarted, self.abort_reason(), targets)
                return
        outcome = s.compensation_outcome or "none"
        abort = s.abort
        assert abort is not None  # only an aborting execution winds down
        kind = HANDLER_KIND[abort["kind"]]
        steps = plan.handlers.get(kind)
        if steps:
            if s.handlers is None:
                self.emit(ev.HandlersStarted, kind, outcome)
                return
            if not self.run_handlers(kind, steps):
                return
        if abort["kind"] == "failed":
            self.emit(ev.WorkflowFailed, abort["error"], outcome)
        elif abort["kind"] == "cancelled":
            self.emit(ev.WorkflowCancelled, outcome)
        else:
            self.emit(ev.WorkflowTimedOut, outcome)

    def abort_unit(self, step: Step, unit: Unit) -> None:
        """Withdraws work that has not started; lets in-flight work finish."""
        status = unit.status
        if (status == UNIT_SCHEDULED and not unit.redelivery) or status in (
            UNIT_WAITING,
            UNIT_RETRY_WAIT,
        ):
            self.emit(ev.StepCancelled, unit.key)
            return
        spec = self.plan.spec(unit.key)
        if spec is not None:
            self.progress(unit, spec, retries=False)

    def compensation_targets(self) -> list[str]:
        """Succeeded units with a `compensate` block, newest success first."""
        plan = self.plan
        candidates = [
            u
            for u in self.s.units.values()
            if u.status == UNIT_SUCCEEDED
            and u.succeeded_seq is not None
            and unitkeys.is_main_block(u.key)
            and unitkeys.step_name(u.key) in plan.compensated
            and (unitkeys.is_element(u.key) or plan.steps[u.key].for_each is None)
        ]
        candidates.sort(key=lambda u: u.succeeded_seq or 0, reverse=True)
        return [u.key for u in candidates]

    def compensate(self, order: list[str]) -> None:
        """Runs the compensations one at a time, then reports their outcome."""
        s = self.s
        failures: list[tuple[str, ErrorDoc | None]] = []
        for target in order:
            key = unitkeys.compensation(target)
            unit = s.units.get(key)
            spec = self.plan.spec(key)
            if spec is None:
                continue
            if unit is None or unit.status is None:
                self.start_compensation(target, key, spec)
                return
            if not unit.done:
                self.progress(unit, spec, retries=True)
                return
            if unit.status == UNIT_FAILED:
                failures.append((target, unit.error))
        if failures:
            for target, error in failures:
                self.emit(ev.CompensationFailed, target, error)
        else:
            self.emit(ev.CompensationCompleted)

    def start_compensation(self, target: str, key: str, spec: UnitSpec) -> None:
        step = spec.step
        comp = step.compensate
        assert comp is not None
        base = self.s.units[target]
        steps = dict(self.s.outputs)
        steps[step.name] = base.output
        vars: JsonObject = {}
        if spec.element is not None and step.for_each is not None:
            parent = self.s.units.get(step.name)
            items = parent.input if parent is not None else None
            if isinstance(items, list) and spec.element < len(items):
                vars[step.for_each.var] = items[spec.element]
        scope = self.scope(steps=steps, vars=vars)
        self.schedule(spec, key, comp.with_, comp.idempotency_key, scope)

    def abort_reason(self) -> str:
        abort = self.s.abort
        if abort is None:
            return ""
        if abort.get("kind") == "cancelled":
            return f"cancelled: {abort.get('reason', '')}"
        if abort.get("kind") == "timed_out":
            return "workflow timed out"
        error = abort.get("error")
        return error["message"] if error is not None else ""

    def failure_value(self) -> JsonObject:
        abort = self.s.abort
        kind = abort.get("kind") if abort is not None else None
        if abort is not None and kind == "cancelled":
            return {"reason": "cancelled", "code": "CANCELLED", "message": abort.get("reason")}
        if kind == "timed_out":
            return {
                "reason": "timed_out",
                "code": "WORKFLOW_TIMEOUT",
                "message": "workflow timed out",
            }
        error = abort.get("error") if abort is not None else None
        if error is None:
            return {"reason": "failed", "code": None, "message": None}
        return {"reason": "failed", "code": error["code"], "message": error["message"]}

    def run_handlers(self, kind: str, steps: tuple[Step, ...]) -> bool:
        """Advances the handler steps; True once every one has finished."""
        s = self.s
        prefix = unitkeys.handler_prefix(kind)
        failure = self.failure_value()
        merged = dict(s.outputs)
        for step in steps:
            unit = s.units.get(unitkeys.scoped(prefix, step.name))
            if unit is not None and unit.status in (UNIT_SUCCEEDED, UNIT_SKIPPED):
                merged[step.name] = unit.output
        finished = True
        for step in steps:
            key = unitkeys.scoped(prefix, step.name)
            unit = s.units.get(key)
            if unit is None or unit.status is None:
                finished = False
                ready = self.deps_done(self.plan.block_deps[(kind, step.name)], prefix)
                if ready:
                    self.start_step(step, key, self.scope(steps=merged, failure=failure))
                elif ready is None:
                    self.emit(ev.StepCancelled, key)
            elif not unit.done:
                finished = False
                if unit.status == UNIT_WAITING:
                    self.waiting(step, unit)
                else:
                    spec = self.plan.spec(key)
                    if spec is not None:
                        self.progress(unit, spec, True)
        self.failed = False  # a handler's failure never changes the outcome
        return finished and not self.out


_FAILED = object()
