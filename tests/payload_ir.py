"""IR for the payload and fuzz tests: `Sink` takes JSON everywhere, so any
JSON value a client or worker sends reaches the engine rather than being
stopped by a type."""

from __future__ import annotations

from typing import Any

import attrs

from orbit_core import ir
from orbit_core.ir import expr as e
from orbit_core.ir import types as t


def _rec(**fields: t.Type | tuple[t.Type, Any]) -> t.RecordType:
    return t.RecordType(
        tuple(
            t.Field(name, *spec) if isinstance(spec, tuple) else t.Field(name, spec)
            for name, spec in fields.items()
        )
    )


def sink(name: str = "Sink", task: str = "sink.keep") -> dict[str, Any]:
    """Input `{data: JSON, n: Int = 0}`; a `keep` task step echoing `data`
    (output `{data: JSON}`) beside an `await` of the `note` signal (payload
    `{data: JSON}`); queries `n` and `broken` (a division by zero)."""
    data = _rec(data=t.JSON)
    defn = ir.Definition(
        ir_version=ir.IR_V2,
        name=name,
        version="1.0.0",
        input=_rec(data=t.JSON, n=(t.INT, 0)),
        output=t.EMPTY_RECORD,
        steps=(
            ir.Step(
                "keep",
                "task",
                task=task,
                with_=e.Object((e.Entry("data", e.Get(e.Input(), "data")),)),
                timeout_ms=600_000,
            ),
            ir.Step("note", "await", signal="note", timeout_ms=3_600_000),
        ),
        result=e.EMPTY_OBJECT,
        contracts={task: ir.TaskContract(task, "1.0.0", data, data)},
        signals=(ir.Signal("note", data),),
        queries=(
            ir.Query("n", e.Get(e.Input(), "n"), t.INT),
            ir.Query("broken", e.Binary("div", e.Int(1), e.Int(0)), t.INT),
        ),
    )
    return ir.to_json(attrs.evolve(defn, definition_hash=ir.definition_hash(defn)))


def nested(depth: int, leaf: Any = 0) -> Any:
    """`leaf` inside `depth` levels of objects `{"a": ...}`."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value
