"""Structural rules of orbit_core, read from the source with `ast`.

- The modules of `orbit_core.engine` import each other without cycles (counting
  imports under `TYPE_CHECKING` too: a cycle there is still two components that
  each know the other).
- Events are numbered and dated in one place, `orbit_core.history`: no other
  module adds to `last_seq`, builds an event with a seq of its own or
  re-stamps one with `attrs.evolve`.
- The pure kernel does no I/O: it imports no module that reaches the world
  (files, sockets, threads, the clock, randomness, processes), calls no
  `open`/`print`/`input`, reads no wall clock, and at run time imports only
  kernel modules (type-only imports under `TYPE_CHECKING` do not count)."""

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


# ---------------------------------------------------------------- the pure kernel

KERNEL = (
    "orbit_core.decide",
    "orbit_core.state",
    "orbit_core.events",
    "orbit_core.history",
    "orbit_core.evaluate",
    "orbit_core.eval",
    "orbit_core.values",
    "orbit_core.plan",
    "orbit_core.ir",
    "orbit_core.limits",
    "orbit_core.schedules",
    "orbit_core.unitkeys",
    "orbit_core.api",
    "orbit_core.jsontypes",
    "orbit_core.errors",
    "orbit_core.semver",
    # Typed visibility's pure parts (query.py reads the store through its port).
    "orbit_core.visibility.fields",
    "orbit_core.visibility.filter",
    "orbit_core.visibility.check",
    "orbit_core.visibility.page",
    "orbit_core.visibility.waiting",
)
IO_MODULES = frozenset(
    [
        "os",
        "io",
        "sys",
        "socket",
        "ssl",
        "select",
        "selectors",
        "threading",
        "_thread",
        "multiprocessing",
        "concurrent",
        "asyncio",
        "subprocess",
        "signal",
        "time",
        "random",
        "secrets",
        "uuid",
        "pathlib",
        "shutil",
        "tempfile",
        "glob",
        "fcntl",
        "mmap",
        "sqlite3",
        "logging",
        "urllib",
        "http",
        "ftplib",
        "smtplib",
        "importlib",
        "zoneinfo",
        "builtins",
        "ctypes",
        "atexit",
    ]
)
IO_CALLS = frozenset({"open", "print", "input", "exec", "eval", "__import__", "breakpoint"})
CLOCK_METHODS = frozenset({"now", "utcnow", "today"})
# Time-zone rules are data shipped in the tzdata package (or the system's
# zoneinfo when it is missing), read once per zone and cached: the one read
# the kernel makes, as deterministic as the code itself.
ALLOWED = {
    "orbit_core.schedules.spec": frozenset({"importlib", "zoneinfo", "open"}),
    "orbit_core.schedules.cron": frozenset({"zoneinfo"}),
    "orbit_core.schedules.timing": frozenset({"zoneinfo"}),
}


def _in_kernel(module: str) -> bool:
    return any(module == k or module.startswith(k + ".") for k in KERNEL)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                out.update(id(n) for n in ast.walk(child))
    return out


