"""The static resource envelope of a definition: how many history events,
commits and task dispatches one run can cost, and how many bytes its history
can hold, computed from the IR alone (issue 44, part 2).

The counts follow what `decide` and the engine record (chapter 40), unit by
unit, and the worst case is the sum of every unit's worst case: a unit that
never runs records one `StepCancelled` or `StepSkipped`, which is never more
than its own worst path, so adding up the worst paths is an upper bound even
though no single run takes all of them.

Per unit, first attempt and retries (`A` = the retry policy's attempts):

- task: `StepScheduled`, `StepDispatched`, then `StepSucceeded` or
  `StepAttemptFailed`; a retry adds `RetryScheduled` and the next attempt's
  three; the last failure adds `StepFailed`. Worst case `4A`, typical 3.
- child workflow (`workflow "Name"`): the same three, never retried, plus
  `StepFailed`: worst 4. The child's own history is its own envelope.
- compute: one `StepSucceeded` (or `StepFailed`).
- sleep: `TimerStarted`, `TimerFired` (or `StepCancelled`).
- await: the awaited `SignalReceived`, `SignalAwaitStarted`,
  `SignalDelivered` (or `StepFailed` on its timeout, `StepCancelled`).
- `for`: `StepFanOut`, every element's unit, the step's own final event;
  the number of elements is the literal list's length or the effective
  `max_fan_out` (the stricter of the workflow's `limits` and the server's);
  without either it is unbounded, and so is the run. `max_parallel` bounds
  how many run at once, not how many there are.

Around the steps: `WorkflowCreated` and `WorkflowStarted`; one event that
starts an abort (`CancelRequested`, `WorkflowTimeoutReached` or
`LimitExceeded`); compensation (`CompensationStarted`, each compensated unit
as a task, then `CompensationCompleted` or one `CompensationFailed` per
failed unit); the largest outcome handler (`HandlersStarted` and its steps);
and the terminal event (`WorkflowContinuedAsNew` ends a run: the count is
per run, as `max_history_events` is).

What the definition cannot bound is listed, not guessed: signals are sent
from outside, so each signal beyond the ones await steps take costs
`per_signal[name]` more events (its `SignalReceived`, and with an
`on event` handler its `SignalDelivered` and the handler's steps), and is
carried into the next run by continue-as-new. Events the environment
causes are left out too: a redelivery after a worker is lost
(`StepAttemptUncertain`, the `StepScheduled` with `redelivery`, and its
`StepDispatched`: `REDELIVERY_EVENTS`) and a duplicate or late result
(`StaleResultIgnored`).

Bytes are compact JSON, as the stores keep events. A payload is bounded by
its type where the engine makes it fit the type exactly (the strict
execution input, step inputs built by `with`), and otherwise by
`max_payload_bytes` where the engine enforces it (task outputs and signal
payloads keep fields their contract does not declare). Strings, lists,
maps, `Bytes`, `JSON` and `Timestamp` (any number of fraction digits) have
no bound of their own. Error messages a worker reports are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs
import orjson

from orbit_core import events as ev
from orbit_core.ir import Definition, Step
from orbit_core.ir import expr as e
from orbit_core.ir.printer import render_expr
from orbit_core.ir.types import (
    ListType,
    MapType,
    OptionalType,
    Primitive,
    RecordType,
    Type,
    render_type,
)

# Elements a `for` step is assumed to have on the typical path when its list
# is not a literal (and no smaller limit applies).
TYPICAL_ITEMS = 10
# Payload size assumed on the typical path for a value whose type has no bound.
TYPICAL_UNBOUNDED_BYTES = 64
REDELIVERY_EVENTS = 3

_PRIMITIVE_BYTES = {
    "int": len("-9223372036854775808"),
    "float": len("-1.7976931348623157e+308"),
    "bool": len("false"),
    "duration": len("9223372036854775807"),
    "uuid": 38,
}


@attrs.frozen
class Limits:
    """The server's configured limits the envelope is measured against."""

    max_fan_out: int | None = None
    max_history_events: int | None = None
    max_payload_bytes: int | None = None


@attrs.frozen
class Unbounded:
    """Why a count or size has no bound: the construct, where it is, how to bound it."""

    step: str | None  # the step's scope key (`search`, `on failure: alert`), or None
    reason: str
    fix: str


