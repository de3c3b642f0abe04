"""Text formats of the step graph: Mermaid flowcharts, Graphviz DOT and
Mermaid sequence diagrams (chapter 55). Each is a plain walk over the
`orbit_cli.graph` model or the definition, line by line, so the output is
the same for the same definition and reviews well as a diff.
"""

from __future__ import annotations

from orbit_cli.graph import (
    CONTINUE_ID,
    Block,
    Node,
    build,
    child_output,
    contract_version,
    duration,
    header_lines,
    next_input_fields,
    type_summary,
)
from orbit_core.ir import Definition, Step
from orbit_core.ir.printer import render_expr

_MERMAID_ENTITIES = str.maketrans({"<": "#lt;", ">": "#gt;", '"': "#quot;", "#": "#35;"})
_MERMAID_SHAPES = {
    "step": ('["', '"]'),
    "conditional": ('{{"', '"}}'),
    "compensation": ('(["', '"]):::compensation'),
    "signal": ('>"', '"]:::signal'),
    "continue": ('[["', '"]]'),
}
_MERMAID_ARROWS = {
    "dependency": "-->",
    "compensate": "-. compensate .->",
    "signal": "-.->",
    "next_run": "-. next run .->",
}


def mermaid(definition: Definition) -> str:
    graph = build(definition)
    lines = ["flowchart TD"]
    lines += [f"    %% {line}" for line in graph.header]
    lines.append("    classDef compensation stroke-dasharray: 4 3")
    lines.append("    classDef signal stroke-dasharray: 2 2")
    lines += _mermaid_items(graph.main, "    ")
    for panel in graph.panels:
        lines.append(f'    subgraph {panel.id}["{panel.title}"]')
        lines.append("        direction TB")
        lines += _mermaid_items(panel, "        ")
        lines.append("    end")
    return "\n".join(lines) + "\n"


def _mermaid_id(node_id: str) -> str:
    # Mermaid reads a bare `end` as the end of a subgraph, so a step named
    # `end` is drawn as `end__` (its label still says `end`). Handler ids
    # carry a prefix and never need this.
    return "end__" if node_id == "end" else node_id


def _mermaid_items(block: Block, indent: str) -> list[str]:
    lines = []
    for item in block.items:
        if isinstance(item, Node):
            opening, closing = _MERMAID_SHAPES[item.kind]
            node_id = _mermaid_id(item.id)
            lines.append(f"{indent}{node_id}{opening}{mermaid_label(item.lines)}{closing}")
        else:
            arrow = _MERMAID_ARROWS[item.kind]
            lines.append(f"{indent}{_mermaid_id(item.source)} {arrow} {_mermaid_id(item.target)}")
    return lines


def mermaid_label(lines: tuple[str, ...]) -> str:
    title, *details = (line.translate(_MERMAID_ENTITIES) for line in lines)
    return title + "".join(f"<br/><small>{detail}</small>" for detail in details)


def dot(definition: Definition) -> str:
    graph = build(definition)
    lines = [f"digraph {_dot_quote(definition.name)} {{"]
    lines += [f"  // {line}" for line in graph.header]
    lines.append("  rankdir=TB;")
    lines.append('  node [shape=box, style=rounded, fontname="Helvetica", fontsize=11];')
    lines.append('  edge [fontname="Helvetica", fontsize=10];')
    lines += _dot_items(graph.main, "  ")
    for panel in graph.panels:
        lines.append(f"  subgraph {_dot_quote('cluster_' + panel.id)} {{")
        lines.append(f"    label={_dot_quote(panel.title)};")
        lines.append("    style=dashed;")
        lines += _dot_items(panel, "    ")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


_DOT_NODE_ATTRIBUTES = {
    "step": "",
    "conditional": ", shape=hexagon",
    "compensation": ', style="rounded,dashed"',
    "signal": ", shape=cds, style=dashed",
    "continue": ", peripheries=2",
}
_DOT_EDGE_ATTRIBUTES = {
    "dependency": "",
    "compensate": ' [style=dashed, label="compensate"]',
    "signal": " [style=dashed]",
    "next_run": ' [style=dashed, constraint=false, label="next run"]',
}


def _dot_items(block: Block, indent: str) -> list[str]:
    lines = []
    for item in block.items:
        if isinstance(item, Node):
            label = _dot_quote("\n".join(item.lines))
            attributes = _DOT_NODE_ATTRIBUTES[item.kind]
            lines.append(f"{indent}{_dot_quote(item.id)} [label={label}{attributes}];")
        else:
            source, target = _dot_quote(item.source), _dot_quote(item.target)
            lines.append(f"{indent}{source} -> {target}{_DOT_EDGE_ATTRIBUTES[item.kind]};")
    return lines


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


