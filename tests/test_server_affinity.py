"""`orbit server` keeps its worker process, every thread of it, on one CPU,
without wake-up preemption (SCHED_BATCH); the process that exports traces
uses every CPU, at a lower priority, and the front process (the worker
loop's HTTP) the CPUs the worker process is not on."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from server_harness import ServerProcess, wait_until

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and more than one CPU",
)


def _child(pid: int, module: bytes) -> int:
    """The child process of `pid` that runs `python -m <module>`."""
    for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if module in Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0"):
            return int(kid)
    raise AssertionError(f"no {module!r} process under {pid}")


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
        threads = [int(task.name) for task in Path(f"/proc/{children[0]}/task").iterdir()]
        assert {os.sched_getscheduler(tid) for tid in threads} == {os.SCHED_BATCH}


def test_the_trace_exporting_process_uses_the_other_cpus(tmp_path: Path) -> None:
    # Nothing listens at the endpoint: the process runs all the same.
    with ServerProcess(tmp_path / "orbit.db", "--otlp-endpoint", "http://127.0.0.1:9") as proc:
        assert proc.proc is not None
        arbiter = proc.proc.pid
        assert proc.http().get("/v1/health").status == 200
        (worker,) = Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split()
        exporter = _child(int(worker), b"orbit_server.trace_export")
        assert len(_allowed(int(worker)).pop().split(",")) == 1
        # It starts with its parent's CPU and lets go of it once running.
        wait_until(
            lambda: os.getpriority(os.PRIO_PROCESS, int(exporter)) == 10,
            10,
            "the exporting process to lower its priority",
        )
        assert os.sched_getaffinity(int(exporter)) == os.sched_getaffinity(0)


def test_the_front_process_runs_on_the_cpus_the_worker_process_leaves(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "orbit.db", env={"ORBIT_WORKER_LOOP": "front"}) as proc:
        assert proc.proc is not None
        arbiter = proc.proc.pid
        assert proc.http().get("/v1/health").status == 200
        (worker,) = Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split()
        front = _child(int(worker), b"orbit_server.front")
        (pinned,) = os.sched_getaffinity(int(worker))
        every = set(range(os.cpu_count() or 1))
        wait_until(
            lambda: os.sched_getaffinity(front) == every - {pinned},
            10,
            "the front process to leave the worker process's CPU",
        )
