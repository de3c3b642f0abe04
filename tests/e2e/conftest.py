"""Fixtures for the end-to-end tests: a `Stack` per module or per test starts
real processes and stops them when its scope ends; a failed test's report
carries the logs of every process alive during it."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from e2e_processes import LIVE, TS_SDK, TSX_LOADER, Stack

LOG_TAIL = 120


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
