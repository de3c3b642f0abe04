"""Fixtures for the end-to-end tests: a `Stack` starts real processes and
stops them, newest first, when its scope ends; a failed test's report carries
the logs of every process alive during it."""

from __future__ import annotations

import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from e2e_processes import (
    LIVE,
    TS_SDK,
    TSX_LOADER,
    Cli,
    Process,
    Server,
    Worker,
    link_orbit_lang,
    python_worker,
    stop_all,
    typescript_worker,
)

P = TypeVar("P", bound=Process)
WORKERS = Path(__file__).resolve().parent / "workers"
LOG_TAIL = 120


class Stack:
    """Processes owned by one fixture scope, in a directory of their own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._owned: list[Process] = []

    def _own(self, process: P) -> P:
        self._owned.append(process)
        return process

    def server(self, *args: str, name: str = "server", db: Path | None = None) -> Server:
        """A started `orbit server` on a fresh SQLite file unless `db` is given."""
        db = db or self.root / f"{name}.db"
        return self._own(Server(self.logs, db, *args, name=name)).start()

    def python_worker(
        self,
        worker_id: str,
        script: Path,
        server: Server,
        env: dict[str, str] | None = None,
        start: bool = True,
    ) -> Worker:
        worker = self._own(python_worker(worker_id, script, self.logs, server, env))
        return worker.start() if start else worker

    def typescript_worker(
        self,
        worker_id: str,
        script: Path,
        server: Server,
        env: dict[str, str] | None = None,
        start: bool = True,
    ) -> Worker:
        link_orbit_lang(script.parent)
        worker = self._own(typescript_worker(worker_id, script, self.logs, server, env))
        return worker.start() if start else worker

    def workers_dir(self) -> Path:
        """A copy of tests/e2e/workers where `orbit-lang` resolves."""
        target = self.root / "workers"
        if not target.exists():
            shutil.copytree(WORKERS, target, ignore=shutil.ignore_patterns("__pycache__"))
            link_orbit_lang(target)
        return target

    def cli(self, server: Server, cwd: Path | None = None) -> Cli:
        return Cli(server, cwd or self.root)

    def close(self) -> None:
        stop_all(self._owned)
        self._owned.clear()


@pytest.fixture(scope="session")
def sdks_installed() -> None:
    """Both SDKs must be installed as the nox e2e session installs them."""
    try:
        import orbit_sdk  # noqa: F401
    except ImportError:
        pytest.fail("orbit_sdk is not installed: pip install -e sdks/python (nox -s e2e does)")
    missing = [p for p in (TSX_LOADER, TS_SDK / "dist" / "index.js") if not p.exists()]
    if missing:
        pytest.fail(f"missing {missing}: run `npm ci` in sdks/typescript (nox -s e2e does)")


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory: pytest.TempPathFactory, sdks_installed: None) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("e2e"))
    yield stack
    stack.close()


@pytest.fixture
def stack(tmp_path: Path, sdks_installed: None) -> Iterator[Stack]:
    stack = Stack(tmp_path)
    yield stack
    stack.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for process in LIVE:
            lines = process.log().splitlines()[-LOG_TAIL:]
            report.sections.append((f"log of {process.name}", "\n".join(lines)))
    return report
