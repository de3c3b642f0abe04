"""Fails the build when a package imports a layer it must not, or when
modules import each other.

The allowed edges are the ones ARCHITECTURE.md draws; every import statement of
every module (top level or nested inside a function) is checked. Between
modules, no import may close a loop (`a` imports `b`, which imports `a`,
directly or through others): an import under `if TYPE_CHECKING:` or inside
a function hides a loop from the interpreter, not from a reader, so those
count too. A module that two others need goes into a module of its own.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, set[str]] = {
    "orbit_core": set(),
    "orbit_lang": {"orbit_core"},
    "orbit_store": {"orbit_core"},
    "orbit_server": {"orbit_core", "orbit_store"},
    "orbit_cli": {"orbit_core", "orbit_lang", "orbit_store", "orbit_server"},
}

# Third-party libraries that belong to an adapter and must stay out of the core.
ADAPTER_LIBRARIES = {
    "sqlalchemy",
    "psycopg",
    "falcon",
    "gunicorn",
    "httptools",
    "click",
    "structlog",
    "grpc",
    "httpx",
}


# The only third-party libraries the core may import (ARCHITECTURE.md's table).
CORE_LIBRARIES = {"attrs", "cattrs", "rfc8785", "orjson", "cronsim", "tzdata", "pytest"}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package / "src" / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below_it(package: str) -> None:
    forbidden = set(ALLOWED) - ALLOWED[package] - {package}
    offences = [
        f"{path.relative_to(ROOT)} imports {root}"
        for path in _modules(package)
        for root in sorted(_imported_roots(path) & forbidden)
    ]
    assert not offences, "\n".join(offences)


def test_core_imports_no_adapter_library() -> None:
    offences = [
        f"{path.relative_to(ROOT)} imports {root}"
        for path in _modules("orbit_core")
        for root in sorted(_imported_roots(path) & ADAPTER_LIBRARIES)
    ]
    assert not offences, "\n".join(offences)


# Names of a database the core must not know: it speaks to stores and to
# the coordination of servers sharing executions through its ports only.
DATABASE_NAMES = re.compile(r"psycopg|sqlalchemy|postgres", re.IGNORECASE)


def test_core_knows_no_database_by_name() -> None:
    """Not in an import, an identifier, a string or a comment (issue 37)."""
    offences = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _modules("orbit_core")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DATABASE_NAMES.search(line)
    ]
    assert not offences, "\n".join(offences)


def test_core_imports_only_its_listed_libraries() -> None:
    own = {"orbit_core", "__future__"}
    offences = [
        f"{path.relative_to(ROOT)} imports {root}"
        for path in _modules("orbit_core")
        for root in sorted(_imported_roots(path) - sys.stdlib_module_names - own - CORE_LIBRARIES)
    ]
    assert not offences, "\n".join(offences)


def test_the_checker_sees_imports(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    from orbit_store import x\nimport sqlalchemy.sql\n")
    assert _imported_roots(sample) == {"orbit_store", "sqlalchemy"}


# ---- import loops between modules


def _module_names() -> dict[str, tuple[Path, bool]]:
    """Every module of the five packages: dotted name -> (file, is a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in ALLOWED:
        src = ROOT / package / "src"
        for path in _modules(package):
            parts = list(path.relative_to(src).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


def _imported_modules(name: str, modules: dict[str, tuple[Path, bool]]) -> set[str]:
    """The modules `name` imports, wherever the statement stands. `from p
    import x` is an import of the module `p.x` when there is one, else of
    `p`; a package a module sits in is not counted (importing `p.x` runs
    `p/__init__` first, but a loop through a package's re-exports is not a
    loop between the modules that wrote it)."""
    path, is_package = modules[name]
    here = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{target}" if target else base
            for alias in node.names:
                child = f"{target}.{alias.name}"
                if child in modules:
                    found.add(child)
                elif target in modules:
                    found.add(target)
    found.discard(name)
    return found


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's
    algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    loops.append(sorted(component))
    return loops


def test_no_modules_import_each_other() -> None:
    modules = _module_names()
    graph = {name: _imported_modules(name, modules) for name in modules}
    loops = _loops(graph)
    assert not loops, "modules that import each other:\n" + "\n".join(
        " <-> ".join(loop) for loop in loops
    )


def test_the_loop_check_sees_hidden_and_indirect_loops(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    files = {
        "__init__": "",
        "a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b": "def f():\n    from pkg import c\n",
        "c": "from .a import A\n",
        "d": "import pkg.a\n",
    }
    for name, text in files.items():
        (src / f"{name}.py").write_text(text)
    modules = {
        ("pkg" if name == "__init__" else f"pkg.{name}"): (src / f"{name}.py", name == "__init__")
        for name in files
    }
    graph = {name: _imported_modules(name, modules) for name in modules}
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.c"] == {"pkg.a"}
    assert _loops(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
