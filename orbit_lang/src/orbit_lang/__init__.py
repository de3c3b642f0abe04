"""orbit_lang: the ORBIT language front end and compiler."""

from orbit_lang.compiler import (
    CompileResult,
    check_paths,
    compile_paths,
    compile_source,
    render_diagnostics,
)

__version__ = "0.5.0"

__all__ = [
    "CompileResult",
    "__version__",
    "check_paths",
    "compile_paths",
    "compile_source",
    "render_diagnostics",
]