@attrs.frozen
class Cost:
    """Events, commits and task dispatches: typical path and worst case (None: unbounded)."""

    events: int = 0
    commits: int = 0
    dispatches: int = 0
    bytes: int = 0
    worst_events: int | None = 0
    worst_commits: int | None = 0
    worst_dispatches: int | None = 0
    worst_bytes: int | None = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.events + other.events,
            self.commits + other.commits,
            self.dispatches + other.dispatches,
            self.bytes + other.bytes,
            _add(self.worst_events, other.worst_events),
            _add(self.worst_commits, other.worst_commits),
            _add(self.worst_dispatches, other.worst_dispatches),
            _add(self.worst_bytes, other.worst_bytes),
        )

    def times(self, typical: int, worst: int | None) -> Cost:
        return Cost(
            self.events * typical,
            self.commits * typical,
            self.dispatches * typical,
            self.bytes * typical,
            _mul(self.worst_events, worst),
            _mul(self.worst_commits, worst),
            _mul(self.worst_dispatches, worst),
            _mul(self.worst_bytes, worst),
        )

    def worst_only(self) -> Cost:
        """The same worst case, nothing on the typical path (aborts, handlers)."""
        return Cost(
            0,
            0,
            0,
            0,
            self.worst_events,
            self.worst_commits,
            self.worst_dispatches,
            self.worst_bytes,
        )


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _mul(a: int | None, n: int | None) -> int | None:
    if a == 0 or n == 0:
        return 0
    return None if a is None or n is None else a * n


