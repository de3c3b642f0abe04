"""IR documents for the server tests, built with orbit_core's model (the
compiler is not part of this build): the book's workflows of chapters 39, 67
and 68, reduced to what the tests exercise."""

from __future__ import annotations

from typing import Any

import attrs

from orbit_core import ir
from orbit_core.ir import expr as e
from orbit_core.ir import types as t


def _rec(**fields: Any) -> t.RecordType:
    return t.RecordType(tuple(t.Field(name, ty) for name, ty in fields.items()))


def _obj(**entries: e.Expr) -> e.Object:
    return e.Object(tuple(e.Entry(k, v) for k, v in entries.items()))


def _get(root: e.Expr, *names: str) -> e.Expr:
    for name in names:
        root = e.Get(root, name)
    return root


def _finish(defn: ir.Definition) -> dict[str, Any]:
    if ir.needs_ir_v2(defn):
        defn = attrs.evolve(defn, ir_version=ir.IR_V2)
    return ir.to_json(attrs.evolve(defn, definition_hash=ir.definition_hash(defn)))


def greet(*, timeout_ms: int = 30_000, delay_ms: int = 200, version: str = "1.0.0") -> Any:
    """Chapter 68's Greet: one `greeting.compose` step `using ruby`."""
    message = _rec(message=t.STRING)
    return _finish(
        ir.Definition(
            ir_version=ir.IR_V1,
            name="Greet",
            version=version,
            input=_rec(name=t.STRING),
            output=message,
            steps=(
                ir.Step(
                    "compose",
                    "task",
                    task="greeting.compose",
                    using="ruby",
                    with_=_obj(name=_get(e.Input(), "name")),
                    timeout_ms=timeout_ms,
                    retry=ir.Retry(
                        attempts=3,
                        backoff="fixed",
                        initial_delay_ms=delay_ms,
                        non_retryable=("INVALID_NAME",),
                    ),
                ),
            ),
            result=_obj(message=_get(e.StepRef("compose"), "message")),
            contracts={
                "greeting.compose": ir.TaskContract(
                    "greeting.compose", "1.0.0", _rec(name=t.STRING), message
                )
            },
        )
    )


def review() -> Any:
    """A Review that waits for a `decision` signal, then records it with a task."""
    decision = _rec(approved=t.BOOL, note=t.OptionalType(t.STRING))
    return _finish(
        ir.Definition(
            ir_version=ir.IR_V2,
            name="Review",
            version="1.0.0",
            input=_rec(order_id=t.STRING),
            output=t.EMPTY_RECORD,
            steps=(
                ir.Step("decision", "await", signal="decision", timeout_ms=3_600_000),
                ir.Step(
                    "record",
                    "task",
                    task="reviews.record",
                    depends_on=("decision",),
                    with_=_obj(
                        order_id=_get(e.Input(), "order_id"),
                        approved=_get(e.StepRef("decision"), "approved"),
                    ),
                ),
            ),
            result=e.EMPTY_OBJECT,
            contracts={
                "reviews.record": ir.TaskContract(
                    "reviews.record",
                    "1.0.0",
                    _rec(order_id=t.STRING, approved=t.BOOL),
                    _rec(receipt=t.STRING),
                )
            },
            signals=(ir.Signal("decision", decision),),
            queries=(
                ir.Query(
                    "status",
                    _obj(approved=_get(e.StepRef("decision"), "approved")),
                    _rec(approved=t.OptionalType(t.BOOL)),
                ),
                ir.Query("broken", e.Binary("div", e.Int(1), e.Int(0)), t.INT),
            ),
        )
    )


def print_labels() -> Any:
    """Chapter 39's PrintLabels: a `for` step and an `on failure` handler."""
    return _finish(
        ir.Definition(
            ir_version=ir.IR_V1,
            name="PrintLabels",
            version="1.0.0",
            input=_rec(skus=t.ListType(t.STRING)),
            output=t.EMPTY_RECORD,
            steps=(
                ir.Step(
                    "print",
                    "task",
                    task="labels.print",
                    for_each=ir.ForEach("sku", _get(e.Input(), "skus")),
                    with_=_obj(sku=e.Var("sku")),
                ),
            ),
            result=e.EMPTY_OBJECT,
            contracts={
                "labels.print": ir.TaskContract(
                    "labels.print", "1.0.0", _rec(sku=t.STRING), _rec(label=t.STRING)
                )
            },
            handlers={
                "failure": (
                    ir.Step(
                        "alert",
                        "compute",
                        compute=_obj(
                            code=_get(e.Failure(), "code"), message=_get(e.Failure(), "message")
                        ),
                    ),
                )
            },
        )
    )


def countdown() -> Any:
    """Chapter 25's Countdown: continue-as-new until `n` reaches zero."""
    left = _get(e.StepRef("tick"), "left")
    return _finish(
        ir.Definition(
            ir_version=ir.IR_V2,
            name="Countdown",
            version="1.0.0",
            input=_rec(n=t.INT),
            output=t.EMPTY_RECORD,
            steps=(
                ir.Step(
                    "tick",
                    "compute",
                    compute=_obj(left=e.Binary("sub", _get(e.Input(), "n"), e.Int(1))),
                ),
            ),
            result=e.EMPTY_OBJECT,
            contracts={},
            continue_as_new=ir.ContinueAsNew(_obj(n=left), e.Binary("gt", left, e.Int(0))),
        )
    )


def chain(steps: int = 3, task: str = "bench.step") -> Any:
    """`steps` sequential task steps, each fed the previous step's output."""
    record = _rec(i=t.INT)
    chained = []
    for i in range(steps):
        source: e.Expr = _get(e.StepRef(f"s{i - 1}"), "i") if i else e.Int(0)
        chained.append(
            ir.Step(
                f"s{i}",
                "task",
                task=task,
                depends_on=(f"s{i - 1}",) if i else (),
                with_=_obj(i=source),
            )
        )
    return _finish(
        ir.Definition(
            ir_version=ir.IR_V1,
            name="Chain",
            version="1.0.0",
            input=t.EMPTY_RECORD,
            output=t.EMPTY_RECORD,
            steps=tuple(chained),
            result=e.EMPTY_OBJECT,
            contracts={task: ir.TaskContract(task, "1.0.0", record, record)},
        )
    )
