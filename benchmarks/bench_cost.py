"""bench_cost: what an engine step costs, counted instead of timed.

Timings on a shared two-core machine move by 10 % or more from one run to the
next, which hides the few per cent a change to the hot path adds or saves.
Counts do not move:

- `--instructions` runs `bench_engine.py` (in memory, one handler thread)
  under valgrind's callgrind at two sizes and prints the machine
  instructions of one step: the difference of the two runs divided by the
  difference in steps, so start-up and imports cancel out. Repeated runs
  agree within about 0.5 %. Needs `valgrind`.
- `--bytecodes` counts the bytecodes each Python function executes during a
  `bench_engine.py` run (every thread, `sys.settrace` opcode events), per
  step; `--save FILE` keeps the counts, and `--vs FILE` prints what changed
  against counts saved from another build, the largest changes first.

`--repo DIR` measures another checkout (its own `benchmarks/bench_engine.py`,
run by `--python`), to compare two builds:

    python benchmarks/bench_cost.py --instructions
    python benchmarks/bench_cost.py --instructions --repo ../base --python ../base/.venv/bin/python
    python benchmarks/bench_cost.py --bytecodes --save /tmp/base.json --repo ../base --python ../base/.venv/bin/python
    python benchmarks/bench_cost.py --bytecodes --vs /tmp/base.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

STEPS = 3  # bench_engine's default: three task steps per execution
HERE = Path(__file__).resolve().parent


def instructions(repo: Path, python: str, small: int, large: int) -> float:
    """Machine instructions per step of `repo`'s bench_engine in memory."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_cost: --instructions needs valgrind on the PATH")
    counts = [_callgrind(repo, python, n) for n in (small, large)]
    return (counts[1] - counts[0]) / ((large - small) * STEPS)


def _callgrind(repo: Path, python: str, executions: int) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={scratch}/out",
                python,
                str(repo / "benchmarks" / "bench_engine.py"),
                "--executions",
                str(executions),
                "--store",
                "memory",
            ],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"bench_cost: no instruction count from callgrind:\n{done.stderr}")
    return int(found[1])


def bytecodes(executions: int) -> dict[str, float]:
    """Bytecodes per step of each function, in this process (this checkout
    or, through `--repo`, the child that runs this file there)."""
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    import bench_engine  # type: ignore[import-not-found]

    counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def opcode(frame: FrameType, event: str, _arg: object) -> Any:
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename, code.co_name)] += 1
        return opcode

    def call(frame: FrameType, event: str, _arg: object) -> Any:
        if event != "call":
            return None
        frame.f_trace_opcodes = True
        return opcode

    run = bench_engine.run

    def traced(args: argparse.Namespace) -> Any:
        threading.settrace(call)
        sys.settrace(call)
        try:
            return run(args)
        finally:
            sys.settrace(None)
            threading.settrace(None)

    bench_engine.run = traced
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            bench_engine.main(["--executions", str(executions), "--store", "memory"])
        finally:
            sys.stdout = stdout
    steps = executions * STEPS
    return {f"{Path(f).name}:{name}": n / steps for (f, name), n in counts.items()}


def compare(before: dict[str, float], after: dict[str, float], top: int) -> None:
    print(f"bytecodes per step: {sum(before.values()):.0f} -> {sum(after.values()):.0f}")
    keys = sorted(set(before) | set(after), key=lambda k: -abs(after.get(k, 0) - before.get(k, 0)))
    for key in keys[:top]:
        old, new = before.get(key, 0.0), after.get(key, 0.0)
        print(f"{old:9.1f} {new:9.1f} {new - old:+9.1f}  {key}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_cost", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--instructions", action="store_true", help="instructions per step")
    mode.add_argument("--bytecodes", action="store_true", help="bytecodes per step, by function")
    parser.add_argument("--repo", type=Path, default=HERE.parent, help="the checkout to measure")
    parser.add_argument("--python", default=sys.executable, help="its interpreter")
    parser.add_argument("--small", type=int, default=200, help="executions of the first run")
    parser.add_argument("--large", type=int, default=1200, help="executions of the second run")
    parser.add_argument(
        "--traced", type=int, default=300, help="executions of the --bytecodes run (traced: slow)"
    )
    parser.add_argument("--save", type=Path, help="with --bytecodes: write the counts here")
    parser.add_argument("--vs", type=Path, help="with --bytecodes: compare with saved counts")
    parser.add_argument("--top", type=int, default=30, help="functions to list")
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)  # the child's output
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    if args.instructions:
        per_step = instructions(repo, args.python, args.small, args.large)
        print(f"instructions per step: {per_step:,.0f} ({repo})")
        return 0
    if args.json is not None:
        args.json.write_text(json.dumps(bytecodes(args.traced)))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "counts.json"
        # In a child, in the measured checkout, so its own modules are imported.
        subprocess.run(
            [
                args.python,
                __file__,
                "--bytecodes",
                "--traced",
                str(args.traced),
                "--json",
                str(out),
            ],
            cwd=repo,
            check=True,
        )
        counts: dict[str, float] = json.loads(out.read_text())
    if args.save is not None:
        args.save.write_text(json.dumps(counts))
    if args.vs is not None:
        compare(json.loads(args.vs.read_text()), counts, args.top)
    else:
        print(f"bytecodes per step: {sum(counts.values()):.0f} ({repo})")
        for key, n in sorted(counts.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"{n:9.1f}  {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
