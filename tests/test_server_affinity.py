"""`orbit server` keeps its worker process, every thread of it, on one CPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from server_harness import ServerProcess

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and more than one CPU",
)


def _allowed(pid: int) -> set[str]:
    """Cpus_allowed_list of each thread of `pid`."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                found.add(line.split(":", 1)[1].strip())
    return found


def test_the_worker_process_runs_on_one_cpu(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db") as proc:
        assert proc.proc is not None
        arbiter = proc.proc.pid
        api = proc.http()
        assert api.get("/v1/health").status == 200
        children = Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split()
        assert len(children) == 1
        allowed = _allowed(int(children[0]))
        assert len(allowed) == 1, allowed
        cpu = allowed.pop()
        assert cpu.isdigit()
        assert int(cpu) in os.sched_getaffinity(0)
