"""The history checker of the fault campaign (tests/faults/campaign.py).

Pure functions over two inputs: the records the harness wrote while it ran
(`calls.jsonl`: every client call with the answer it got, and every fault it
injected) and the final state of the store (each execution's status and
history, read through a surviving server at the end). Nothing here talks to
a server, so each check is unit-tested with hand-made histories
(tests/faults/test_faults_checker.py).

A call's answer is one of three outcomes, and the checks hold the harness
to what a client may conclude from it:
  - `ack`: a 2xx answer. The write happened and must be in the store.
  - `refused`: a 4xx answer, or 503 NOT_LEADER. The write did not happen.
  - `unknown`: a timeout, a dropped connection or another 5xx. Either is
    allowed, but at most once.

A violation carries the shortest window that shows it: the client calls on
that execution and the slice of its history from the first to the last
event that matters, so a reader sees the cause without the whole log.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

Record = Mapping[str, Any]
TERMINAL_EVENTS = ("WorkflowCompleted", "WorkflowFailed", "WorkflowCancelled", "WorkflowTimedOut")
TERMINAL_STATUSES = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")
# Events that record a step attempt's result: one per (step, attempt) at most.
RESULT_EVENTS = ("StepSucceeded", "StepAttemptFailed")


@attrs.frozen(slots=True)
class Execution:
    """What the store holds for one execution at the end."""

    execution_id: str
    status: str
    events: tuple[Record, ...]


@attrs.frozen(slots=True)
class Violation:
    check: str
    execution_id: str
    message: str
    window: tuple[Record, ...]

    def render(self) -> str:
        lines = [f"[{self.check}] {self.execution_id}: {self.message}"]
        lines += [f"    {_short(r)}" for r in self.window]
        return "\n".join(lines)


def _short(record: Record) -> str:
    keep = {k: v for k, v in record.items() if k not in ("output", "body")}
    return " ".join(f"{k}={v}" for k, v in keep.items())


def outcome(status: int | None, code: str | None = None) -> str:
    """The outcome a client may conclude from an HTTP answer (None: no answer)."""
    if status is None:
        return "unknown"
    if 200 <= status < 300:
        return "ack"
    if 400 <= status < 500 or (status == 503 and code == "NOT_LEADER"):
        return "refused"
    return "unknown"


def _window(events: Sequence[Record], seqs: Iterable[int]) -> tuple[Record, ...]:
    """The history from the first to the last of `seqs`, inclusive."""
    wanted = sorted(seqs)
    if not wanted:
        return ()
    return tuple(e for e in events if wanted[0] <= e["seq"] <= wanted[-1])


def _calls(records: Iterable[Record], op: str | None = None) -> dict[str, list[Record]]:
    found: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.get("kind") == "call" and (op is None or r["op"] == op):
            found[r["execution_id"]].append(r)
    return found


def _best(calls: Sequence[Record]) -> str:
    """One operation's outcome over its attempts: ack beats unknown beats refused."""
    outcomes = {c["outcome"] for c in calls}
    return next(o for o in ("ack", "unknown", "refused") if o in outcomes or o == "refused")


def check_starts(records: Sequence[Record], store: Mapping[str, Execution]) -> list[Violation]:
    """Every acknowledged start is in the store and ends exactly once; a
    start refused on every attempt is not in the store, nor is anything no
    client started."""
    found = []
    # (Each grouping once: read per execution, a campaign's 10,000
    # executions times its 30,000 calls kept the checker busy for minutes.)
    starts, every = _calls(records, "start"), _calls(records)
    for eid, calls in sorted(starts.items()):
        best = _best(calls)
        execution = store.get(eid)
        if best == "ack" and execution is None:
            found.append(
                Violation("start-durable", eid, "acknowledged start is lost", tuple(calls))
            )
        elif best == "refused" and execution is not None:
            found.append(
                Violation("start-refused", eid, "refused start is in the store", tuple(calls))
            )
    for eid in sorted(store.keys() - starts.keys()):
        found.append(Violation("start-phantom", eid, "in the store, but never started", ()))
    for eid, execution in sorted(store.items()):
        ends = [e for e in execution.events if e["type"] in TERMINAL_EVENTS]
        on_it = tuple(every.get(eid, ()))
        if len(ends) > 1:
            window = _window(execution.events, [e["seq"] for e in ends])
            found.append(Violation("one-end", eid, f"{len(ends)} end events", window))
        elif not ends and _best(starts.get(eid, [])) != "refused":
            # The whole history: one reproduction should be enough to see why.
            message = f"never ended (status {execution.status})"
            found.append(Violation("one-end", eid, message, on_it + tuple(execution.events)))
        elif ends and execution.status not in TERMINAL_STATUSES:
            message = f"history ended with {ends[0]['type']} but status is {execution.status}"
            found.append(Violation("one-end", eid, message, (ends[0],)))
    return found


