"""bench_cost: what an engine step costs, counted instead of timed.

Timings on a shared two-core machine move by 10 % or more from one run to the
next, which hides the few per cent a change to the hot path adds or saves.
Counts do not move:

- `--instructions` runs `bench_engine.py` (in memory, one handler thread)
  under valgrind's callgrind at two sizes and prints the machine
  instructions of one step: the difference of the two runs divided by the
  difference in steps, so start-up and imports cancel out. The threads
  interleave differently from run to run, so repeated runs differ by up to
  about 1.5 %. Needs `valgrind`.
- `--cache` does the same under cachegrind with its cache simulation and
  also prints the cache misses of one step and valgrind's estimate of its
  cycles (instructions + 10 x first-level misses + 100 x last-level
  misses). Where two builds execute nearly the same instructions, the one
  whose hot path spreads over more code can still be slower: this shows it.
- `--bytecodes` counts the bytecodes each Python function executes during a
  `bench_engine.py` run (every thread, `sys.settrace` opcode events), per
  step; `--save FILE` keeps the counts, and `--vs FILE` prints what changed
  against counts saved from another build, the largest changes first.

`--repo DIR` measures another checkout (its own `benchmarks/bench_engine.py`,
run by `--python`), to compare two builds:

    python benchmarks/bench_cost.py --instructions
    python benchmarks/bench_cost.py --instructions --repo ../base --python ../base/.venv/bin/python
    python benchmarks/bench_cost.py --cache --repo ../base --python ../base/.venv/bin/python
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
    _warm(repo, python)
    counts = [_callgrind(repo, python, n) for n in (small, large)]
    return (counts[1] - counts[0]) / ((large - small) * STEPS)


# cachegrind's events: instructions, first-level and last-level misses of
# instruction fetches, data reads and data writes.
CACHE_EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def cache(repo: Path, python: str, small: int, large: int) -> dict[str, float]:
    """Per step of `repo`'s bench_engine in memory: cachegrind's events and
    `cycles`, its estimate of the cycles they cost."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_cost: --cache needs valgrind on the PATH")
    _warm(repo, python)
    runs = [_cachegrind(repo, python, n) for n in (small, large)]
    steps = (large - small) * STEPS
    per = {event: (runs[1][event] - runs[0][event]) / steps for event in CACHE_EVENTS}
    first = per["I1mr"] + per["D1mr"] + per["D1mw"]
    last = per["ILmr"] + per["DLmr"] + per["DLmw"]
    per["cycles"] = per["Ir"] + 10 * first + 100 * last
    return per


def _cachegrind(repo: Path, python: str, executions: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out"
        _valgrind(repo, python, executions, "cachegrind", options=["--cache-sim=yes"], out=out)
        text = out.read_text()
    events = re.search(r"^events: (.*)$", text, re.M)
    summary = re.search(r"^summary: (.*)$", text, re.M)
    if events is None or summary is None:
        raise SystemExit("bench_cost: no summary in cachegrind's output")
    return dict(zip(events[1].split(), map(int, summary[1].split()), strict=True))


def _warm(repo: Path, python: str) -> None:
    """One short run outside valgrind first: it writes the bytecode caches,
    which a fresh checkout lacks and which the first measured run would
    otherwise compile (and so count) alone."""
    _bench_engine(repo, python, 10)


def _valgrind(
    repo: Path, python: str, executions: int, tool: str, *, options: list[str], out: Path
) -> str:
    """Runs `repo`'s bench_engine in memory under valgrind's `tool`, which
    writes to `out`; returns valgrind's stderr."""
    wrapper = ["valgrind", f"--tool={tool}", *options, f"--{tool}-out-file={out}"]
    return _bench_engine(repo, python, executions, wrapper)


def _bench_engine(
    repo: Path, python: str, executions: int, wrapper: list[str] | None = None
) -> str:
    """Runs `repo`'s bench_engine in memory (under `wrapper`); its stderr."""
    # A fixed hash seed, so that dicts and sets lay out alike from run to run.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compile once, not on every run
    done = subprocess.run(
        [
            *(wrapper or []),
            python,
            str(repo / "benchmarks" / "bench_engine.py"),
            "--executions",
            str(executions),
            "--store",
            "memory",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr


def _callgrind(repo: Path, python: str, executions: int) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        stderr = _valgrind(
            repo, python, executions, "callgrind", options=[], out=Path(scratch) / "out"
        )
    found = re.search(r"Collected : (\d+)", stderr)
    if found is None:
        raise SystemExit(f"bench_cost: no instruction count from callgrind:\n{stderr}")
    return int(found[1])


def bytecodes(executions: int) -> dict[str, float]:
    """Bytecodes per step of each function, in this process (this checkout
    or, through `--repo`, the child that runs this file there)."""
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    import bench_engine

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
    mode.add_argument(
        "--cache", action="store_true", help="instructions, cache misses and cycles per step"
    )
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
    if args.cache:
        per = cache(repo, args.python, args.small, args.large)
        print(f"per step ({repo}):")
        for event, value in per.items():
            print(f"  {event:<7} {value:>10,.0f}")
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