def _kernel_problems(module: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    type_only = _type_checking_nodes(tree)
    allowed = ALLOWED.get(module, frozenset())
    problems: list[str] = []
    for node in ast.walk(tree):
        where = f"{module}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif node.module == "orbit_core":
                names = [f"orbit_core.{alias.name}" for alias in node.names]
            else:
                names = [node.module or ""] if not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top in IO_MODULES and top not in allowed:
                    problems.append(f"{where} imports {name}")
                elif top == "orbit_core" and not _in_kernel(name) and id(node) not in type_only:
                    problems.append(f"{where} imports {name}, outside the kernel")
        elif isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in IO_CALLS and fn.id not in allowed:
                problems.append(f"{where} calls {fn.id}()")
            if isinstance(fn, ast.Attribute):
                if fn.attr in CLOCK_METHODS:
                    problems.append(f"{where} reads the clock ({fn.attr}())")
                if fn.attr == "open" and "open" not in allowed:
                    problems.append(f"{where} calls .open()")
    return problems


def _kernel_modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        name = _module_name(path)
        if _in_kernel(name):
            out[name] = path
    return out


def test_the_kernel_check_finds_io(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nimport time as t\nfrom orbit_core.engine import Engine\n"
        "from datetime import datetime\nopen('x')\ndatetime.now()\n"
    )
    found = _kernel_problems("orbit_core.decide", bad)
    assert len(found) == 5, found


def test_the_pure_kernel_does_no_io() -> None:
    modules = _kernel_modules()
    assert {"orbit_core.decide", "orbit_core.ir.codec", "orbit_core.schedules.cron"} <= set(modules)
    problems = [p for name, path in sorted(modules.items()) for p in _kernel_problems(name, path)]
    assert problems == []


# ---------------------------------------------------------------- the façades


def test_the_engine_facade_shows_the_embedding_api_only() -> None:
    """Issue 37: the `Engine` serves embedding programs; the worker calls are
    `engine.workers`' and the steps of servers sharing executions are
    `handoff.Handoff`'s, so neither audience's calls crowd the façade."""
    from orbit_core.engine import Engine, WorkerDesk
    from orbit_core.engine.handoff import Handoff

    public = {n for n, v in vars(Engine).items() if not n.startswith("_") and callable(v)}
    assert len(public) <= 25, sorted(public)
    worker_calls = {
        "register",
        "poll",
        "undelivered",
        "heartbeat",
        "unregister",
        "complete",
        "fail",
    }
    assert worker_calls <= set(vars(WorkerDesk))
    assert not public & (worker_calls | {"register_worker", "list_workers"})
    handoff_steps = {n for n in vars(Handoff) if not n.startswith("_")}
    assert "take_over" in handoff_steps and not public & handoff_steps


# ---------------------------------------------------------------- stamping

# The one owner of (seq, timestamp_ms), and the modules that build events
# without adding them to a history: the codec reads stamped ones back, the
# envelope sizes sample events.
STAMPER = "orbit_core.history"
BUILDS_UNSTAMPED = frozenset({"orbit_core.events", "orbit_core.envelope"})
# `state.apply` checks the stamper's work (`seq == last_seq + 1`): it reads
# the arithmetic, it numbers nothing.
CHECKS_SEQ = frozenset({"orbit_core.state"})


def _event_names() -> frozenset[str]:
    from orbit_core import events

    return frozenset(events.EVENT_TYPES)


def _stamping_problems(module: str, path: Path) -> list[str]:
    names = _event_names()
    problems: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{module}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.BinOp) and module not in CHECKS_SEQ:
            sides = (node.left, node.right)
            if any(isinstance(s, ast.Attribute) and s.attr == "last_seq" for s in sides):
                problems.append(f"{where} numbers an event itself ({ast.unparse(node)})")
        elif isinstance(node, ast.Call):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if called in names and module not in BUILDS_UNSTAMPED:
                problems.append(f"{where} builds {called} with a seq of its own")
            stamped = {"seq", "timestamp_ms"} & {k.arg for k in node.keywords}
            if called == "evolve" and stamped:
                problems.append(f"{where} re-stamps an event ({', '.join(sorted(stamped))})")
    return problems


def test_the_stamping_check_finds_stampers(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from orbit_core import events as ev\n"
        "from orbit_core.events import StepSucceeded\n"
        "e = ev.StepSucceeded(state.last_seq + 1, now, 'k', 1, None)\n"
        "f = StepSucceeded(7, now, 'k', 1, None)\n"
        "seq = live.state.last_seq + 1\n"
        "g = attrs.evolve(e, seq=3)\n"
        "h = x.record(tx, live, ev.StepSucceeded, 'k', 1, None)\n"
    )
    found = _stamping_problems("orbit_core.engine.results", bad)
    assert len(found) == 5, found


def test_events_are_stamped_in_one_place() -> None:
    """Issue 37: every event gets its (seq, timestamp_ms) from
    `orbit_core.history` (`stamp`, `Batch`, `Executions.record`), so a
    history cannot get a gap or a duplicate from a site that counts alone."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    assert {STAMPER, "orbit_core.decide", "orbit_core.engine.results"} <= set(modules)
    problems = [
        p
        for name, path in sorted(modules.items())
        if name != STAMPER
        for p in _stamping_problems(name, path)
    ]
    assert problems == []


# ---------------------------------------------------------------- ports


def _port_members() -> frozenset[str]:
    """The members the Protocol classes of the port modules declare."""
    names: set[str] = set()
    for module in ("ports.py", "coordination.py"):
        for node in ast.walk(ast.parse((ROOT / module).read_text())):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(b) == "Protocol" for b in node.bases
            ):
                names.update(
                    n.name
                    for n in node.body
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                )
    return frozenset(names)


def _probing_problems(module: str, path: Path, members: frozenset[str]) -> list[str]:
    """`getattr`/`hasattr` looking up a port member, or any member of
    something named a store: an optional member found at run time instead
    of a declared one."""
    problems: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ):
            continue
        target, name = ast.unparse(node.args[0]), str(node.args[1].value)
        if name in members or "store" in target.lower():
            problems.append(f"{module}:{node.lineno} {node.func.id}({target}, {name!r})")
    return problems


def test_the_probing_check_finds_probes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "a = getattr(store, 'version_activity', None)\n"
        "b = hasattr(x, 'find_idempotency')\n"
        "c = getattr(exc, 'code', None)\n"
    )
    found = _probing_problems("orbit_core.engine.x", bad, _port_members())
    assert len(found) == 2, found


def test_no_optional_port_member_is_found_with_getattr() -> None:
    """Issue 37: what a store or coordination adapter offers is declared on
    its Protocol, so mypy checks every adapter has it; nothing probes."""
    members = _port_members()
    assert {"find_idempotency", "commit", "claim_for"} <= members
    problems = [
        p
        for path in sorted(ROOT.rglob("*.py"))
        for p in _probing_problems(_module_name(path), path, members)
    ]
    assert problems == []
