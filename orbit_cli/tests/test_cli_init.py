"""`orbit init`: the quick start's project, exactly as chapters 04 and 06 list it."""

from __future__ import annotations

import json
import py_compile
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import Golden

from orbit_cli.main import cli

# The book sits in shared/ beside the repository checkout.
SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "04-quick-start.md"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _init(name: str = "hello-orbit") -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["init", name], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_init_reports_every_file_and_the_next_step(golden: Golden) -> None:
    code, stdout, _ = _init()
    assert code == 0
    golden("init", stdout)
    assert stdout.endswith("\nNext: cd hello-orbit && orbit check workflows/hello.orbit\n")


def test_init_writes_the_quick_start_project(tmp_path: Path) -> None:
    _init()
    root = tmp_path / "hello-orbit"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [
        ".gitignore",
        "README.md",
        "workers/python/requirements.txt",
        "workers/python/worker.py",
        "workers/typescript/package.json",
        "workers/typescript/worker.ts",
        "workflows/hello.orbit",
    ]
    assert (root / "workers/python/requirements.txt").read_text() == "orbit-lang-sdk>=0.1,<0.2\n"
    package = json.loads((root / "workers/typescript/package.json").read_text())
    assert package["dependencies"] == {"orbit-lang": "^0.1.0"}
    assert package["type"] == "module" and package["private"] is True
    worker = (root / "workers/python/worker.py").read_text()
    assert "from orbit_sdk import Worker" in worker
    assert 'Worker("hello-python")' in worker
    py_compile.compile(str(root / "workers/python/worker.py"), doraise=True)
    ts = (root / "workers/typescript/worker.ts").read_text()
    assert 'import { Worker } from "orbit-lang";' in ts
    assert 'workerId: "hello-typescript"' in ts
    ignored = (root / ".gitignore").read_text().split()
    for pattern in ("node_modules/", "__pycache__/", "*.db", "*.db-wal", "*.db-shm", "build/"):
        assert pattern in ignored


@pytest.mark.skipif(not SPEC.exists(), reason="the book is not beside this checkout")
def test_the_workflow_is_the_quick_starts(tmp_path: Path) -> None:
    _init("p")
    workflow = (tmp_path / "p/workflows/hello.orbit").read_text()
    worker = (tmp_path / "p/workers/python/worker.py").read_text()
    book = SPEC.read_text(encoding="utf-8")
    start = book.index("// A two-language hello world")
    assert book[start:].startswith(workflow.rstrip("\n"))
    assert worker.rstrip("\n") in book


def test_init_refuses_a_non_empty_directory() -> None:
    Path("hello").mkdir()
    Path("hello/notes.txt").write_text("mine")
    code, stdout, stderr = _init("hello")
    assert (code, stdout, stderr) == (1, "", "error: hello already exists and is not empty\n")
    assert [p.name for p in Path("hello").iterdir()] == ["notes.txt"]
    Path("empty").mkdir()
    assert _init("empty")[0] == 0


def test_typescript_worker_uses_only_erasable_syntax() -> None:
    """Node's type stripping rejects enums, namespaces and parameter properties."""
    from importlib.resources import files

    source = files("orbit_cli").joinpath("templates", "hello", "worker.ts").read_text()
    for construct in (r"\benum\b", r"\bnamespace\b", r"\bconstructor\s*\(\s*(private|public)"):
        assert not re.search(construct, source)


def test_init_points_the_workers_at_the_installs_sdk_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Until the SDKs are on PyPI and npm, the project installs the copies an
    # ORBIT install keeps, under the names they will be published as.
    sdks = tmp_path / "sdks"
    sdks.mkdir()
    for name in (
        "orbit_lang_sdk-0.1.0-py3-none-any.whl",
        "orbit_lang_sdk-0.10.0-py3-none-any.whl",
        "orbit-lang-0.1.0.tgz",
        "orbit-lang-0.9.1.tgz",
        "orbit-lang-core-1.0.0.tgz",
    ):
        (sdks / name).write_bytes(b"")
    monkeypatch.setenv("ORBIT_SDK_DIR", "sdks")
    assert _init()[0] == 0
    root = tmp_path / "hello-orbit"
    lines = (root / "workers/python/requirements.txt").read_text().splitlines()
    wheel = (sdks / "orbit_lang_sdk-0.10.0-py3-none-any.whl").as_uri()
    assert lines[-1] == f"orbit-lang-sdk @ {wheel}"
    assert all(line.startswith("#") for line in lines[:-1])
    assert "orbit-lang-sdk>=0.1,<0.2" in lines[-2]
    package = json.loads((root / "workers/typescript/package.json").read_text())
    assert package["dependencies"] == {"orbit-lang": f"file:{sdks / 'orbit-lang-0.9.1.tgz'}"}
    assert package["scripts"] == {"start": "tsx worker.ts"}


def test_init_refuses_an_sdk_folder_that_is_not_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORBIT_SDK_DIR", "nowhere")
    code, _, stderr = _init()
    assert code == 1
    assert "ORBIT_SDK_DIR:" in stderr and "is not a directory" in stderr


def test_typed_init_writes_typed_workers_and_their_current_generated_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = CliRunner().invoke(cli, ["init", "--typed", "typed"], catch_exceptions=False)
    assert result.exit_code == 0
    root = tmp_path / "typed"
    assert "created typed/workers/python/hello_contracts.py" in result.stdout
    assert "created typed/workers/typescript/hello_contracts.ts" in result.stdout
    worker_py = (root / "workers/python/worker.py").read_text()
    assert "@worker.task(GREETING_COMPOSE)" in worker_py
    py_compile.compile(str(root / "workers/python/worker.py"), doraise=True)
    py_compile.compile(str(root / "workers/python/hello_contracts.py"), doraise=True)
    assert "worker.task(GREETING_DECORATE" in (root / "workers/typescript/worker.ts").read_text()
    monkeypatch.chdir(root)
    for lang, folder in (("python", "workers/python"), ("typescript", "workers/typescript")):
        check = CliRunner().invoke(
            cli,
            ["codegen", "--lang", lang, "workflows/hello.orbit", "-o", folder,
             "--package", "hello_contracts", "--check"],
        )  # fmt: skip
        assert check.exit_code == 0, check.output
    generated = (root / "workers/python/hello_contracts.py").read_text()
    assert re.search(r'contract_hash="sha256:[0-9a-f]{64}"', generated)
