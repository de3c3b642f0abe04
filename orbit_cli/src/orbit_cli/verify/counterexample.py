"""A violation's counterexample: the history file and an `orbit test` case.

The history is the node's own events as the history endpoint returns them
(`{"execution_id", "events"}`), so `orbit replay --history FILE
--definition SRC` reads it and finds every decided event where the decider
puts it.

The test case is chapter 51's syntax: the input, one mock per task called
(its calls in order, `times n then` between different answers), the
signals in the order they arrived, and the violated invariant with its
conditions as `expect`s, so pasted into a `.test.orbit` file it fails
until the bug is fixed. What a test cannot say (a lost worker, a
cancellation, a child's outcome, two units of one task answered
differently, when a signal arrives relative to a timer) becomes a comment,
and the test is then only close to the counterexample.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import orjson

from orbit_cli.verify.explore import Violation, expectation_text
from orbit_cli.verify.literal import literal
from orbit_cli.verify.model import EXECUTION_ID, Model
from orbit_core import events as ev


def slug(name: str) -> str:
    """A file name for a verify block's name: lower case words and dashes."""
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return text or "verify"


def history_document(violation: Violation) -> dict[str, Any]:
    return {
        "execution_id": EXECUTION_ID,
        "events": [ev.to_json(e) for e in violation.node.events],
    }


def write_history(violation: Violation, directory: Path, stem: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.history.json"
    path.write_bytes(orjson.dumps(history_document(violation), option=orjson.OPT_INDENT_2) + b"\n")
    return path


@attrs.frozen
class _Call:
    kind: str  # returns, fails, hangs, lost, child
    value: Any = None
    code: str = ""
    retryable: bool = False

    def behaviour(self) -> str:
        if self.kind == "returns":
            return f"returns {literal(self.value)}"
        if self.kind == "fails":
            return f'fails "{self.code}"' + (" retryable" if self.retryable else "")
        return "hangs"


@attrs.define
class _Walk:
    calls: dict[str, list[_Call]]
    notes: list[str]
    signals: list[str]


def _walk(model: Model, events: tuple[ev.Event, ...]) -> _Walk:
    """Each unit's answered calls, the signals and what a test cannot say."""
    plan = model.plan
    calls: dict[str, list[_Call]] = {}
    in_flight: set[str] = set()
    notes: list[str] = []
    signals: list[str] = []
    for event in events:
        if isinstance(event, ev.StepDispatched):
            in_flight.add(event.step)
        elif isinstance(event, (ev.StepSucceeded, ev.StepAttemptFailed, ev.StepAttemptUncertain)):
            if event.step not in in_flight:
                continue
            in_flight.discard(event.step)
            spec = plan.spec(event.step)
            if spec is not None and spec.is_child:
                notes.append(f"child workflow of step `{event.step}`: {_child_outcome(event)}")
                continue
            if isinstance(event, ev.StepSucceeded):
                calls.setdefault(event.step, []).append(_Call("returns", event.output))
            elif isinstance(event, ev.StepAttemptUncertain):
                notes.append(
                    f"the worker running step `{event.step}` (attempt {event.attempt}) was lost "
                    "and the attempt redelivered"
                )
            elif event.error["code"] == "TIMEOUT":
                calls.setdefault(event.step, []).append(_Call("hangs"))
            else:
                error = event.error
                calls.setdefault(event.step, []).append(
                    _Call("fails", None, error["code"], bool(error.get("retryable")))
                )
        elif isinstance(event, ev.SignalReceived):
            payload = "" if event.payload in ({}, None) else " " + literal(event.payload)
            signals.append(f"signal {event.name}{payload}")
        elif isinstance(event, ev.CancelRequested):
            notes.append(f"the execution was cancelled after event #{event.seq - 1}")
    return _Walk(calls, notes, signals)


def test_case(model: Model, name: str, violation: Violation) -> str:
    """The counterexample as a ready-to-paste `test` declaration."""
    plan = model.plan
    walk = _walk(model, violation.node.events)
    notes, signals = walk.notes, walk.signals
    mocks: dict[str, list[_Call]] = {}
    for key, sequence in walk.calls.items():
        spec = plan.spec(key)
        task = spec.task if spec is not None else None
        if task is None:
            continue
        if task in mocks and mocks[task] != sequence:
            notes.append(
                f"units of task `{task}` were answered differently; the mock follows the first"
            )
            continue
        mocks.setdefault(task, sequence)
    lines = [f'test "{_escape(name)}" {{', f"    workflow {model.definition.name}"]
    lines.append(f"    input {literal(violation.node.state.input)}")
    for task in sorted(mocks):
        lines.append(f'    mock "{task}" {_chain(mocks[task])}')
    lines += [f"    {s}" for s in signals]
    invariant = violation.user
    if invariant is not None:
        for condition in invariant.conditions:
            lines.append(f"    expect {expectation_text(condition)}")
        lines.append(f"    expect {expectation_text(invariant.expectation)}")
    else:
        lines += _built_in_expect(model, violation)
    for note in notes:
        lines.append(f"    // not expressible in a test: {note}")
    lines.append("}")
    return "\n".join(lines)


def _chain(sequence: list[_Call]) -> str:
    groups: list[tuple[_Call, int]] = []
    for call in sequence:
        if groups and groups[-1][0] == call:
            groups[-1] = (call, groups[-1][1] + 1)
        else:
            groups.append((call, 1))
    parts = []
    for index, (call, count) in enumerate(groups):
        if index < len(groups) - 1:
            parts.append(f"{call.behaviour()} times {count} then")
        else:
            parts.append(call.behaviour())
    return " ".join(parts)


def _child_outcome(event: ev.Event) -> str:
    if isinstance(event, ev.StepSucceeded):
        return f"completed with {literal(event.output)}"
    if isinstance(event, ev.StepAttemptFailed):
        return f"ended with {event.error['code']}"
    return "lost"


def _built_in_expect(model: Model, violation: Violation) -> list[str]:
    if violation.key == "compensation":
        match = re.search(r"step `([^`]+)`", violation.message)
        step = match.group(1) if match else ""
        spec = model.plan.spec(step)
        if spec is not None and spec.step.compensate is not None:
            return [f"    expect compensated {step}"]
    return [f"    // built-in invariant: {violation.invariant}"]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
