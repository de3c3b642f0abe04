"""Fails the build when a package imports a layer it must not.

The allowed edges are the ones ARCHITECTURE.md draws; every import statement of
every module (top level or nested inside a function) is checked.
"""

from __future__ import annotations

import ast
import sys
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
