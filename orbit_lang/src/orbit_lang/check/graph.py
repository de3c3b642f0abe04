"""The step graph (chapter 13): edges from `after` and from the steps an
expression reads, checked for unknown targets (E0303), self-dependencies
(E0305) and cycles (E0304), and ordered topologically with ties broken by
source order.

Edges are found syntactically, before any type is known, because the type
of a compute step depends on the steps it reads: the checker then types the
steps in this order.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from orbit_lang import ast
from orbit_lang.check.placement import StepShape
from orbit_lang.check.report import Reporter, did_you_mean
from orbit_lang.check.toposort import source_order
from orbit_lang.diagnostics import Label
from orbit_lang.source import Span


def step_reads(
    node: ast.Expr, steps: set[str] | frozenset[str], bound: frozenset[str] = frozenset()
) -> Iterator[ast.Name]:
    """The names in `node` that read a step (not a lambda parameter or a
    bound variable), in source order."""
    for name in roots(node, bound):
        if name.name in steps:
            yield name


def roots(node: ast.Expr, bound: frozenset[str] = frozenset()) -> Iterator[ast.Name]:
    """Every path root of `node` that is not a lambda parameter or in `bound`."""
    stack: list[tuple[ast.Expr, frozenset[str]]] = [(node, bound)]
    while stack:
        current, names = stack.pop()
        if isinstance(current, ast.Name):
            if current.name not in names:
                yield current
        elif isinstance(current, ast.MemberAccess):
            stack.append((current.target, names))
        elif isinstance(current, ast.Index):
            stack.append((current.index, names))
            stack.append((current.target, names))
        elif isinstance(current, ast.Call):
            stack.extend((a, names) for a in reversed(current.arguments))
        elif isinstance(current, ast.Lambda):
            stack.append((current.body, names | {current.parameter.name}))
        elif isinstance(current, ast.Unary):
            stack.append((current.operand, names))
        elif isinstance(current, ast.Binary):
            stack.append((current.right, names))
            stack.append((current.left, names))
        elif isinstance(current, ast.Conditional):
            stack.append((current.otherwise, names))
            stack.append((current.then, names))
            stack.append((current.condition, names))
        elif isinstance(current, ast.ObjectLiteral):
            stack.extend((entry.value, names) for entry in reversed(current.entries))
        elif isinstance(current, ast.ListLiteral):
            stack.extend((item, names) for item in reversed(current.items))


@attrs.frozen
class Edge:
    target: str
    span: Span


@attrs.frozen
class Graph:
    # Step names in execution order.
    order: tuple[str, ...]
    # Direct dependencies of each step (sorted), and all its ancestors.
    depends_on: dict[str, tuple[str, ...]]
    ancestors: dict[str, frozenset[str]]
    # Steps in a cycle (their types cannot be known).
    cyclic: frozenset[str]


def dependency_expressions(shape: StepShape) -> Iterator[ast.Expr]:
    """The expressions whose step reads are dependencies (not compensate)."""
    for kind in (ast.With, ast.When, ast.IdempotencyKey):
        member = shape.get(kind)
        if isinstance(member, ast.With | ast.IdempotencyKey):
            yield member.expression
        elif isinstance(member, ast.When):
            yield member.condition
    loop = shape.get(ast.ForEach)
    if isinstance(loop, ast.ForEach):
        yield loop.iterable
    if isinstance(shape.action, ast.ComputeAction):
        yield shape.action.expression


def build(
    shapes: list[StepShape],
    report: Reporter,
    *,
    outer: frozenset[str] = frozenset(),
    block: str | None = None,
) -> Graph:
    """The graph of one block of steps: the workflow's steps (`block` None),
    or a handler block whose steps may also read the workflow's steps
    (`outer`), which then are no dependencies."""
    names = [shape.name for shape in shapes]
    position = {name: index for index, name in enumerate(names)}
    edges: dict[str, list[Edge]] = {name: [] for name in names}
    for shape in shapes:
        edges[shape.name] = _edges(shape, position, outer, block, report)
    spans = {shape.name: shape.step.name.span for shape in shapes}
    cyclic = _report_cycles(names, spans, edges, report, block)
    depends_on = {name: tuple(sorted({edge.target for edge in edges[name]})) for name in names}
    order = source_order(names, depends_on)
    ancestors = _ancestors(order, depends_on)
    return Graph(tuple(order), depends_on, ancestors, frozenset(cyclic))


def _edges(
    shape: StepShape,
    position: dict[str, int],
    outer: frozenset[str],
    block: str | None,
    report: Reporter,
) -> list[Edge]:
    found: list[Edge] = []
    name = shape.name
    for target in shape.after:
        if target.name == name:
            report.error("E0305", f"step `{name}` cannot run after itself", target.span)
        elif target.name in position:
            found.append(Edge(target.name, target.span))
        elif block is not None and target.name in outer:
            report.error(
                "E0303",
                f"`after` in an `on {block}` block must name a step of the same block",
                target.span,
                notes=["workflow steps have all finished before a handler runs"],
            )
        else:
            report.error(
                "E0303",
                f"`after` references unknown step `{target.name}`",
                target.span,
                help=did_you_mean(target.name, position),
            )
    bound = _loop_variable(shape)
    for expression in dependency_expressions(shape):
        for read in step_reads(expression, set(position), bound):
            if read.name == name:
                report.error("E0305", f"step `{name}` cannot read its own output", read.span)
            else:
                found.append(Edge(read.name, read.span))
    return found


def _loop_variable(shape: StepShape) -> frozenset[str]:
    loop = shape.get(ast.ForEach)
    return frozenset({loop.variable.name}) if isinstance(loop, ast.ForEach) else frozenset()


def _report_cycles(
    names: list[str],
    spans: dict[str, Span],
    edges: dict[str, list[Edge]],
    report: Reporter,
    block: str | None,
) -> set[str]:
    cyclic: set[str] = set()
    for component in _strongly_connected(names, edges):
        if len(component) < 2:
            continue
        cyclic.update(component)
        start = min(component, key=names.index)
        path = _cycle(start, component, edges)
        labels = [
            Label(edge.span, f"`{source}` depends on `{edge.target}`") for source, edge in path
        ]
        cycle = " -> ".join([source for source, _ in path] + [start])
        what = "handler steps" if block is not None else "steps"
        report.error(
            "E0304",
            f"circular dependency between {what}",
            spans[start],
            labels=labels,
            notes=[f"cycle: {cycle}"],
            help="the step graph must be acyclic; remove one of these dependencies",
        )
    return cyclic


def _cycle(start: str, component: set[str], edges: dict[str, list[Edge]]) -> list[tuple[str, Edge]]:
    """A simple cycle from `start` back to it inside `component`."""
    path: list[tuple[str, Edge]] = []
    seen = {start}

    def visit(node: str) -> bool:
        for edge in edges[node]:
            if edge.target == start:
                path.append((node, edge))
                return True
            if edge.target in component and edge.target not in seen:
                seen.add(edge.target)
                path.append((node, edge))
                if visit(edge.target):
                    return True
                path.pop()
        return False

    visit(start)
    return path


def _strongly_connected(names: list[str], edges: dict[str, list[Edge]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in names:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            recursed = False
            while i < len(targets):
                target = targets[i].target
                i += 1
                if target not in index:
                    work.append((node, i))
                    work.append((target, 0))
                    recursed = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if recursed:
                continue
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _ancestors(
    order: list[str], depends_on: dict[str, tuple[str, ...]]
) -> dict[str, frozenset[str]]:
    result: dict[str, frozenset[str]] = {}
    for name in order:
        found: set[str] = set()
        for parent in depends_on[name]:
            found.add(parent)
            found.update(result.get(parent, ()))
        result[name] = frozenset(found)
    return result
