"""Test-only helpers for the engine tests: a terse builder for IR definitions
mirroring the book's workflows, and `orbit logs`-style rendering of events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import evalkit as _evalkit

from orbit_core import events as ev
from orbit_core.api import Accepted, Assignment
from orbit_core.engine import Engine
from orbit_core.ir import (
    IR_V1,
    IR_V2,
    ChildContract,
    Definition,
    Step,
    TaskContract,
    definition_hash,
    needs_ir_v2,
)
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.jsontypes import JsonValue

Str, Int, Float, Bool, Json = t.STRING, t.INT, t.FLOAT, t.BOOL, t.JSON
EMPTY = t.EMPTY_RECORD
# The expression builders are the evaluator tests' (`evalkit`), under the names
# the engine tests use.
binop, call, inp, lit = _evalkit.b, _evalkit.call, _evalkit.inp, _evalkit.x
path, ref, var = _evalkit.path, _evalkit.step, _evalkit.var


def opt(ty: t.Type) -> t.OptionalType:
    return t.OptionalType(ty)


def lst(ty: t.Type) -> t.ListType:
    return t.ListType(ty)


def rec(**fields: Any) -> t.RecordType:
    """`rec(name=S, excitement=(I, 3))`: a record type; a tuple gives a default."""
    out = []
    for name, spec in fields.items():
        if isinstance(spec, tuple):
            out.append(t.Field(name, spec[0], spec[1]))
        else:
            out.append(t.Field(name, spec))
    return t.RecordType(tuple(out))


def obj(**entries: Any) -> e.Object:
    return e.Object(tuple(e.Entry(k, lit(v)) for k, v in entries.items()))


def task(
    name: str,
    input: t.RecordType = EMPTY,
    output: t.Type = EMPTY,
    version: str = "1.0.0",
    compensated_by: str | None = None,
) -> TaskContract:
    return TaskContract(name, version, input, output, compensated_by)


def step(name: str, kind: str = "task", **kw: Any) -> Step:
    deps = set(kw.pop("after", ()))
    for key in ("with_", "when", "compute", "idempotency_key"):
        if kw.get(key) is not None:
            deps |= _refs(kw[key])
    if kw.get("for_each") is not None:
        deps |= _refs(kw["for_each"].over)
    kw["depends_on"] = tuple(sorted(deps - {name}))
    return Step(name, kind, **kw)


def _refs(x: e.Expr) -> set[str]:
    from orbit_core.ir.walk import walk

    return {n.name for n in walk(x) if isinstance(n, e.StepRef)}


def workflow(
    name: str,
    steps: list[Step],
    contracts: Sequence[TaskContract | ChildContract],
    *,
    input: t.RecordType = EMPTY,
    output: t.Type | None = None,
    result: e.Expr | None = None,
    version: str = "1.0.0",
    **kw: Any,
) -> Definition:
    keys = {
        (f"workflow:{c.name}" if isinstance(c, ChildContract) else c.name): c for c in contracts
    }
    defn = Definition(
        ir_version=IR_V1,
        name=name,
        version=version,
        input=input,
        output=output if output is not None else EMPTY,
        steps=tuple(steps),
        result=result if result is not None else e.EMPTY_OBJECT,
        contracts=keys,
        **kw,
    )
    if needs_ir_v2(defn):
        defn = _evolve(defn, ir_version=IR_V2)
    return _evolve(defn, definition_hash=definition_hash(defn))


def plain() -> Definition:
    """Chapter 42's one-step workflow: `work` runs `demo.work` with `n`."""
    return workflow(
        "Plain",
        [step("work", task="demo.work", with_=obj(n=inp("n")))],
        [task("demo.work", rec(n=Int), rec(ok=Bool))],
        input=rec(n=Int),
    )


def child_contract(defn: Definition) -> ChildContract:
    return ChildContract(defn.name, defn.version, defn.definition_hash, defn.input, defn.output)


def _evolve(defn: Definition, **changes: Any) -> Definition:
    import attrs

    return attrs.evolve(defn, **changes)


# ---------------------------------------------------------------- rendering

_FIELDS = (
    "step",
    "attempt",
    "worker_id",
    "reason",
    "delay_ms",
    "redelivery",
    "outcome",
    "run",
    "next_run",
    "kind",
    "limit",
    "name",
    "signal",
    "signal_seq",
)


def line(event: ev.Event) -> str:
    """An event as `orbit logs` prints it, without the time and seq columns."""
    parts = [type(event).TYPE]
    for f in _FIELDS:
        value = getattr(event, f, None)
        if value is None or (f == "redelivery" and value is False):
            continue
        if f == "run" and value == 1:
            continue
        if isinstance(value, bool):
            value = str(value).lower()
        parts.append(f"{f}={value}")
    error = getattr(event, "error", None)
    if error is not None:
        parts.append(f"error={error['code']} {error['message']}")
    return " ".join(parts)


def timeline(engine: Engine, execution_id: str, run: int | None = None) -> list[str]:
    return [line(x) for x in engine.events(execution_id, run)]


def times(engine: Engine, execution_id: str) -> list[int]:
    events = engine.events(execution_id)
    return [x.timestamp_ms - events[0].timestamp_ms for x in events]


def parse_book(text: str) -> list[str]:
    """The book's `orbit logs` lines without the `+ time #seq` columns."""
    out = []
    for raw in text.strip().splitlines():
        text_line = raw.strip()
        if not text_line.startswith("+"):
            continue
        rest = text_line[1:].split(None, 2)[2]
        out.append(" ".join(rest.split()))
    return out


class Worker:
    """A scripted remote worker: the test decides when it polls and answers."""

    def __init__(
        self, engine: Engine, worker_id: str, contracts: list[str], runtime: str = "python"
    ) -> None:
        self.engine = engine
        self.worker_id = worker_id
        reply = engine.workers.register(worker_id, runtime, [(c, "1.0.0") for c in contracts])
        self.session = reply["worker_session_id"]

    def take(self) -> Assignment:
        task = self.engine.workers.poll(self.session, 0)
        assert task is not None, f"{self.worker_id} found no task"
        return task

    def ok(self, task: Assignment, output: JsonValue = None) -> Accepted:
        return self.engine.workers.complete(task["token"], output)

    def err(
        self,
        task: Assignment,
        code: str,
        message: str = "",
        retryable: bool = True,
        details: JsonValue = None,
    ) -> Accepted:
        return self.engine.workers.fail(task["token"], code, message, retryable, details)

    def run(self, output: JsonValue = None) -> Assignment:
        """Takes the next task and completes it."""
        task = self.take()
        self.ok(task, output)
        return task

    def heartbeat(self) -> list[str]:
        cancel: list[str] = self.engine.workers.heartbeat(self.session)["cancel"]
        return cancel
