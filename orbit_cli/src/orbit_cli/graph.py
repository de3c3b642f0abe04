"""The step graph of a compiled workflow, for `orbit graph` and `orbit docs`.

Everything here reads the compiled `Definition` (the IR the runtime runs),
never the source, so a diagram shows implied dependencies, filled-in retry
defaults and the exact execution order. `build(definition)` turns it into a
small model (blocks of nodes and edges, each node with the label lines of
chapter 55); the renderers (`graph_text` for Mermaid, DOT and sequence
diagrams, `graph_svg` for SVG) only format that model, so the three formats
cannot disagree about what a step is.

Determinism: steps keep the IR's order (a stable topological order),
dependencies are sorted, handler blocks come as failure, cancel, timeout and
event blocks sorted by signal. Node ids of handler and event steps carry
their block's id (`on_failure__tell_customer`), so they never clash with a
main step; `continue_as_new` is a keyword and cannot be a step name.
"""

from __future__ import annotations

import attrs

from orbit_core.flow.text import flow_parts
from orbit_core.ir import Definition, Step
from orbit_core.ir import expr as e
from orbit_core.ir.definition import HANDLER_KINDS, LIMIT_NAMES, ChildContract, Retry
from orbit_core.ir.printer import render_expr
from orbit_core.ir.types import RecordType, Type, render_type

CONTINUE_ID = "continue_as_new"
_DURATION_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


def duration(ms: int) -> str:
    """`30d`, `1h`, `500ms`: the largest unit that divides the value."""
    for unit, size in _DURATION_UNITS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


@attrs.frozen
class Node:
    id: str
    # The first line is the title; the rest are the smaller detail lines.
    lines: tuple[str, ...]
    kind: str  # "step" | "conditional" | "compensation" | "signal" | "continue"
    step: Step | None = None


@attrs.frozen
class Edge:
    source: str
    target: str
    kind: str  # "dependency" | "compensate" | "signal" | "next_run"


@attrs.frozen
class Block:
    """The main graph (id "") or one handler or event block, drawn apart."""

    id: str
    title: str
    # Nodes and edges in the order the text formats print them.
    items: tuple[Node | Edge, ...]

    @property
    def nodes(self) -> list[Node]:
        return [item for item in self.items if isinstance(item, Node)]

    @property
    def edges(self) -> list[Edge]:
        return [item for item in self.items if isinstance(item, Edge)]


@attrs.frozen
class Graph:
    definition: Definition
    header: tuple[str, ...]
    main: Block
    panels: tuple[Block, ...]


def header_lines(definition: Definition) -> tuple[str, ...]:
    """The comment lines every format starts with: key, hash, timeout, limits."""
    lines = [definition.key, definition.definition_hash]
    if definition.timeout_ms is not None:
        lines.append(f"workflow timeout {duration(definition.timeout_ms)}")
    if definition.limits:
        order = {name: i for i, name in enumerate(LIMIT_NAMES)}
        names = sorted(definition.limits, key=lambda n: (order.get(n, len(order)), n))
        lines.append("limits " + ", ".join(f"{n} {definition.limits[n]}" for n in names))
    lines.extend(flow_parts(definition.flow))
    return tuple(lines)


def contract_version(definition: Definition, task: str) -> str:
    contract = definition.contracts.get(task)
    return f"{task}@{contract.version}" if contract is not None else task


def action(definition: Definition, step: Step) -> str:
    """The second label line: what the step does."""
    if step.kind == "task" and step.task is not None:
        text = contract_version(definition, step.task)
        return f"{text} · {step.using}" if step.using else text
    if step.kind == "workflow":
        return f"child workflow {step.workflow}"
    if step.kind == "sleep":
        return f"sleep {duration(step.sleep_ms or 0)}"
    if step.kind == "await":
        return f"await signal {step.signal}"
    return "compute"


def retry_text(retry: Retry) -> str:
    """`5 attempts, exponential 500ms..10s` or `3 attempts, fixed 1s`."""
    if retry.backoff == "exponential":
        delays = f"exponential {duration(retry.initial_delay_ms)}..{duration(retry.max_delay_ms)}"
    else:
        delays = f"fixed {duration(retry.initial_delay_ms)}"
    return f"{retry.attempts} attempts, {delays}"


def fan_out_text(step: Step) -> str | None:
    if step.for_each is None:
        return None
    text = f"for each {step.for_each.var}"
    if step.max_parallel is not None:
        text += f" (max {step.max_parallel} parallel)"
    return text


def timeouts_text(step: Step) -> str | None:
    parts = []
    if step.timeout_ms is not None:
        parts.append(f"timeout {duration(step.timeout_ms)}")
    if step.queue_timeout_ms is not None:
        parts.append(f"queue {duration(step.queue_timeout_ms)}")
    return ", ".join(parts) or None


