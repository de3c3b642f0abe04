"""Replaying a recorded history through the current decider (chapter 53).

The replay starts from an empty state and walks the history in order,
using the engine's own `orbit_core.state.apply` and `orbit_core.decide.decide`
(never a second implementation). Each event is:

- external (a start, a dispatch, a lost worker, a signal, a cancellation, a
  stale result, an operator's pause or resume): applied as recorded;
- a task result (`StepSucceeded`, `StepAttemptFailed`): decided if the
  decider produces it, external if it answers a unit still waiting for a
  worker, a child or a built-in, divergent otherwise;
- decided (everything else): it must be among the events of the decider's
  current batch at that point. The batch is computed with the event's own
  timestamp as `now` and is consumed event by event, in any order, because
  the runtime commits a batch's events together; a decided event not in
  what is left of the batch gets a fresh batch (the engine's next
  iteration), and only then counts as divergent.

Whatever the origin, the recorded event is then applied, so later findings
stay independent. Fields computed from the clock (`fire_at_ms`,
`deadline_ms`) may differ by up to the time since the previous event, since
the runtime reads its clock just before committing.

A history comes from strangers (a file, a server): every event is checked
against its type's fields before use, and anything that still makes the
fold or the decider fail is reported as an unusable history, located at its
event, never a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from orbit_core import events as ev
from orbit_core.api import UnitStatus
from orbit_core.decide import Limits, decide
from orbit_core.ir import Definition
from orbit_core.plan import Plan
from orbit_core.state import ExecutionState, apply

EXTERNAL = frozenset(
    {
        "WorkflowCreated",
        "WorkflowStarted",
        "StepDispatched",
        "StepAttemptUncertain",
        "SignalReceived",
        "CancelRequested",
        "StaleResultIgnored",
        # An operator's act (orbit migrate run): the definition changes after it.
        "WorkflowMigrated",
        # Issue 38: an operator's restart or fork, and the outcomes a new run
        # starts with; recorded facts, not decisions.
        "WorkflowRestarted",
        "WorkflowForked",
        "StepRestored",
        # An operator's (docs/operating-executions.md).
        "WorkflowPaused",
        "WorkflowResumed",
        # Flow control (docs/language/flow-control.md): the engine's admission
        # of a start, decided across executions, and a later start folded in.
        "WorkflowWaiting",
        "WorkflowAdmitted",
        "WorkflowDebounced",
    }
)
RESULTS = frozenset({"StepSucceeded", "StepAttemptFailed"})
_CLOCK_FIELDS = ("fire_at_ms", "deadline_ms")


class HistoryError(ValueError):
    """The history cannot be replayed: malformed or inconsistent events."""


@attrs.frozen
class Divergence:
    seq: int
    recorded: dict[str, Any]
    # What the decider returns at that point instead (possibly nothing).
    decider: list[dict[str, Any]]


@attrs.frozen
class Report:
    execution_id: str
    events: int
    origins: list[tuple[int, str]]
    divergences: list[Divergence]
    recorded_hash: str | None
    definition: Definition
    state: ExecutionState
    pending: list[dict[str, Any]]
    last: dict[str, Any] | None
    first_ms: int

    @property
    def external(self) -> int:
        return sum(1 for _, origin in self.origins if origin == "external")

    @property
    def decided(self) -> int:
        return sum(1 for _, origin in self.origins if origin == "decided")

    @property
    def divergent(self) -> int:
        return len(self.divergences)

    @property
    def mismatch(self) -> tuple[str, str] | None:
        replayed = self.definition.definition_hash
        if self.recorded_hash is not None and self.recorded_hash != replayed:
            return (self.recorded_hash, replayed)
        return None


def parse_history(document: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """The execution id (when the document names one) and the raw events of
    a history document: `{"execution_id", "events": [...]}` or a bare array."""
    if isinstance(document, list):
        return None, document
    if isinstance(document, dict) and isinstance(document.get("events"), list):
        eid = document.get("execution_id")
        return (eid if isinstance(eid, str) else None), document["events"]
    raise HistoryError(
        'expected the output of GET /v1/executions/{id}/history ({"execution_id": ..., '
        '"events": [...]}) or an array of events'
    )


def decode_events(raw: Sequence[Any]) -> list[ev.Event]:
    """Typed events, each checked against its type's fields; HistoryError
    names the first event that is not a history event."""
    if not raw:
        raise HistoryError("the history has no events")
    decoded = []
    for index, data in enumerate(raw):
        where = f"event {index + 1}"
        if not isinstance(data, dict):
            raise HistoryError(f"{where} is not a JSON object")
        kind = data.get("type")
        cls = ev.EVENT_TYPES.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise HistoryError(f"{where} has an unknown type {_short(kind)}")
        for name, annotation in _fields(cls):
            value = data.get(name)
            if not _fits(annotation, value, name in data):
                raise HistoryError(f"{where} ({kind}) has an invalid `{name}`: {_short(value)}")
        if data["seq"] != index + 1:
            raise HistoryError(f"{where} ({kind}) has seq {data['seq']}, expected {index + 1}")
        decoded.append(ev.from_json(data))
    if not isinstance(decoded[0], ev.WorkflowCreated):
        raise HistoryError("the history does not start with WorkflowCreated")
    return decoded


def guess_execution_id(events: Sequence[ev.Event]) -> str | None:
    """The execution id a bare array of events belongs to, read from the
    default idempotency keys (`<id>/<step>`) of its scheduled steps."""
    for event in events:
        if isinstance(event, ev.StepScheduled) and event.idempotency_key.endswith("/" + event.step):
            head = event.idempotency_key[: -len(event.step) - 1]
            return head.split("/run", 1)[0] if "/run" in head else head
    return None


def replay(
    execution_id: str,
    events: Sequence[ev.Event],
    definition: Definition,
    *,
    at: int | None = None,
    limits: Limits | None = None,
    migrated_to: Sequence[Definition] = (),
) -> Report:
    """`migrated_to`: the definitions a live migration moved the history to
    (after its `WorkflowMigrated`, each is decided by its own)."""
    plan = Plan(definition)
    base_limits = limits or Limits()
    limits = base_limits.effective(plan)
    targets = {d.definition_hash: d for d in migrated_to}
    state = ExecutionState(execution_id)
    origins: list[tuple[int, str]] = []
    divergences: list[Divergence] = []
    batch: list[ev.Event] = []
    previous_ms = events[0].timestamp_ms
    chosen = events if at is None else events[:at]
    first = events[0]
    recorded_hash = first.definition_hash if isinstance(first, ev.WorkflowCreated) else None
    for event in chosen:
        kind = event.TYPE
        slack = max(0, event.timestamp_ms - previous_ms)
        try:
            if kind in EXTERNAL:
                origin = "external"
                batch = []
            else:
                found = _take(batch, event, slack)
                if not found:
                    batch = decide(state, plan, event.timestamp_ms, limits)
                    found = _take(batch, event, slack)
                if found:
                    origin = "decided"
                elif kind in RESULTS and _awaits_result(state, event):
                    origin = "external"
                else:
                    origin = "divergent"
                    divergences.append(
                        Divergence(event.seq, _shown(event), [_shown(e) for e in batch])
                    )
                    batch = []
            apply(state, event)
            if isinstance(event, ev.WorkflowMigrated):
                target = targets.get(event.to_hash)
                if target is None:
                    raise HistoryError(
                        f"event {event.seq} moves the execution to {event.to_version} "
                        f"({event.to_hash}); replay needs that definition too"
                    )
                plan = Plan(target)
                limits = base_limits.effective(plan)
                batch = []
        except HistoryError:
            raise
        except Exception as error:  # the history contradicts itself
            raise HistoryError(
                f"event {event.seq} ({kind}) cannot be replayed: {error or type(error).__name__}"
            ) from None
        origins.append((event.seq, origin))
        previous_ms = event.timestamp_ms
    last = ev.to_json(chosen[-1]) if chosen else None
    try:
        pending = decide(state, plan, previous_ms, limits)
    except Exception:
        pending = []
    return Report(
        execution_id,
        len(chosen),
        origins,
        divergences,
        recorded_hash,
        definition,
        state,
        [_shown(e) for e in pending],
        last,
        first.timestamp_ms,
    )


def _take(batch: list[ev.Event], event: ev.Event, slack: int) -> bool:
    for index, predicted in enumerate(batch):
        if _same(predicted, event, slack):
            del batch[index]
            return True
    return False


def _same(predicted: ev.Event, recorded: ev.Event, slack: int) -> bool:
    if type(predicted) is not type(recorded):
        return False
    for name in ev._FIELDS[type(recorded)]:
        mine, theirs = getattr(predicted, name), getattr(recorded, name)
        if mine == theirs:
            continue
        if (
            name in _CLOCK_FIELDS
            and isinstance(mine, int)
            and isinstance(theirs, int)
            and abs(mine - theirs) <= slack
        ):
            continue
        return False
    return True


def _awaits_result(state: ExecutionState, event: ev.Event) -> bool:
    """Whether the event's unit is waiting for a worker's (or a child's, or a
    built-in's) answer to the event's attempt."""
    step = getattr(event, "step", None)
    unit = state.units.get(step) if isinstance(step, str) else None
    return (
        unit is not None
        and unit.status == UnitStatus.DISPATCHED
        and unit.attempt == getattr(event, "attempt", None)
    )


def _shown(event: ev.Event) -> dict[str, Any]:
    """An event as a divergence shows it: without seq and timestamp."""
    data = ev.to_json(event)
    del data["seq"], data["timestamp_ms"]
    return data


# ---- field checks


def _fields(cls: type[Any]) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in attrs.fields(cls)]


def _fits(annotation: str, value: Any, present: bool) -> bool:
    optional = annotation.endswith("| None")
    base = annotation.removesuffix(" | None")
    if value is None:
        return optional or base in ("Json",)
    if base == "int":
        return type(value) is int
    if base == "bool":
        return type(value) is bool
    if base == "str":
        return isinstance(value, str)
    if base == "Json":
        return True
    if base == "ErrorJson":
        return (
            isinstance(value, dict)
            and isinstance(value.get("code"), str)
            and isinstance(value.get("message", ""), str)
            and type(value.get("retryable", False)) is bool
        )
    if base == "list[Json]":
        return isinstance(value, list)
    if base == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if base == "dict[str, str]":
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
    return False


def _short(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
