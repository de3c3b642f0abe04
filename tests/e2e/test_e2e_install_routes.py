"""The first day as docs/getting-started.md tells it, on a machine that has
nothing of ORBIT yet: install through each route the guide offers, `orbit
init hello-orbit`, set the workers up with the lines the guide and the
project's README print (a fresh virtual environment with `pip install -r
workers/python/requirements.txt`; `npm install` in workers/typescript),
start the server and both workers, and `orbit run` to a completed execution.

The routes:

- `scripts/install` from the checkout, with a HOME of its own (and the
  prefix and link directory a regular user gets by default);
- the wheelhouse: every distribution's wheel and the SDKs' wheel and npm
  tarball in one folder, as `nox -s build` leaves dist/ (built here with
  `pip wheel` and scripts/pack-sdks, so that the checkout's dist/ stays as it
  is), then `pip install --find-links DIST orbit-cli orbit-lang-sdk` into a
  virtual environment and `ORBIT_SDK_DIR=DIST`.

Nothing comes from the repository's own environments: ORBIT's dependencies,
hatchling and tsx come from the package indexes (through the real user's pip
and npm caches, so a second run is quicker).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_processes import REPO, Process, clean_env, free_port, stop_all
from server_harness import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(1200)]

PACKAGES = ("orbit_core", "orbit_lang", "orbit_store", "orbit_server", "orbit_cli")


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"$ {' '.join(argv)} exited {done.returncode}:\n{output}"
    return output


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """A user's environment with a HOME of its own: no ORBIT_ settings, no
    virtual environment active, the real caches of pip and npm."""
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(
        {
            "HOME": str(home),
            "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
            "NPM_CONFIG_CACHE": os.environ.get("NPM_CONFIG_CACHE", str(Path.home() / ".npm")),
        }
    )
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    # The interpreter's own directory (the test venv's) is no part of it.
    parts = env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in parts if Path(p) != Path(sys.executable).parent)
    return env


def _install_script(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    # A regular user's defaults, spelled out: as root (CI) the script would
    # install into /opt/orbit and /usr/local/bin.
    local = Path(env["HOME"]) / ".local"
    where = {"ORBIT_PREFIX": str(local / "share/orbit"), "ORBIT_INSTALL_DIR": str(local / "bin")}
    _run([str(REPO / "scripts" / "install")], REPO, {**env, **where})
    return {**env, "PATH": f"{local / 'bin'}{os.pathsep}{env['PATH']}"}


def _wheelhouse(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    dist = tmp_path / "dist"
    wheel = ["python3", "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist)]
    _run([*wheel, *(str(REPO / p) for p in PACKAGES)], REPO, env)
    _run([str(REPO / "scripts" / "pack-sdks"), str(dist)], REPO, env)
    venv = tmp_path / "orbit-venv"
    _run(["python3", "-m", "venv", str(venv)], tmp_path, env)
    pip = [str(venv / "bin" / "pip"), "install", "--quiet", "--find-links", str(dist)]
    _run([*pip, "orbit-cli", "orbit-lang-sdk"], tmp_path, env)
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "ORBIT_SDK_DIR": str(dist)}


ROUTES = {"scripts/install": _install_script, "wheelhouse": _wheelhouse}


@pytest.fixture
def started() -> Iterator[list[Process]]:
    processes: list[Process] = []
    yield processes
    stop_all(processes)


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_fresh_project_runs_with_both_workers(
    route: str, tmp_path: Path, machine: dict[str, str], started: list[Process]
) -> None:
    env = ROUTES[route](tmp_path, machine)
    work = tmp_path / "work"
    work.mkdir()
    _run(["orbit", "init", "hello-orbit"], work, env)
    project = work / "hello-orbit"
    _run(["orbit", "check", "workflows/hello.orbit"], project, env)

    # The worker set-up the generated README prints.
    _run(["python3", "-m", "venv", ".venv"], project, env)
    pip = [".venv/bin/pip", "install", "--quiet", "-r", "workers/python/requirements.txt"]
    _run(pip, project, env)
    _run(["npm", "install", "--no-audit", "--no-fund"], project / "workers" / "typescript", env)

    port = free_port()
    env["ORBIT_SERVER"] = f"http://127.0.0.1:{port}"
    logs = tmp_path / "logs"
    logs.mkdir()
    server = Process(
        "server", ["orbit", "server", "--addr", f"127.0.0.1:{port}"], logs, project, env
    )
    started.append(server.start())
    server.wait_for_log("listening", timeout=60)
    python = Process(
        "python-worker", [".venv/bin/python", "workers/python/worker.py"], logs, project, env
    )
    typescript = Process(
        "typescript-worker", ["npm", "start"], logs, project / "workers" / "typescript", env
    )
    started.extend([python.start(), typescript.start()])
    python.wait_for_log("registered", timeout=60)
    typescript.wait_for_log("registered", timeout=60)

    def workers_listed() -> bool:
        listed = subprocess.run(
            ["orbit", "workers", "list"],
            check=False,
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )
        return "hello-python" in listed.stdout and "hello-typescript" in listed.stdout

    wait_until(workers_listed, 30, "both workers in `orbit workers list`")
    output = _run(
        ["orbit", "run", "workflows/hello.orbit", "--input", '{"name": "Ada"}'], project, env, 120
    )
    assert "\nCOMPLETED " in output, output
    assert '"greeting": "Hello, Ada!!!"' in output, output
