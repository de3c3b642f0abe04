"""The conformance suite's fixtures: one runtime per worker program and
protocol (`conf`, module scope, parametrized over conformance_kit.PROGRAMS
and `protocol`, so each program's scenarios share it), the program's long-lived instance
(`conf_worker`), and a stack of a test's own (`own_stack`) for the scenarios
that stop, freeze or restart processes. conformance_kit.py is imported
first, which puts tests/e2e (e2e_processes) on the import path.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conformance_kit import PROGRAMS, Conformance, new_server
from e2e_processes import LIVE, TS_SDK, TSX_LOADER, Stack, Worker

LOG_TAIL = 120


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Puts each program's scenarios in one xdist group (`--dist loadgroup`,
    the nox session): a program's runtime, long-lived worker and build are
    then made on one pytest worker only, while the programs' scenarios,
    which mostly wait on real timeouts, run side by side."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        program = callspec.params.get("sdk") if callspec is not None else None
        if program is not None:
            item.add_marker(pytest.mark.xdist_group(str(program)))


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where programs are built or copied (once per session)."""
    return tmp_path_factory.mktemp("programs")


@pytest.fixture(scope="session")
def requirements() -> Callable[[str], None]:
    def check(name: str) -> None:
        if name == "typescript":
            missing = [p for p in (TSX_LOADER, TS_SDK / "dist" / "index.js") if not p.exists()]
            if missing:
                pytest.fail(f"missing {missing}: run `npm ci` in sdks/typescript")
        if name == "go" and shutil.which("go") is None:
            pytest.fail("the Go toolchain is not on PATH")
        if name == "java":
            tools = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
            if tools:
                pytest.fail(
                    f"{' and '.join(tools)} not on PATH: the Java program needs a JDK 17+ and Maven"
                )
        if name == "python":
            try:
                import orbit_sdk  # noqa: F401
            except ImportError:
                pytest.fail("orbit_sdk is not installed: pip install -e sdks/python")

    return check


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def sdk(request: pytest.FixtureRequest, requirements: Callable[[str], None]) -> str:
    name = str(request.param)
    requirements(name)
    return name


@pytest.fixture(scope="module", params=["extended", "book"])
def protocol(request: pytest.FixtureRequest) -> str:
    """Every program runs against a runtime offering ORBIT's worker protocol
    extensions (which an SDK uses when offered) and one offering the book's
    protocol only (`--no-worker-extensions`)."""
    return str(request.param)


@pytest.fixture(scope="module")
def conf_stack(
    tmp_path_factory: pytest.TempPathFactory, sdk: str, protocol: str
) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp(f"conf-{sdk}-{protocol}"))
    yield stack
    stack.close()


@pytest.fixture(scope="module")
def conf(conf_stack: Stack, sdk: str, protocol: str, workdir: Path) -> Conformance:
    extensions = protocol == "extended"
    server = new_server(conf_stack, f"server-{sdk}", extensions=extensions)
    return Conformance(sdk, conf_stack, server, workdir, extensions)


@pytest.fixture(scope="module")
def conf_worker(conf: Conformance) -> Worker:
    """The module's long-lived instance of the program, shared by the
    scenarios that do not stop it."""
    return conf.worker()


@pytest.fixture
def own_stack(tmp_path: Path) -> Iterator[Stack]:
    """Processes of one test, stopped at its end."""
    stack = Stack(tmp_path)
    yield stack
    stack.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if report.failed:
        for process in LIVE:
            lines = process.log().splitlines()[-LOG_TAIL:]
            report.sections.append((f"log of {process.name}", "\n".join(lines)))
    return report
