"""What `orbit simulate` (chapter 52) answers for each task, and its report.

The run itself is `orbit_cli.simulator`, the machinery under `orbit test`:
the real engine on an in-memory store with a simulated clock. This module
only supplies the workers' answers and renders the result.

Answers, per call: a `--fail TASK=CODE` fails every attempt permanently; a
`--mocks` entry returns its value; anything else returns a sample built from
the task contract's output type by fixed rules (`sample`), so the same
command always plays the same execution. The generated results are not
checked here: the engine validates them against the contract like any
worker's result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from orbit_cli.simulator import Answer, Call, Fail, Outcome, Succeed, Unanswered
from orbit_core.ir import Definition, TaskContract
from orbit_core.ir.types import ListType, MapType, OptionalType, Primitive, RecordType, Type

# The fixed sample of each primitive; strings are built from the field name.
PRIMITIVE_SAMPLES: dict[str, Any] = {
    "int": 1,
    "float": 1.0,
    "bool": True,
    "bytes": "c2FtcGxl",
    "duration": 1000,
    "timestamp": "2026-01-01T00:00:00Z",
    "uuid": "00000000-0000-4000-8000-000000000001",
}


def sample(t: Type, field: str = "value") -> Any:
    """A value of type `t`: deterministic, whatever the workflow does with it.
    `field` names the record field (or the list or map holding the value) the
    sample is for; strings carry it so that each one is recognisable."""
    match t:
        case Primitive("string"):
            return f"{field}-sample"
        case Primitive("json"):
            return {}
        case Primitive(kind):
            return PRIMITIVE_SAMPLES[kind]
        case ListType(items):
            return [sample(items, field)]
        case MapType(values):
            return {"key": sample(values, field)}
        case OptionalType():
            return None
        case RecordType(fields):
            return {f.name: f.default if f.has_default else sample(f.type, f.name) for f in fields}
    raise AssertionError(f"unknown type {t!r}")


def task_contracts(definitions: Iterable[Definition]) -> dict[str, TaskContract]:
    """Every task the definitions can call (built-ins included), by name."""
    found: dict[str, TaskContract] = {}
    for definition in definitions:
        for name, contract in definition.contracts.items():
            if isinstance(contract, TaskContract):
                found.setdefault(name, contract)
    return found


@attrs.define
class Generated:
    """The simulated workers' answers; `sampled` collects the tasks that got
    a generated result."""

    contracts: Mapping[str, TaskContract]
    mocks: Mapping[str, Any]
    fails: Mapping[str, str]
    sampled: set[str] = attrs.field(factory=set)

    def answer(self, call: Call) -> Answer:
        code = self.fails.get(call.task)
        if code is not None:
            return Fail(code, f"simulated failure of `{call.task}` (--fail)", False)
        if call.task in self.mocks:
            return Succeed(self.mocks[call.task])
        contract = self.contracts.get(call.task)
        if contract is None:
            # The engine only dispatches tasks a definition declares.
            return Unanswered(f"task `{call.task}` has no contract to build a result from")
        self.sampled.add(call.task)
        return Succeed(sample(contract.output))


def unknown_tasks(named: Iterable[str], contracts: Mapping[str, TaskContract]) -> list[str]:
    return sorted({name for name in named if name not in contracts})


# ---- the report


def error_json(state: Mapping[str, Any]) -> dict[str, Any] | None:
    error = state.get("error")
    if not isinstance(error, dict):
        return None
    return {k: error[k] for k in ("code", "message", "retryable") if k in error}


def report_json(outcome: Outcome, definition: Definition, sampled: Sequence[str]) -> dict[str, Any]:
    """The one object `--json` prints (chapter 52's fields, in its order)."""
    state = outcome.main.state
    return {
        "workflow": definition.name,
        "version": definition.version,
        "status": state.get("status"),
        "output": state.get("output"),
        "error": error_json(state),
        "simulated_ms": outcome.simulated_ms,
        "sampled_tasks": list(sampled),
        "problems": list(outcome.problems),
        "unsent_signals": list(outcome.unsent_signals),
        "execution": state,
        "history": outcome.main.history,
        "children": [
            {"execution": child.state, "history": child.history} for child in outcome.children
        ],
    }
