"""Traversals over definitions and expressions."""

from __future__ import annotations

from collections.abc import Iterator

from orbit_core.ir import expr as e
from orbit_core.ir.definition import Definition, Step


def children(node: e.Expr) -> Iterator[e.Expr]:
    """The direct sub-expressions of `node`."""
    if isinstance(node, e.Get):
        yield node.target
    elif isinstance(node, e.Index):
        yield node.target
        yield node.index
    elif isinstance(node, e.Lambda):
        yield node.body
    elif isinstance(node, e.Call):
        yield from node.args
    elif isinstance(node, e.Unary):
        yield node.arg
    elif isinstance(node, e.Binary):
        yield node.left
        yield node.right
    elif isinstance(node, e.If):
        yield node.cond
        yield node.then
        yield node.otherwise
    elif isinstance(node, e.Object):
        for entry in node.entries:
            yield entry.value
    elif isinstance(node, e.List):
        yield from node.items


def walk(node: e.Expr) -> Iterator[e.Expr]:
    """`node` and every expression below it, depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def step_exprs(step: Step) -> Iterator[e.Expr]:
    for x in (step.compute, step.with_, step.when, step.idempotency_key):
        if x is not None:
            yield x
    if step.for_each is not None:
        yield step.for_each.over
    if step.compensate is not None:
        for x in (step.compensate.with_, step.compensate.idempotency_key):
            if x is not None:
                yield x


def all_steps(defn: Definition) -> Iterator[Step]:
    yield from defn.steps
    for steps in defn.handlers.values():
        yield from steps
    for handler in defn.events:
        yield from handler.steps


def definition_exprs(defn: Definition) -> Iterator[e.Expr]:
    """Every top-level expression of the definition."""
    for step in all_steps(defn):
        yield from step_exprs(step)
    yield defn.result
    for q in defn.queries:
        yield q.expr
    if defn.continue_as_new is not None:
        yield defn.continue_as_new.with_
        if defn.continue_as_new.when is not None:
            yield defn.continue_as_new.when


def needs_ir_v2(defn: Definition) -> bool:
    """Whether the definition uses a feature only orbit-ir/2 expresses (RULINGS §7)."""
    if (
        defn.signals
        or defn.queries
        or defn.handlers
        or defn.events
        or defn.limits
        or defn.continue_as_new is not None
    ):
        return True
    if any(step.kind in ("await", "compute") for step in defn.steps):
        return True
    return any(isinstance(node, e.Lambda) for root in definition_exprs(defn) for node in walk(root))
