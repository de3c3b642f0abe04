"""Compiled IR documents for CLI tests, built with orbit_core's model.

They stand in for `orbit compile` output until the compiler lands, so
`deploy` and `run` can be tested with `.json` files.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from orbit_core.ir import (
    ChildContract,
    Compensation,
    Definition,
    Retry,
    Step,
    TaskContract,
    definition_hash,
    to_json,
)
from orbit_core.ir import expr as e
from orbit_core.ir.types import BOOL, INT, STRING, Field, RecordType


def _record(**fields: object) -> RecordType:
    return RecordType(fields=tuple(Field(name, t) for name, t in fields.items()))  # type: ignore[arg-type]


def _obj(**entries: e.Expr) -> e.Object:
    return e.Object(entries=tuple(e.Entry(k, v) for k, v in entries.items()))


def hashed(defn: Definition) -> Definition:
    return attrs.evolve(defn, definition_hash=definition_hash(defn))


def hello(version: str = "1.0.0", excitement_default: int = 3) -> Definition:
    """The quick start's Hello workflow (chapter 04)."""
    message = _record(message=STRING)
    return hashed(
        Definition(
            ir_version="orbit-ir/1",
            name="Hello",
            version=version,
            input=RecordType(
                fields=(Field("name", STRING), Field("excitement", INT, excitement_default))
            ),
            output=_record(greeting=STRING),
            steps=(
                Step(
                    name="compose",
                    kind="task",
                    task="greeting.compose",
                    with_=_obj(name=e.Get(e.Input(), "name")),
                    using="python",
                    retry=Retry(attempts=3, backoff="exponential", initial_delay_ms=500),
                ),
                Step(
                    name="decorate",
                    kind="task",
                    task="greeting.decorate",
                    depends_on=("compose",),
                    with_=_obj(
                        message=e.Get(e.StepRef("compose"), "message"),
                        excitement=e.Get(e.Input(), "excitement"),
                    ),
                    using="typescript",
                    timeout_ms=10_000,
                    compensate=Compensation(task="greeting.undo"),
                ),
            ),
            result=_obj(greeting=e.Get(e.StepRef("decorate"), "message")),
            contracts={
                "greeting.compose": TaskContract(
                    "greeting.compose", "1.0.0", _record(name=STRING), message
                ),
                "greeting.decorate": TaskContract(
                    "greeting.decorate",
                    "1.0.0",
                    _record(message=STRING, excitement=INT),
                    message,
                ),
                "greeting.undo": TaskContract(
                    "greeting.undo", "1.0.0", message, _record(removed=BOOL)
                ),
            },
            description="Compose a greeting, then decorate it",
            timeout_ms=300_000,
        )
    )


def parent_of(child: Definition) -> Definition:
    """A workflow that starts `child` as a child workflow step."""
    return hashed(
        Definition(
            ir_version="orbit-ir/1",
            name="Greeter",
            version="1.0.0",
            input=_record(name=STRING),
            output=_record(greeting=STRING),
            steps=(
                Step(
                    name="greet",
                    kind="workflow",
                    workflow=child.name,
                    with_=_obj(name=e.Get(e.Input(), "name")),
                ),
            ),
            result=_obj(greeting=e.Get(e.StepRef("greet"), "greeting")),
            contracts={
                f"workflow:{child.name}": ChildContract(
                    child.name,
                    child.version,
                    child.definition_hash,
                    child.input,
                    child.output,
                )
            },
        )
    )


def write(path: Path, defn: Definition) -> Path:
    path.write_text(json.dumps(to_json(defn), indent=2), encoding="utf-8")
    return path
