"""Smoke test of one installed distribution, run by `nox -s wheels` inside a
fresh virtual environment that holds only that distribution (from dist/) and
its third-party dependencies.

    python tests/wheel_smoke.py orbit-store

It uses the distribution's public API the way a user would, and checks that
the ORBIT packages the distribution does not declare are absent, so a
missing dependency cannot hide behind one that happens to be installed.
Only the standard library and the installed distribution are imported here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # not imported when run: orbit-lang-sdk has no orbit_core
    from orbit_core.jsontypes import JsonObject

HELLO = """
task "greeting.compose" {
    version "1.0.0"
    input { name: String }
    output { message: String }
}

workflow Hello {
    version "1.0.0"
    input { name: String }
    output { greeting: String }

    step compose {
        worker "greeting.compose"
        with { name: input.name }
    }

    return { greeting: compose.message }
}
"""

# The ORBIT import packages each distribution brings (itself and its layers).
BRINGS = {
    "orbit-core": {"orbit_core"},
    "orbit-lang": {"orbit_core", "orbit_lang"},
    "orbit-store": {"orbit_core", "orbit_store"},
    "orbit-server": {"orbit_core", "orbit_store", "orbit_server"},
    "orbit-cli": {"orbit_core", "orbit_lang", "orbit_store", "orbit_server", "orbit_cli"},
    "orbit-lang-sdk": {"orbit_sdk"},
}
ALL = {name for names in BRINGS.values() for name in names}


def _compile_hello() -> JsonObject:
    from orbit_core import ir
    from orbit_lang import compile_source

    result = compile_source(HELLO, "hello.orbit")
    assert result.errors == 0, result.diagnostics
    (definition,) = result.definitions
    document: JsonObject = ir.to_json(definition)
    return document


def _run_hello(engine: object, document: JsonObject) -> None:
    from orbit_core.engine import Engine

    assert isinstance(engine, Engine)
    engine.deploy(document)
    engine.register_handler("greeting.compose", "1.0.0", lambda i: {"message": f"Hi {i['name']}"})
    engine.start("Hello", input={"name": "Ada"}, execution_id="smoke-1")


def core() -> None:
    from orbit_core import __version__
    from orbit_core.engine import Engine
    from orbit_core.testing import run_until_idle, simulated_engine

    assert __version__.startswith("0.5.")
    engine = simulated_engine()
    try:
        assert isinstance(engine, Engine)
        assert engine.list_workflows() is not None
        run_until_idle(engine)
    finally:
        engine.close()


def lang() -> None:
    from orbit_core.testing import run_until_idle, simulated_engine

    document = _compile_hello()
    engine = simulated_engine()
    try:
        _run_hello(engine, document)
        run_until_idle(engine)
        assert engine.get("smoke-1")["output"] == {"greeting": "Hi Ada"}
    finally:
        engine.close()


def store() -> None:
    from orbit_core.engine import Engine
    from orbit_store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(SqliteStore(str(Path(tmp) / "orbit.db")))
        try:
            assert engine.list_workflows() is not None
        finally:
            engine.close()


def server() -> None:
    import falcon.testing

    from orbit_core.engine import Engine
    from orbit_server.app import create_app
    from orbit_server.config import ServerConfig

    engine = Engine()
    try:
        client = falcon.testing.TestClient(create_app(engine, ServerConfig()))
        health = client.simulate_get("/v1/health")
        assert health.status_code == 200, health.text
        assert health.json["status"] == "ok"
        # The web UI's files are package data: a wheel without them has no UI.
        for path in ("/ui/", "/ui/app.js", "/ui/app.css"):
            page = client.simulate_get(path)
            assert page.status_code == 200 and page.content, path
    finally:
        engine.close()


def cli() -> None:
    orbit = Path(sys.executable).with_name("orbit")
    version = subprocess.run([orbit, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("orbit 0.5."), version.stdout
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "hello.orbit"
        source.write_text(HELLO)
        check = subprocess.run(
            [orbit, "check", str(source)], capture_output=True, text=True, check=False
        )
        assert check.returncode == 0, check.stdout + check.stderr


def sdk() -> None:
    from orbit_sdk import ApiError, Client, Context, TaskError, Worker

    assert all((ApiError, Client, Context, TaskError, Worker))


CHECKS: dict[str, Callable[[], None]] = {
    "orbit-core": core,
    "orbit-lang": lang,
    "orbit-store": store,
    "orbit-server": server,
    "orbit-cli": cli,
    "orbit-lang-sdk": sdk,
}


def main(dist: str) -> None:
    present = {name for name in ALL if importlib.util.find_spec(name) is not None}
    assert present == BRINGS[dist], f"{dist} brought {sorted(present)}"
    # The code under test must be the installed wheel, not this checkout.
    for name in present:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        assert "site-packages" in spec.origin, f"{name} imported from {spec.origin}"
    CHECKS[dist]()
    print(f"{dist} {importlib.metadata.version(dist)}: ok")


if __name__ == "__main__":
    main(sys.argv[1])
