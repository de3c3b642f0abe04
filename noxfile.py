"""Developer and CI sessions.

`nox` with no arguments runs what CI runs. Each package is tested in its own
virtualenv holding only that package and the ORBIT layers it declares, which
proves the declared dependencies are enough (orbit_core is tested with no
SQLAlchemy, Falcon or click installed).

PostgreSQL: the tests start their own throw-away server (tests/pgkit.py)
from the binaries scripts/bootstrap installs when none are found. Tests that
need one are skipped when there is none, unless ORBIT_REQUIRE_POSTGRES is set
(.ci/run sets it), which makes them fail instead. The store contract and the
PostgreSQL tests run in `tests` and `repo` like any other; the `postgres`
session runs real-server tests a second time with every server on
PostgreSQL (ORBIT_TEST_DB=postgres).
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "lint",
    "types",
    "tests",
    "repo",
    "sdk_python",
    "sdk_typescript",
    "e2e",
    "postgres",
]

PYTHON = "3.11"

# Each package and the ORBIT packages it depends on, lowest layer first.
LAYERS: dict[str, list[str]] = {
    "orbit_core": ["orbit_core"],
    "orbit_lang": ["orbit_core", "orbit_lang"],
    "orbit_store": ["orbit_core", "orbit_store"],
    "orbit_server": ["orbit_core", "orbit_store", "orbit_server"],
    "orbit_cli": ["orbit_core", "orbit_lang", "orbit_store", "orbit_server", "orbit_cli"],
}
ALL = LAYERS["orbit_cli"]
TEST_DEPS = ["pytest>=8", "hypothesis>=6.100", "pytest-timeout>=2.3"]
# The trace tests' OTLP receiver decodes requests with the protocol's own classes.
TRACE_TEST_DEPS = ["opentelemetry-proto>=1.27"]


def _install(session: nox.Session, pkgs: list[str]) -> None:
    session.install(*[arg for p in pkgs for arg in ("-e", f"./{p}")])


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the whole repository."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def types(session: nox.Session) -> None:
    """mypy --strict over the five packages."""
    session.install("mypy>=1.11", *TEST_DEPS)
    _install(session, ALL)
    session.run("mypy", *[f"{p}/src/{p}" for p in ALL])


@nox.session(python=PYTHON)
@nox.parametrize("pkg", list(LAYERS))
def tests(session: nox.Session, pkg: str) -> None:
    """Unit tests of one package, in a virtualenv holding only its layers."""
    session.install(*TEST_DEPS)
    _install(session, LAYERS[pkg])
    session.run("pytest", f"{pkg}/tests", *session.posargs)


@nox.session(python=PYTHON)
def repo(session: nox.Session) -> None:
    """Cross-package tests: import boundaries, book examples, golden outputs."""
    session.install(*TEST_DEPS, *TRACE_TEST_DEPS)
    _install(session, ALL)
    # tests/test_server_tracing.py runs a Python SDK worker in the test process.
    session.install("-e", "./sdks/python")
    session.run("pytest", "tests", "-m", "not e2e", *session.posargs)


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """End-to-end tests: `orbit server`, the CLI and SDK workers as real processes."""
    session.install(*TEST_DEPS, *TRACE_TEST_DEPS)
    _install(session, ALL)
    session.install("-e", "./sdks/python")
    # The TypeScript workers need the SDK's dist/ and tsx (Node 20 has no
    # type stripping), both of which `npm ci` provides.
    with session.chdir("sdks/typescript"):
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    session.run("pytest", "tests/e2e", "-m", "e2e", *session.posargs)


# What the `postgres` session runs on PostgreSQL unless given test paths: the
# book's CLI timelines against a real server (tests/test_server_postgres.py,
# in `repo`, already runs a server on PostgreSQL through a crash and
# recovery). Kept short: CI runs it on every change.
ON_POSTGRES = ["tests/test_cli_real_server.py"]


@nox.session(python=PYTHON)
def postgres(session: nox.Session) -> None:
    """Real-server tests with every `orbit server` on PostgreSQL: the
    harnesses give each SQLite path of a test a database of its own
    (ORBIT_TEST_DB=postgres). `nox -s postgres -- tests/e2e` runs the
    end-to-end suite that way."""
    session.install(*TEST_DEPS, *TRACE_TEST_DEPS)
    _install(session, ALL)
    session.install("-e", "./sdks/python")
    targets = session.posargs or ON_POSTGRES
    if any("e2e" in target for target in targets):
        with session.chdir("sdks/typescript"):  # the TypeScript workers
            session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    session.run("pytest", *targets, "-m", "e2e or not e2e", env={"ORBIT_TEST_DB": "postgres"})


@nox.session(python=PYTHON)
def sdk_python(session: nox.Session) -> None:
    """The Python worker SDK's own tests and linters."""
    # mypy 2 no longer type-checks for Python 3.9, the SDK's oldest target.
    session.install(*TEST_DEPS, "ruff>=0.6", "mypy>=1.11,<2")
    session.install("-e", "./sdks/python")
    session.run("ruff", "check", "sdks/python")
    session.run("ruff", "format", "--check", "sdks/python")
    session.run(
        "mypy", "--config-file", "sdks/python/pyproject.toml", "--strict", "sdks/python/src"
    )
    session.run("pytest", "sdks/python/tests", *session.posargs)


@nox.session(python=False)
def sdk_typescript(session: nox.Session) -> None:
    """The TypeScript SDK: install, type-check, lint and test with npm."""
    with session.chdir("sdks/typescript"):
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
        session.run("npm", "test", external=True)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks; not part of CI. Pass a benchmark name: nox -s bench -- parse.
    `nox -s bench -- http --worker-kind sdk` runs the Python SDK's workers."""
    _install(session, ALL)
    session.install("-e", "./sdks/python")
    name = session.posargs[0] if session.posargs else "parse"
    session.run("python", f"benchmarks/bench_{name}.py", *session.posargs[1:])
