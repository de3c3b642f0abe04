"""The Python SDK workers' CPU per step under benchmarks/bench_http.py.

    python sdks/python/benchmarks/bench_worker_cpu.py [bench_http options]

bench_http prints the CPU of its whole process tree beside the server's: the
SDK worker processes and its own client threads together. This runs
bench_http as it is (--worker-kind sdk unless told otherwise) and adds one
line, `cpu workers X ms/step`: the CPU (user plus system, from /proc) that
the forked worker processes alone used between bench_http's two CPU
readings, divided by the steps run. The worker processes are the children
of the benchmark's process other than a server it started itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_http  # noqa: E402

_readings: list[float] = []


def _worker_seconds(server: Any) -> float:
    own = os.getpid()
    kids = Path(f"/proc/{own}/task/{own}/children").read_text().split()
    skip = None if server is None else server.pid
    ticks = sum(bench_http._ticks(int(kid)) for kid in kids if int(kid) != skip)
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> None:
    original = bench_http.cpu_split

    def cpu_split(proc: Any) -> Any:
        _readings.append(_worker_seconds(proc))
        return original(proc)

    bench_http.cpu_split = cpu_split
    argv = sys.argv[1:]
    if not any(a.startswith("--worker-kind") for a in argv):
        argv = ["--worker-kind", "sdk", *argv]
    sys.argv = [str(BENCHMARKS / "bench_http.py"), *argv]
    args = bench_http.arguments().parse_args(argv)
    bench_http.main()
    if len(_readings) == 2:
        steps = args.executions * args.steps
        per_step = 1000 * (_readings[1] - _readings[0]) / steps
        print(f"cpu          workers {per_step:.3f} ms/step ({args.workers} processes)")


if __name__ == "__main__":
    main()
