"""Which workflow starts which (chapter 19): cycles are E0311, and
workflows are checked and compiled children first, ties in load order."""

from __future__ import annotations

from orbit_lang import ast
from orbit_lang.check.report import Reporter
from orbit_lang.check.toposort import source_order
from orbit_lang.diagnostics import Label
from orbit_lang.source import Span

Edge = tuple[str, Span]


def child_edges(workflow: ast.Workflow, known: dict[str, ast.Workflow]) -> list[Edge]:
    """The workflows started by `workflow`'s steps, with the span of the name."""
    edges: list[Edge] = []
    for step in workflow.steps:
        for member in step.members:
            if isinstance(member, ast.WorkflowAction) and member.workflow.value in known:
                edges.append((member.workflow.value, member.workflow.span))
                break
    return edges


def order(workflows: dict[str, ast.Workflow], report: Reporter) -> tuple[list[str], set[str]]:
    """Workflow names children first, and the names of workflows in cycles."""
    names = list(workflows)
    edges = {name: child_edges(workflows[name], workflows) for name in names}
    cyclic = _report_cycles(names, edges, report)
    children = {name: {child for child, _ in edges[name]} for name in names}
    return source_order(names, children), cyclic


def _report_cycles(names: list[str], edges: dict[str, list[Edge]], report: Reporter) -> set[str]:
    cyclic: set[str] = set()
    for start in names:
        if start in cyclic:
            continue
        path = _cycle(start, edges)
        if path is None:
            continue
        members = [source for source, _, _ in path]
        cyclic.update(members)
        (_, _, first_span), *rest = path
        report.error(
            "E0311",
            "workflows call each other in a cycle",
            first_span,
            labels=[Label(span, f"`{source}` starts `{target}`") for source, target, span in rest],
            notes=["cycle: " + " -> ".join([*members, start])],
            help="a workflow cannot (directly or indirectly) start itself as a child",
        )
    return cyclic


def _cycle(start: str, edges: dict[str, list[Edge]]) -> list[tuple[str, str, Span]] | None:
    """A path of (parent, child, span) edges from `start` back to `start`."""
    path: list[tuple[str, str, Span]] = []
    seen = {start}

    def visit(node: str) -> bool:
        for target, span in edges[node]:
            if target == start:
                path.append((node, target, span))
                return True
            if target not in seen:
                seen.add(target)
                path.append((node, target, span))
                if visit(target):
                    return True
                path.pop()
        return False

    return path if visit(start) else None
