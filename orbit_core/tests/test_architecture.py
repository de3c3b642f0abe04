"""Structural rules of orbit_core, read from the source with `ast`.

- The modules of `orbit_core.engine` import each other without cycles (counting
  imports under `TYPE_CHECKING` too: a cycle there is still two components that
  each know the other)."""

from __future__ import annotations

import ast
from pathlib import Path

import orbit_core

ROOT = Path(orbit_core.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (for `from a import b`: `a.b` if that is a module, else `a`)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path.parent)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def _graph(package: str) -> dict[str, set[str]]:
    folder = ROOT.parent.joinpath(*package.split("."))
    modules = {_module_name(p): p for p in folder.rglob("*.py")}
    return {name: _imports(path) & modules.keys() - {name} for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_engine_modules_import_without_cycles() -> None:
    graph = _graph("orbit_core.engine")
    assert "orbit_core.engine.executions" in graph
    # The package's __init__ re-exports the façade; it is not a component.
    graph.pop("orbit_core.engine", None)
    for deps in graph.values():
        deps.discard("orbit_core.engine")
    assert _cycles(graph) == []
