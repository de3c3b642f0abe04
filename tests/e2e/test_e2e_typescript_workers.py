"""tsx runs TypeScript without checking it, so the workers the other e2e tests
run (ours, the book's quick start 1.1.0 worker and the one `orbit init`
writes) are type-checked here against the SDK's declarations, strictly."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_processes import REPO, TS_SDK, Stack

# tsc alone may take up to 120 s (its own timeout below) on a loaded machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

TEMPLATE = REPO / "orbit_cli" / "src" / "orbit_cli" / "templates" / "hello" / "worker.ts"
QUICKSTART = Path(__file__).resolve().parent / "projects" / "quickstart-1.1.0" / "worker.ts"


def test_every_typescript_worker_type_checks(stack: Stack) -> None:
    workers = stack.workers_dir()
    shutil.copy(TEMPLATE, workers / "generated_worker.ts")
    shutil.copy(QUICKSTART, workers / "quickstart_worker.ts")
    sources = sorted(p.name for p in workers.glob("*.ts"))
    assert len(sources) >= 6
    done = subprocess.run(
        [
            "node",
            str(TS_SDK / "node_modules" / "typescript" / "bin" / "tsc"),
            "--noEmit",
            "--strict",
            "--target",
            "es2022",
            "--module",
            "nodenext",
            "--moduleResolution",
            "nodenext",
            "--skipLibCheck",
            "--types",
            "node",
            "--typeRoots",
            str(TS_SDK / "node_modules" / "@types"),
            *sources,
        ],
        check=False,
        cwd=workers,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
