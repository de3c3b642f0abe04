"""`orbit codegen`: typed worker and client code from task contracts.

`model.build` turns a compiled program into one language-neutral `Module`
(records named once, contracts with their hashes, workflows with their
signals and queries); one module per language renders it into files. The
output depends only on the program: the same files give the same bytes, so
`orbit codegen --check` can compare them with what is committed. Go and
Rust output goes through gofmt and rustfmt when those are installed (their
toolchains ship them); the other languages are written already formatted.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from orbit_cli.codegen.model import Module

Renderer = Callable[[Module, str], dict[str, str]]

LANGUAGES = ("python", "typescript", "go", "rust", "java")


def renderer(lang: str) -> Renderer:
    module = importlib.import_module(f"orbit_cli.codegen.{_MODULES[lang]}")
    render: Renderer = module.render
    return render


_MODULES = {
    "python": "python",
    "typescript": "typescript",
    "go": "golang",
    "rust": "rust",
    "java": "java",
}