def step_lines(definition: Definition, step: Step) -> tuple[str, ...]:
    lines = [step.name, action(definition, step)]
    fan_out = fan_out_text(step)
    if fan_out:
        lines.append(fan_out)
    if step.when is not None:
        lines.append(f"when {render_expr(step.when)}")
    if step.retry is not None and step.retry.attempts > 1:
        lines.append(f"retry {retry_text(step.retry)}")
    if step.idempotency_key is not None:
        lines.append("idempotency key")
    timeouts = timeouts_text(step)
    if timeouts:
        lines.append(timeouts)
    lines.extend(flow_parts(step.flow))
    return tuple(lines)


def next_input_fields(expr: e.Expr) -> str:
    """`{ a, b }` for an object literal, else the expression itself."""
    if isinstance(expr, e.Object):
        return (
            "{ " + ", ".join(entry.key for entry in expr.entries) + " }" if expr.entries else "{}"
        )
    return render_expr(expr)


def continue_lines(definition: Definition) -> tuple[str, ...]:
    can = definition.continue_as_new
    assert can is not None
    when = f"when {render_expr(can.when)}" if can.when is not None else "always"
    return ("continue as new", when, f"next input {next_input_fields(can.with_)}")


def _steps_block(
    definition: Definition, block_id: str, steps: tuple[Step, ...]
) -> list[Node | Edge]:
    prefix = f"{block_id}__" if block_id else ""
    names = {step.name for step in steps}
    items: list[Node | Edge] = []
    signals_drawn: set[str] = set()
    for step in steps:
        node_id = prefix + step.name
        if step.kind == "await" and step.signal is not None and step.signal not in signals_drawn:
            signals_drawn.add(step.signal)
            items.append(
                Node(f"{prefix}signal__{step.signal}", (f"signal {step.signal}",), "signal")
            )
        kind = "conditional" if step.when is not None else "step"
        items.append(Node(node_id, step_lines(definition, step), kind, step))
        if step.kind == "await" and step.signal is not None:
            items.append(Edge(f"{prefix}signal__{step.signal}", node_id, "signal"))
        for dep in sorted(set(step.depends_on)):
            if dep in names:
                items.append(Edge(prefix + dep, node_id, "dependency"))
        if step.compensate is not None:
            undo = step.compensate
            text = contract_version(definition, undo.task)
            if undo.using:
                text += f" · {undo.using}"
            undo_id = f"{node_id}__undo"
            items.append(Node(undo_id, (f"undo {step.name}", text), "compensation", step))
            items.append(Edge(node_id, undo_id, "compensate"))
    return items


def final_steps(steps: tuple[Step, ...]) -> list[str]:
    """The steps nothing depends on, in execution order."""
    needed = {dep for step in steps for dep in step.depends_on}
    return [step.name for step in steps if step.name not in needed]


def first_steps(steps: tuple[Step, ...]) -> list[str]:
    names = {step.name for step in steps}
    return [step.name for step in steps if not any(d in names for d in step.depends_on)]


def build(definition: Definition) -> Graph:
    items = _steps_block(definition, "", definition.steps)
    if definition.continue_as_new is not None:
        items.append(Node(CONTINUE_ID, continue_lines(definition), "continue"))
        for name in sorted(final_steps(definition.steps)):
            items.append(Edge(name, CONTINUE_ID, "dependency"))
        for name in first_steps(definition.steps):
            items.append(Edge(CONTINUE_ID, name, "next_run"))
    panels = []
    for kind in HANDLER_KINDS:
        steps = definition.handlers.get(kind)
        if steps:
            block_id = f"on_{kind}"
            title = f"on {kind}"
            panels.append(Block(block_id, title, tuple(_steps_block(definition, block_id, steps))))
    for event in sorted(definition.events, key=lambda ev: ev.signal):
        block_id = f"on_event_{event.signal}"
        title = f"on event {event.signal}"
        panels.append(
            Block(block_id, title, tuple(_steps_block(definition, block_id, event.steps)))
        )
    return Graph(definition, header_lines(definition), Block("", "", tuple(items)), tuple(panels))


def type_summary(t: Type) -> str:
    """A reply in a sequence diagram: a named record's name, else its field names."""
    if isinstance(t, RecordType) and t.name is None:
        return "{ " + ", ".join(f.name for f in t.fields) + " }" if t.fields else "{}"
    return render_type(t)


def child_output(definition: Definition, name: str) -> Type | None:
    for contract in definition.contracts.values():
        if isinstance(contract, ChildContract) and contract.name == name:
            return contract.output
    return None