def _max(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


@attrs.frozen
class StepEnvelope:
    key: str
    cost: Cost


@attrs.frozen
class Envelope:
    """A definition's envelope; see the module docstring for what counts."""

    workflow: str
    version: str
    cost: Cost
    steps: tuple[StepEnvelope, ...]
    unbounded: tuple[Unbounded, ...]  # why `cost.worst_events` is None
    unbounded_bytes: tuple[Unbounded, ...]  # why `cost.worst_bytes` is None
    per_signal: tuple[tuple[str, int | None], ...]  # events each extra signal adds
    fan_out: int | None  # elements a non-literal `for` may have
    per_run: bool  # the workflow continues as new: the counts are per run

    @property
    def worst_events(self) -> int | None:
        return self.cost.worst_events


def envelope(
    defn: Definition, limits: Limits | None = None, items: int = TYPICAL_ITEMS
) -> Envelope:
    """The envelope of `defn` under the server's `limits` (None: unlimited);
    `items` is the typical number of elements of a `for` over a list that is
    not a literal."""
    return _Builder(defn, limits or Limits(), items).build()


def stricter(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _size(event: ev.Event) -> int:
    return len(ev.dumps(event))


# A thirteen-digit time and a six-digit position: the size of a stored
# event's frame for any execution younger than the year 2286.
_T = 1_800_000_000_000
_SEQ = 100_000
_TOKEN = "00000000-0000-0000-0000-000000000000"


class _Builder:
    def __init__(self, defn: Definition, limits: Limits, items: int) -> None:
        self.defn = defn
        self.limits = limits
        self.fan_out = stricter(limits.max_fan_out, defn.limits.get("max_fan_out"))
        self.payload_limit = stricter(
            limits.max_payload_bytes, defn.limits.get("max_payload_bytes")
        )
        self.items = items
        self.unbounded: list[Unbounded] = []
        self.unbounded_bytes: list[Unbounded] = []
        self.steps: list[StepEnvelope] = []

    # ---------------------------------------------------------------- sizes

    def type_bytes(
        self, t: Type, what: str, step: str | None, *, exact: bool = True, enforced: bool = False
    ) -> tuple[int, int | None]:
        """(typical, worst) compact-JSON bytes of a value of type `t`: its
        type bounds it when the engine makes it fit the type `exact`ly, and
        `max_payload_bytes` does where the engine `enforced` it."""
        reason = _unbounded_type(t)
        bound = _type_bound(t) if reason is None else None
        typical = TYPICAL_UNBOUNDED_BYTES if bound is None else bound
        worst = bound if exact else None
        limit = self.payload_limit if enforced else None
        if limit is not None:
            worst = limit if worst is None else min(worst, limit)
            typical = min(typical, limit)
        if worst is None:
            why = reason or "fields its declaration does not name are kept"
            self.unbounded_bytes.append(
                Unbounded(
                    step,
                    f"{what} has type `{render_type(t)}`: {why}",
                    "set `max_payload_bytes` in the workflow's `limits`"
                    if enforced
                    else "give it a type whose values have a bound",
                )
            )
        return typical, worst

    def output_bytes(self, task: str, step: str | None) -> tuple[int, int | None]:
        """A worker's output: only `max_payload_bytes` bounds it, since fields
        its contract does not declare are kept."""
        contract = self.defn.contracts.get(task)
        if contract is None:  # a built-in task
            return TYPICAL_UNBOUNDED_BYTES, self.payload_limit
        what = f"the output of `{task}`"
        return self.type_bytes(contract.output, what, step, exact=False, enforced=True)

    # ---------------------------------------------------------------- units

    def unit(self, step: Step, key: str) -> Cost:
        """One unit of `step` (a whole step, or one element of a `for`)."""
        kind = step.kind
        if kind == "compute":
            size = _size(ev.StepSucceeded(_SEQ, _T, key, 1, None))
            reason = "a compute step's value has no declared type"
            self.unbounded_bytes.append(Unbounded(key, f"step `{key}`: {reason}", ""))
            return Cost(1, 0, 0, size + TYPICAL_UNBOUNDED_BYTES, 1, 0, 0, None)
        if kind == "sleep":
            size = _size(ev.TimerStarted(_SEQ, _T, key, _T)) + _size(ev.TimerFired(_SEQ, _T, key))
            return Cost(2, 1, 0, size, 2, 1, 0, size)
        if kind == "await":
            signal = step.signal or ""
            payload = self.signal_payload(signal, key)
            size = (
                _size(ev.SignalReceived(_SEQ, _T, signal, None))
                + _size(ev.SignalAwaitStarted(_SEQ, _T, key, signal, _T))
                + _size(ev.SignalDelivered(_SEQ, _T, key, _SEQ))
            )
            return Cost(3, 1, 0, size + payload[0], 3, 1, 0, _add(size, payload[1]))
        task = step.task if kind == "task" else f"workflow:{step.workflow}"
        return self.task_unit(task or "", key, step, child=kind == "workflow")

    def task_unit(self, task: str, key: str, step: Step, child: bool) -> Cost:
        attempts = 1 if child or step.retry is None else step.retry.attempts
        return self.attempts(task, key, attempts, child, step)

    def attempts(self, task: str, key: str, attempts: int, child: bool, step: Step) -> Cost:
        contract = self.defn.contracts.get(task)
        if contract is not None:
            given = self.type_bytes(contract.input, f"the input of `{task}`", key)
        else:
            given = (2, 2)
        out = self.output_bytes(task, key) if not child else self.child_output(task, key)
        frame = (
            _size(ev.StepScheduled(_SEQ, _T, key, 1, None, _TOKEN, False))
            + _size(ev.StepDispatched(_SEQ, _T, key, 1, _TOKEN, "", _TOKEN, _T))
            + len(task)  # the idempotency key names the unit
        )
        success = _size(ev.StepSucceeded(_SEQ, _T, key, 1, None))
        failure = _size(ev.StepAttemptFailed(_SEQ, _T, key, 1, ev.make_error("", "", False)))
        retry = _size(ev.RetryScheduled(_SEQ, _T, key, 2, 1000, _T))
        failed = _size(ev.StepFailed(_SEQ, _T, key, ev.make_error("", "", False)))
        typical = frame + given[0] + success + out[0]
        # Each attempt may end in success or failure; count the larger.
        per_attempt = _add(frame + max(success, failure), _add(given[1], out[1]))
        worst_bytes = _add(_mul(per_attempt, attempts), (attempts - 1) * retry + failed)
        dispatches = 0 if child else 1
        commits = 1 if child else 2
        return Cost(
            3,
            commits,
            dispatches,
            typical,
            4 * attempts,
            commits * attempts + (attempts - 1) + (1 if child else 0),
            dispatches * attempts,
            worst_bytes,
        )

    def child_output(self, task: str, key: str) -> tuple[int, int | None]:
        contract = self.defn.contracts.get(task)
        if contract is None:
            return TYPICAL_UNBOUNDED_BYTES, None
        return self.type_bytes(contract.output, f"the output of `{task}`", key)

    def signal_payload(self, signal: str, key: str | None) -> tuple[int, int | None]:
        declared = self.defn.signal(signal)
        if declared is None:
            return 2, 2
        what = f"signal `{signal}`'s payload"
        return self.type_bytes(declared.payload, what, key, exact=False, enforced=True)

    # ---------------------------------------------------------------- steps

    def step(self, step: Step, key: str) -> Cost:
        if step.for_each is None:
            cost = self.unit(step, key)
        else:
            cost = self.for_step(step, key)
        if step.when is not None:
            skipped = _size(ev.StepSkipped(_SEQ, _T, key, "`when` condition was false"))
            cost = attrs.evolve(
                cost,
                worst_events=_max(cost.worst_events, 1),
                worst_bytes=_max(cost.worst_bytes, skipped),
            )
        self.steps.append(StepEnvelope(key, cost))
        return cost

    def elements(self, step: Step, key: str) -> tuple[int, int | None]:
        """(typical, worst) elements of a `for` step."""
        assert step.for_each is not None
        over = step.for_each.over
        if isinstance(over, e.List):
            n = len(over.items)
            return n, n
        if self.fan_out is None:
            self.unbounded.append(
                Unbounded(
                    key,
                    f"`for` over `{render_expr(over)}` with no `max_fan_out`",
                    "add `limits { max_fan_out: N }` to the workflow "
                    "(or start the server with --max-fan-out)",
                )
            )
            return self.items, None
        return min(self.items, self.fan_out), self.fan_out

    def for_step(self, step: Step, key: str) -> Cost:
        typical, worst = self.elements(step, key)
        element = self.unit(step, f"{key}[0]")
        frame = _size(ev.StepFanOut(_SEQ, _T, key, [])) + _size(
            ev.StepSucceeded(_SEQ, _T, key, 1, [])
        )
        # The list is recorded twice: in StepFanOut, and element outputs in
        # the step's StepSucceeded (already in the elements' own bytes once).
        reason = f"the list of `for` step `{key}` has no declared element type"
        self.unbounded_bytes.append(Unbounded(key, reason, ""))
        around = Cost(2, 0, 0, frame + TYPICAL_UNBOUNDED_BYTES * typical, 2, 0, 0, None)
        return around + element.times(typical, worst)

    def block(self, steps: Iterable[Step], prefix: str) -> Cost:
        total = Cost()
        for step in steps:
            total = total + self.step(step, prefix + step.name)
        return total

    # ---------------------------------------------------------------- the run

    def build(self) -> Envelope:
        defn = self.defn
        input_bytes = self.type_bytes(defn.input, "the workflow input", None, enforced=True)
        created = _size(ev.WorkflowCreated(_SEQ, _T, defn.name, defn.version, "0" * 64, None))
        start = created + _size(ev.WorkflowStarted(_SEQ, _T))
        opening = Cost(2, 1, 0, start + input_bytes[0], 2, 1, 0, _add(start, input_bytes[1]))
        main = self.block(defn.steps, "")
        out_typical, out_worst = self.type_bytes(defn.output, "the workflow output", None)
        if defn.continue_as_new is not None:
            nxt = _size(ev.WorkflowContinuedAsNew(_SEQ, _T, 2, None))
            end_typical, end_worst = nxt + input_bytes[0], _add(nxt, input_bytes[1])
        else:
            done = _size(ev.WorkflowCompleted(_SEQ, _T, None))
            end_typical, end_worst = done + out_typical, _add(done, out_worst)
        failed = _size(
            ev.WorkflowFailed(_SEQ, _T, ev.make_error("LIMIT_EXCEEDED", "", False), "failed")
        )
        ending = Cost(1, 0, 0, end_typical, 1, 0, 0, _max(end_worst, failed))
        cause = _size(ev.LimitExceeded(_SEQ, _T, "max_history_events", "x" * 100))
        abort = Cost(0, 0, 0, 0, 1, 1, 0, cause)
        total = opening + main + abort + self.compensation() + self.handlers() + ending
        return Envelope(
            defn.name,
            defn.version,
            total,
            tuple(self.steps),
            _first_per_step(self.unbounded),
            _first_per_step(self.unbounded_bytes),
            tuple(self.per_signal()),
            self.fan_out,
            defn.continue_as_new is not None,
        )

    def compensation(self) -> Cost:
        total = Cost()
        targets: int | None = 0
        for step in self.defn.steps:
            comp = step.compensate
            if comp is None:
                continue
            key = f"compensate:{step.name}"
            attempts = comp.retry.attempts if comp.retry is not None else 1
            unit = self.attempts(comp.task, key, attempts, False, step)
            count: int | None = 1
            if step.for_each is not None:
                count = self.elements(step, step.name)[1]
            targets = _add(targets, count)
            total = total + unit.times(0, count)
            self.steps.append(StepEnvelope(key, unit.worst_only()))
        if targets == 0:
            return Cost()
        started = _size(ev.CompensationStarted(_SEQ, _T, "x" * 100, []))
        outcome = _size(ev.CompensationFailed(_SEQ, _T, "x" * 64, ev.make_error("", "", False)))
        frame = Cost(0, 0, 0, 0, 1, 0, 0, started)
        ends = Cost(0, 0, 0, 0, 1, 0, 0, outcome).times(0, _max(targets, 1))
        return (frame + total + ends).worst_only()

    def handlers(self) -> Cost:
        largest: Cost | None = None
        for kind, steps in sorted(self.defn.handlers.items()):
            cost = self.block(steps, f"on {kind}: ").worst_only()
            started = _size(ev.HandlersStarted(_SEQ, _T, kind, "completed"))
            cost = cost + Cost(0, 0, 0, 0, 1, 0, 0, started)
            if largest is None or _bigger(cost, largest):
                largest = cost
        return largest or Cost()

    def per_signal(self) -> Iterable[tuple[str, int | None]]:
        """Events each signal beyond the awaited ones adds (the handler's
        steps' worst case with an `on event` handler)."""
        handlers = {h.signal: h.steps for h in self.defn.events}
        for signal in self.defn.signals:
            steps = handlers.get(signal.name)
            if steps is None:
                yield signal.name, 1
                continue
            cost = self.block(steps, f"on event {signal.name}: ")
            yield signal.name, _add(2, cost.worst_events)


def _bigger(a: Cost, b: Cost) -> bool:
    if a.worst_events is None:
        return True
    if b.worst_events is None:
        return False
    return a.worst_events > b.worst_events


def _first_per_step(found: Sequence[Unbounded]) -> tuple[Unbounded, ...]:
    seen: set[tuple[str | None, str]] = set()
    out = []
    for item in found:
        if (item.step, item.reason) not in seen:
            seen.add((item.step, item.reason))
            out.append(item)
    return tuple(out)


def _unbounded_type(t: Type) -> str | None:
    """Why values of `t` have no size bound, or None when they have one."""
    match t:
        case Primitive(kind):
            if kind in _PRIMITIVE_BYTES:
                return None
            if kind == "timestamp":
                return "a Timestamp may carry any number of fraction digits"
            return f"a {render_type(t)} has no maximum length"
        case ListType():
            return "a list has no maximum length"
        case MapType():
            return "a map has no maximum size"
        case OptionalType(inner):
            return _unbounded_type(inner)
        case RecordType(fields):
            for f in fields:
                reason = _unbounded_type(f.type)
                if reason is not None:
                    return f"field `{f.name}`: {reason}"
            return None


def _type_bound(t: Type) -> int | None:
    """The most compact-JSON bytes a value of `t` takes (None: no bound)."""
    match t:
        case Primitive(kind):
            return _PRIMITIVE_BYTES.get(kind)
        case OptionalType(inner):
            bound = _type_bound(inner)
            return None if bound is None else max(bound, 4)
        case RecordType(fields):
            total = 2 + max(len(fields) - 1, 0)
            for f in fields:
                bound = _type_bound(f.type)
                if bound is None:
                    return None
                total += len(orjson.dumps(f.name)) + 1 + bound
            return total
        case _:
            return None
