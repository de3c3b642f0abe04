"""orbit_core's optional compiled build (issue 47, ruling 3).

`ORBIT_COMPILE=1 uv build --wheel orbit_core` (or `pip wheel`) compiles the
modules in `COMPILED` with mypyc into C extensions that sit in the wheel
beside their `.py` sources; Python's import system prefers the extension.
Everything else in the wheel stays interpreted, and without `ORBIT_COMPILE=1`
the hook does nothing: the wheel is the pure-Python one, tagged
`py3-none-any`, exactly as before. Editable installs never compile, so a
developer's checkout always runs its `.py` files.

When `ORBIT_COMPILE=1` is set but no C compiler can be found, the build says
so and falls back to the pure wheel (the ruling: compiled when a compiler is
present, the pure package always working). `ORBIT_COMPILE=require` fails
instead, for CI's compiled session, which must not silently test the pure one.

The experiment was measured and NOT adopted (docs/design/compiled.md): the
gain was under 15 % and the compiled build lost depth guards and crashed in
the shared-engine simulation. The hook stays so that a later mypyc can be
re-measured; released wheels do not use it. The rule for an entry: a module whose
functions tests replace at run time (`monkeypatch.setattr(module, ...)`, a
class's method, an instance's attribute) stays interpreted, because mypyc
binds calls between compiled modules early and its classes have no instance
`__dict__`.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Paths under src/, compiled together as one mypyc group (calls between them
# are C calls). See docs/design/compiled.md for the measurements and for why
# these modules stay interpreted: events.py and state.py (attrs classes with
# ClassVar or attrs.field() defaults, which mypyc's class bodies break),
# executions.py, service.py, recovery.py, children.py and handlers.py (tests
# replace their functions or methods), and values.py, evaluate.py, eval/ and
# ir/ (they turn RecursionError into a typed error for deeply nested input;
# compiled recursion has no such guard and can overflow the C stack).
COMPILED: tuple[str, ...] = (
    "orbit_core/decide.py",
    "orbit_core/plan.py",
    "orbit_core/limits.py",
    "orbit_core/unitkeys.py",
    "orbit_core/engine/polling.py",
    "orbit_core/engine/results.py",
    "orbit_core/engine/workers.py",
    "orbit_core/engine/running.py",
    "orbit_core/engine/pipeline.py",
    "orbit_core/engine/commands.py",
)

# The compiler that mypyc is pinned to: a new mypy can change the generated
# code, so an upgrade is deliberate (and re-measured).
MYPYC = "mypy[mypyc]==2.4.1"
SETUPTOOLS = "setuptools>=70"

# mypy's settings for the build: the sdist carries no [tool.mypy], and a
# configuration found in a parent directory must not change what is compiled.
MYPY_CONFIG = """\
[mypy]
strict = True
warn_unused_configs = False

[mypy-rfc8785.*]
ignore_missing_imports = True
"""


def requested() -> str:
    """'' (pure build), '1' (compile when possible) or 'require'."""
    value = os.environ.get("ORBIT_COMPILE", "").strip().lower()
    if value in ("", "0", "no", "false"):
        return ""
    return "require" if value == "require" else "1"


def c_compiler() -> str | None:
    """The C compiler setuptools would run, if it is on this machine."""
    configured = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = configured.split()[0]
    return shutil.which(program)


def compile_modules(src: Path, modules: tuple[str, ...], out: Path) -> list[Path]:
    """Compiles `modules` (paths under `src`) with mypyc into `out`; returns
    the built extension files, relative to `out`."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    work = Path(tempfile.mkdtemp(prefix="orbit-mypyc-"))
    config = work / "mypy.ini"
    config.write_text(MYPY_CONFIG)
    here = Path.cwd()
    os.chdir(src)  # mypy names modules by their path under src/
    try:
        extensions = mypycify(
            ["--config-file", str(config), "--cache-dir", str(work / "cache"), *modules],
            opt_level=os.environ.get("ORBIT_COMPILE_OPT", "3"),
            target_dir=str(work / "c"),
            group_name="orbit_core",
            multi_file=True,  # one C file per module: compiled side by side
        )
        dist = Distribution({"name": "orbit-core", "ext_modules": extensions})
        build_ext: Any = dist.get_command_obj("build_ext")
        build_ext.build_lib = str(out)
        build_ext.build_temp = str(work / "temp")
        build_ext.parallel = os.cpu_count() or 1
        build_ext.ensure_finalized()
        build_ext.run()
    finally:
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return sorted(p.relative_to(out) for p in out.rglob(f"*{suffix}"))


class CompiledBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        return [MYPYC, SETUPTOOLS] if requested() and self.target_name == "wheel" else []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        mode = requested()
        if self.target_name != "wheel" or version == "editable" or not mode:
            return
        if c_compiler() is None:
            message = "ORBIT_COMPILE is set but no C compiler was found"
            if mode == "require":
                raise RuntimeError(message)
            print(f"orbit-core: {message}; building the pure-Python wheel", file=sys.stderr)
            return
        out = Path(tempfile.mkdtemp(prefix="orbit-compiled-"))
        self._out = out  # removed in finalize, once the wheel holds the files
        built = compile_modules(Path(self.root) / "src", COMPILED, out)
        for path in built:
            build_data["force_include"][str(out / path)] = str(path)
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        out = getattr(self, "_out", None)
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