# --- sequence diagrams -------------------------------------------------------


def _sequence_text(text: str) -> str:
    # `#` starts an entity and `;` ends a statement in Mermaid's sequence syntax.
    return text.replace("#", "#35;").replace(";", "#59;")


class _Sequence:
    def __init__(self, definition: Definition) -> None:
        self.definition = definition
        self.participants: list[str] = []
        self.body: list[str] = []

    def participant(self, name: str) -> str:
        if name not in self.participants:
            self.participants.append(name)
        return name

    def step(self, step: Step, depth: int, *, undo: bool = False) -> None:
        blocks = []
        if step.when is not None and not undo:
            blocks.append(f"opt when {_sequence_text(render_expr(step.when))}")
        if step.for_each is not None:
            blocks.append(f"loop for each {step.for_each.var}")
        for i, opening in enumerate(blocks):
            self.body.append("    " * (depth + i) + opening)
        inner = "    " * (depth + len(blocks))
        self._call(step, inner, undo)
        for i in reversed(range(len(blocks))):
            self.body.append("    " * (depth + i) + "end")

    def _call(self, step: Step, indent: str, undo: bool) -> None:
        definition = self.definition
        if undo and step.compensate is not None:
            task = step.compensate.task
            target = self.participant(task.split(".", 1)[0])
            text = f"undo {step.name}: {contract_version(definition, task)}"
            self._round_trip(indent, target, text, definition.contracts.get(task))
            return
        if step.kind == "task" and step.task is not None:
            target = self.participant(step.task.split(".", 1)[0])
            text = f"{step.name}: {contract_version(definition, step.task)}"
            self._round_trip(indent, target, text, definition.contracts.get(step.task))
        elif step.kind == "workflow" and step.workflow is not None:
            target = self.participant(f"child_{step.workflow}")
            output = child_output(definition, step.workflow)
            self.body.append(f"{indent}W->>+{target}: {step.name}: child workflow {step.workflow}")
            reply = type_summary(output) if output is not None else "result"
            self.body.append(f"{indent}{target}-->>-W: {_sequence_text(reply)}")
        elif step.kind == "await":
            sender = self.participant("Sender")
            text = f"{step.name}: signal {step.signal}"
            if step.timeout_ms is not None:
                text += f" (timeout {duration(step.timeout_ms)})"
            self.body.append(f"{indent}{sender}->>W: {text}")
        elif step.kind == "sleep":
            self.body.append(
                f"{indent}Note over W: {step.name}: sleep {duration(step.sleep_ms or 0)}"
            )
        else:
            self.body.append(f"{indent}Note over W: {step.name}: compute")

    def _round_trip(self, indent: str, target: str, text: str, contract: object) -> None:
        self.body.append(f"{indent}W->>+{target}: {_sequence_text(text)}")
        output = getattr(contract, "output", None)
        reply = type_summary(output) if output is not None else "result"
        self.body.append(f"{indent}{target}-->>-W: {_sequence_text(reply)}")


def sequence(definition: Definition) -> str:
    seq = _Sequence(definition)
    for step in definition.steps:
        seq.step(step, 1)
    can = definition.continue_as_new
    if can is not None:
        depth = 1
        if can.when is not None:
            seq.body.append(f"    opt when {_sequence_text(render_expr(can.when))}")
            depth = 2
        fields = _sequence_text(next_input_fields(can.with_))
        seq.body.append("    " * depth + f"W->>W: {CONTINUE_ID}: next run with {fields}")
        if can.when is not None:
            seq.body.append("    end")
    for kind in ("failure", "cancel", "timeout"):
        steps = definition.handlers.get(kind)
        if steps:
            seq.body.append(f"    opt on {kind}")
            for step in steps:
                seq.step(step, 2)
            seq.body.append("    end")
    for event in sorted(definition.events, key=lambda ev: ev.signal):
        seq.body.append(f"    opt on event {event.signal}")
        for step in event.steps:
            seq.step(step, 2)
        seq.body.append("    end")
    compensated = [step for step in definition.steps if step.compensate is not None]
    if compensated:
        seq.body.append("    opt compensation, in reverse order, after a failure or cancellation")
        for step in reversed(compensated):
            seq.step(step, 2, undo=True)
        seq.body.append("    end")
    lines = ["sequenceDiagram"]
    lines += [f"    %% {line}" for line in header_lines(definition)]
    lines.append(f"    participant W as {definition.name}")
    lines += [f"    participant {name}" for name in seq.participants]
    return "\n".join([*lines, *seq.body]) + "\n"


__all__ = ["dot", "mermaid", "mermaid_label", "sequence"]
