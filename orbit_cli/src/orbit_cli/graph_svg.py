"""`orbit graph --format svg`: the step graph laid out and drawn by orbit
itself, as one standalone SVG document (no Graphviz, no browser).

Why our own layout rather than a library: chapter 55 fixes the layout, not
just its look: a step sits one layer below its deepest dependency (longest
path), steps in a layer keep the IR's execution order, a compensation sits to
the right of its step, handler and event blocks are panels below, and the
continue-as-new node goes one layer below the final steps with its next run
edge up the right side. The maintained general-purpose layout libraries on
PyPI (grandalf's Sugiyama layout, or Graphviz through its bindings, which
needs the external binary we must not require) reorder nodes to reduce
crossings, which breaks "layers keep the execution order" and would make the
picture depend on the heuristic's version. The layered layout above is a few
dozen lines, deterministic and needs no dependency; SVG text is written with
the standard library's XML escaping.

Sizes are estimated from character counts in a monospace font (so no font
metrics are needed): 7.4 px per character for 12 px bold titles, 6.2 px for the
10 px detail lines (a monospace character is about 0.6 em, plus a margin). Coordinates are rounded to one decimal, so the output is the
same on every platform.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

import attrs

from orbit_cli.graph import CONTINUE_ID, Block, Node, build
from orbit_core.ir import Definition

_TITLE_CHAR = 7.4
_DETAIL_CHAR = 6.2
_PAD_X = 10.0
_PAD_Y = 8.0
_TITLE_LINE = 16.0
_DETAIL_LINE = 14.0
_GAP_X = 30.0
# Room for the `compensate` label between a step and its compensation.
_UNDO_GAP = 80.0
_GAP_Y = 44.0
_MARGIN = 20.0
_PANEL_PAD = 16.0
_PANEL_TITLE = 22.0
_RIGHT_LANE = 24.0

# Plain colours rather than CSS variables: renderers such as librsvg and
# CairoSVG ignore `var()`, and the image must look the same everywhere.
_STYLE = """
text { font-family: monospace; fill: #1f2937; }
.title { font-size: 12px; font-weight: bold; }
.detail, .label { font-size: 10px; fill: #6b7280; }
.node rect { fill: #ffffff; stroke: #4b5563; stroke-width: 1.2; }
.node.when rect, .node.continue rect { stroke: #6d28d9; }
.node.when rect { stroke-width: 2.4; }
.node.compensation rect { stroke-dasharray: 4 3; }
.edge { fill: none; stroke: #4b5563; stroke-width: 1.2; }
.edge.dashed { stroke-dasharray: 4 3; }
.arrow { fill: #4b5563; }
.panel { fill: none; stroke: #6b7280; stroke-dasharray: 6 4; }
.panel-title { font-size: 11px; font-weight: bold; fill: #6b7280; }
@media (prefers-color-scheme: dark) {
  text { fill: #e5e7eb; }
  .detail, .label, .panel-title { fill: #9ca3af; }
  .node rect { fill: #111827; stroke: #9ca3af; }
  .node.when rect, .node.continue rect { stroke: #a78bfa; }
  .edge { stroke: #9ca3af; }
  .arrow { fill: #9ca3af; }
  .panel { stroke: #9ca3af; }
}
"""


@attrs.define
class _Box:
    node: Node
    width: float
    height: float
    x: float = 0.0
    y: float = 0.0

    @property
    def cx(self) -> float:
        return self.x + self.width / 2


def _r(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _measure(node: Node) -> _Box:
    title, *details = node.lines
    width = max([len(title) * _TITLE_CHAR, *(len(d) * _DETAIL_CHAR for d in details)])
    height = _TITLE_LINE + _DETAIL_LINE * len(details)
    return _Box(node, width + 2 * _PAD_X, height + 2 * _PAD_Y)


@attrs.define
class _Layout:
    boxes: dict[str, _Box]
    width: float
    height: float


def _layout(block: Block) -> _Layout:
    """Rows by longest path from the steps without dependencies; each row in
    execution order, a compensation right after its step; rows centred."""
    layer: dict[str, int] = {}
    deps: dict[str, list[str]] = {}
    for edge in block.edges:
        if edge.kind == "dependency":
            deps.setdefault(edge.target, []).append(edge.source)
    rows: dict[int, list[_Box]] = {}
    boxes: dict[str, _Box] = {}
    for node in block.nodes:
        if node.kind == "signal":
            continue  # the await step's label names the signal
        if node.kind == "compensation":
            owner = node.id.removesuffix("__undo")
            layer[node.id] = layer.get(owner, 0)
        else:
            layer[node.id] = max(
                (layer[d] + 1 for d in deps.get(node.id, []) if d in layer), default=0
            )
        box = _measure(node)
        boxes[node.id] = box
        rows.setdefault(layer[node.id], []).append(box)
    widths = {index: _row_width(row) for index, row in rows.items()}
    width = max(widths.values(), default=0.0)
    y = 0.0
    for index in sorted(rows):
        row = rows[index]
        x = (width - widths[index]) / 2
        height = max(b.height for b in row)
        for i, box in enumerate(row):
            x += _gap(row, i)
            box.x, box.y = x, y + (height - box.height) / 2
            x += box.width
        y += height + _GAP_Y
    return _Layout(boxes, width, max(y - _GAP_Y, 0.0))


def _gap(row: list[_Box], i: int) -> float:
    """The space left of the i-th box of a row."""
    if i == 0:
        return 0.0
    return _UNDO_GAP if row[i].node.kind == "compensation" else _GAP_X


def _row_width(row: list[_Box]) -> float:
    return sum(box.width + _gap(row, i) for i, box in enumerate(row))


def _node_svg(box: _Box, dx: float, dy: float) -> list[str]:
    node = box.node
    classes = {"conditional": "node when", "compensation": "node compensation"}.get(
        node.kind, "node continue" if node.kind == "continue" else "node"
    )
    x, y = box.x + dx, box.y + dy
    out = [f'<g class="{classes}" id="{escape(node.id)}">']
    out.append(
        f'<rect x="{_r(x)}" y="{_r(y)}" width="{_r(box.width)}" height="{_r(box.height)}"'
        ' rx="6" ry="6"/>'
    )
    if node.kind == "continue":
        out.append(
            f'<rect x="{_r(x + 3)}" y="{_r(y + 3)}" width="{_r(box.width - 6)}"'
            f' height="{_r(box.height - 6)}" rx="4" ry="4"/>'
        )
    title, *details = node.lines
    ty = y + _PAD_Y + 12
    out.append(f'<text class="title" x="{_r(x + _PAD_X)}" y="{_r(ty)}">{escape(title)}</text>')
    for detail in details:
        ty += _DETAIL_LINE
        out.append(
            f'<text class="detail" x="{_r(x + _PAD_X)}" y="{_r(ty)}">{escape(detail)}</text>'
        )
    out.append("</g>")
    return out


def _arrow_head(x: float, y: float) -> str:
    return f'<path class="arrow" d="M{_r(x)},{_r(y)} l-4,-7 l8,0 z"/>'


def _block_svg(block: Block, layout: _Layout, dx: float, dy: float, right: float) -> list[str]:
    out: list[str] = []
    boxes = layout.boxes
    for edge in block.edges:
        source, target = boxes.get(edge.source), boxes.get(edge.target)
        if source is None or target is None:
            continue
        if edge.kind == "dependency":
            x1, y1 = source.cx + dx, source.y + source.height + dy
            x2, y2 = target.cx + dx, target.y + dy
            mid = (y1 + y2) / 2
            out.append(
                f'<path class="edge" d="M{_r(x1)},{_r(y1)} C{_r(x1)},{_r(mid)}'
                f' {_r(x2)},{_r(mid)} {_r(x2)},{_r(y2)}"/>'
            )
            out.append(_arrow_head(x2, y2))
        elif edge.kind == "compensate":
            x1, y = source.x + source.width + dx, source.y + source.height / 2 + dy
            x2 = target.x + dx
            out.append(f'<path class="edge dashed" d="M{_r(x1)},{_r(y)} L{_r(x2)},{_r(y)}"/>')
            out.append(
                f'<text class="label" x="{_r((x1 + x2) / 2)}" y="{_r(y - 4)}"'
                ' text-anchor="middle">compensate</text>'
            )
    # Next run: out of the continue node's right side, up the right lane and
    # down into the top of each first step.
    can = boxes.get(CONTINUE_ID)
    if can is not None:
        lane = right
        sx, sy = can.x + can.width + dx, can.y + can.height / 2 + dy
        for edge in block.edges:
            if edge.kind != "next_run" or edge.target not in boxes:
                continue
            target = boxes[edge.target]
            tx, ty = target.cx + dx, target.y + dy
            top = ty - _GAP_Y / 2
            out.append(
                f'<path class="edge dashed" d="M{_r(sx)},{_r(sy)} L{_r(lane)},{_r(sy)}'
                f' L{_r(lane)},{_r(top)} L{_r(tx)},{_r(top)} L{_r(tx)},{_r(ty)}"/>'
            )
            out.append(_arrow_head(tx, ty))
        first = min((boxes[e.target].y for e in block.edges if e.kind == "next_run"), default=0.0)
        out.append(
            f'<text class="label" x="{_r(lane - 4)}" y="{_r(first + dy - _GAP_Y / 2 - 4)}"'
            ' text-anchor="end">next run</text>'
        )
    for box in boxes.values():
        out += _node_svg(box, dx, dy)
    return out


def svg(definition: Definition) -> str:
    graph = build(definition)
    main = _layout(graph.main)
    panels = [(panel, _layout(panel)) for panel in graph.panels]
    has_lane = graph.main.nodes and any(n.id == CONTINUE_ID for n in graph.main.nodes)
    lane = _RIGHT_LANE if has_lane else 0.0
    inner = max(
        [main.width + lane, *(layout.width + 2 * _PANEL_PAD for _, layout in panels)], default=0.0
    )
    width = inner + 2 * _MARGIN
    body: list[str] = []
    top = _MARGIN + (_GAP_Y / 2 if has_lane else 0.0)
    dx = _MARGIN + (inner - lane - main.width) / 2
    body += _block_svg(graph.main, main, dx, top, dx + main.width + lane - 4)
    y = top + main.height
    for panel, layout in panels:
        y += _GAP_Y * 0.75 if y > _MARGIN else 0.0
        height = layout.height + _PANEL_TITLE + 2 * _PANEL_PAD
        body.append(f'<g class="block" id="{escape(panel.id)}">')
        body.append(
            f'<rect class="panel" x="{_r(_MARGIN)}" y="{_r(y)}" width="{_r(inner)}"'
            f' height="{_r(height)}" rx="8" ry="8"/>'
        )
        body.append(
            f'<text class="panel-title" x="{_r(_MARGIN + _PANEL_PAD)}"'
            f' y="{_r(y + _PANEL_PAD + 6)}">{escape(panel.title)}</text>'
        )
        px = _MARGIN + (inner - layout.width) / 2
        body += _block_svg(panel, layout, px, y + _PANEL_PAD + _PANEL_TITLE, inner)
        body.append("</g>")
        y += height
    height = max(y + _MARGIN, 2 * _MARGIN)
    header = "\n".join(f"  {escape(line)}" for line in graph.header)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<!--\n{header}\n-->",
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_r(width)}" height="{_r(height)}"'
        f' viewBox="0 0 {_r(width)} {_r(height)}" role="img">',
        f"<title>{escape(definition.key)} step graph</title>",
        f"<style>{_STYLE}</style>",
        *body,
        "</svg>",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["svg"]
