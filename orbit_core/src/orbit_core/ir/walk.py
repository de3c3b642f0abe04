"""Traversals over definitions and expressions."""

from __future__ import annotations

from collections.abc import Iterator

from orbit_core import limits
from orbit_core.ir import expr as e
from orbit_core.ir.definition import Definition, Flow, Step

# The deepest an expression's encoding may go: a document may nest
# `limits.MAX_DEPTH` levels (RULINGS §22), and an expression's object sits
# at most 6 containers down (`$.events[i].steps[j].compensate.with`).
MAX_EXPR_DEPTH = limits.MAX_DEPTH - 6


def children(node: e.Expr) -> tuple[e.Expr, ...]:
    """The direct sub-expressions of `node`, in source order."""
    match node:
        case e.Get(target, _) | e.Lambda(_, target) | e.Unary(_, target):
            return (target,)
        case e.Index(target, index):
            return (target, index)
        case e.Binary(_, left, right):
            return (left, right)
        case e.If(cond, then, otherwise):
            return (cond, then, otherwise)
        case e.Call(_, args) | e.List(args):
            return args
        case e.Object(entries):
            return tuple(entry.value for entry in entries)
        case (
            e.Str()
            | e.Int()
            | e.Float()
            | e.Bool()
            | e.Null()
            | e.Duration()
            | e.Input()
            | e.Execution()
            | e.Failure()
            | e.Event()
            | e.StepRef()
            | e.Var()
        ):
            return ()


def _child_levels(node: e.Expr) -> int:
    """How many JSON containers the encoding of `node` puts between its own
    object and each child's (codec.expr_to_json): `args` and `items` are a
    list, an object's entries a list of `{key, value}` objects."""
    match node:
        case e.Call() | e.List():
            return 2
        case e.Object():
            return 3
        case _:
            return 1


def expr_depth(node: e.Expr) -> int:
    """The nesting depth of `node`'s JSON encoding, in arrays and objects
    (a literal is 1), without encoding it; iterative, so any tree will do."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        below = depth + _child_levels(current)
        # The list of `args`, `items` or `entries` counts even when empty.
        deepest = max(deepest, depth if below == depth + 1 else depth + 1)
        stack.extend((child, below) for child in children(current))
    return deepest


def walk(node: e.Expr) -> Iterator[e.Expr]:
    """`node` and every expression below it, depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


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
    if step.flow is not None:
        yield from flow_exprs(step.flow)


def flow_exprs(flow: Flow) -> Iterator[e.Expr]:
    """The key, priority and weight expressions of a flow declaration."""
    for x in (
        flow.concurrency.key if flow.concurrency else None,
        flow.rate.key if flow.rate else None,
        flow.priority,
        flow.fairness.key if flow.fairness else None,
        flow.fairness.weight if flow.fairness else None,
        flow.debounce.key if flow.debounce else None,
    ):
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
    for f in defn.search:
        yield f.expr
    if defn.continue_as_new is not None:
        yield defn.continue_as_new.with_
        if defn.continue_as_new.when is not None:
            yield defn.continue_as_new.when
    if defn.flow is not None:
        yield from flow_exprs(defn.flow)


def needs_ir_v2(defn: Definition) -> bool:
    """Whether the definition uses a feature only orbit-ir/2 expresses (RULINGS §7)."""
    if (
        defn.signals
        or defn.queries
        or defn.handlers
        or defn.events
        or defn.limits
        or defn.continue_as_new is not None
        or defn.migrations
        or defn.flow is not None
        or defn.search
        or defn.retention_ms is not None
    ):
        return True
    if any(step.kind in ("await", "compute") or step.flow for step in defn.steps):
        return True
    return any(isinstance(node, e.Lambda) for root in definition_exprs(defn) for node in walk(root))