def check_step_results(store: Mapping[str, Execution]) -> list[Violation]:
    """No step attempt's result accepted twice."""
    found = []
    for eid, execution in sorted(store.items()):
        by_attempt: dict[tuple[str, int], list[Record]] = defaultdict(list)
        for event in execution.events:
            if event["type"] in RESULT_EVENTS:
                by_attempt[(event["step"], event["attempt"])].append(event)
        for (step, attempt), results in sorted(by_attempt.items()):
            if len(results) > 1:
                window = _window(execution.events, [e["seq"] for e in results])
                message = f"step {step} attempt {attempt} has {len(results)} results"
                found.append(Violation("step-once", eid, message, window))
    return found


def _signal_events(execution: Execution | None) -> dict[int, list[Record]]:
    """SignalReceived events by the harness's operation number (payload `op`)."""
    by_op: dict[int, list[Record]] = defaultdict(list)
    for event in execution.events if execution else ():
        payload = event.get("payload")
        if event["type"] == "SignalReceived" and isinstance(payload, dict) and "op" in payload:
            by_op[payload["op"]].append(event)
    return by_op


def check_signals(records: Sequence[Record], store: Mapping[str, Execution]) -> list[Violation]:
    """An acknowledged signal is in its execution's history exactly once, an
    unknown one at most once, a refused one never."""
    found = []
    by_op: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for eid, calls in _calls(records, "signal").items():
        for call in calls:
            by_op[(eid, call["n"])].append(call)
    for (eid, n), calls in sorted(by_op.items()):
        execution = store.get(eid)
        received = _signal_events(execution).get(n, [])
        best = _best(calls)
        window = tuple(calls) + tuple(received)
        if best == "ack" and len(received) != 1:
            message = f"acknowledged signal op {n} received {len(received)} times"
            found.append(Violation("signal-once", eid, message, window))
        elif best == "unknown" and len(received) > 1:
            message = f"signal op {n} (no answer) received {len(received)} times"
            found.append(Violation("signal-once", eid, message, window))
        elif best == "refused" and received:
            message = f"refused signal op {n} was received"
            found.append(Violation("signal-refused", eid, message, window))
    return found


def check_cancels(records: Sequence[Record], store: Mapping[str, Execution]) -> list[Violation]:
    """An acknowledged cancel is recorded (CancelRequested) in the history."""
    found = []
    for eid, calls in sorted(_calls(records, "cancel").items()):
        if _best(calls) != "ack":
            continue
        execution = store.get(eid)
        events = execution.events if execution else ()
        if not any(e["type"] == "CancelRequested" for e in events):
            message = "acknowledged cancel is not in the history"
            found.append(Violation("cancel-durable", eid, message, tuple(calls) + events[-2:]))
    return found


def pending(events: Sequence[Record]) -> list[str]:
    """What a live execution waits on: tasks dispatched or scheduled without
    a result, signal waits not delivered, timers and retries not fired."""
    waits: Counter[tuple[str, str]] = Counter()
    opens = {
        "StepScheduled": "task",
        "StepDispatched": "task",
        "SignalAwaitStarted": "signal",
        "TimerStarted": "timer",
        "RetryScheduled": "task",
    }
    closes = {
        "StepSucceeded": "task",
        "StepAttemptFailed": "task",
        "StepAttemptUncertain": "task",
        "StepFailed": "task",
        "StepCancelled": "task",
        "SignalDelivered": "signal",
        "TimerFired": "timer",
    }
    for event in events:
        step = event.get("step", "")
        if event["type"] in opens:
            waits[(opens[event["type"]], step)] = 1
        elif event["type"] in closes:
            waits[(closes[event["type"]], step)] = 0
            if event["type"] == "StepCancelled":
                waits[("signal", step)] = waits[("timer", step)] = 0
    return sorted(f"{kind} {step}" for (kind, step), n in waits.items() if n)


def check_stuck(store: Mapping[str, Execution]) -> list[Violation]:
    """A live execution at the end waits on something (a task, a timer or
    a signal); one waiting on nothing can never move."""
    found = []
    for eid, execution in sorted(store.items()):
        if execution.status in TERMINAL_STATUSES or pending(execution.events):
            continue
        message = f"status {execution.status} with nothing pending"
        found.append(Violation("stuck", eid, message, tuple(execution.events)))
    return found


def check_history_order(store: Mapping[str, Execution]) -> list[Violation]:
    """Each history's sequence numbers run 1..n with no gap or repeat."""
    found = []
    for eid, execution in sorted(store.items()):
        seqs = [e["seq"] for e in execution.events]
        if seqs != list(range(1, len(seqs) + 1)):
            bad = next(i for i, s in enumerate(seqs) if s != i + 1)
            window = tuple(execution.events[max(0, bad - 1) : bad + 1])
            found.append(Violation("history-order", eid, f"sequence breaks at {bad + 1}", window))
    return found


def check(records: Sequence[Record], store: Mapping[str, Execution]) -> list[Violation]:
    """Every check, in a fixed order."""
    return [
        *check_starts(records, store),
        *check_step_results(store),
        *check_signals(records, store),
        *check_cancels(records, store),
        *check_stuck(store),
        *check_history_order(store),
    ]
