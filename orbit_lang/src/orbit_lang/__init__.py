"""orbit_lang: the ORBIT language front end and compiler.

The compiler's entry points are imported on first use, so that tools that
need only a part of the package (`orbit fmt` needs the lexer alone) do not
pay for loading the grammar, the checker and the IR.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orbit_lang.compile_error import CompileError
    from orbit_lang.compiler import (
        CompileResult,
        check_paths,
        compile_files,
        compile_paths,
        compile_source,
        render_diagnostics,
    )

__version__ = "0.5.0"

__all__ = [
    "CompileError",
    "CompileResult",
    "__version__",
    "check_paths",
    "compile_files",
    "compile_paths",
    "compile_source",
    "render_diagnostics",
]

_COMPILER = frozenset(__all__) - {"__version__", "CompileError"}


def __getattr__(name: str) -> Any:
    if name == "CompileError":
        return importlib.import_module("orbit_lang.compile_error").CompileError
    if name in _COMPILER:
        return getattr(importlib.import_module("orbit_lang.compiler"), name)
    raise AttributeError(f"module 'orbit_lang' has no attribute {name!r}")
