"""`orbit verify` with its default bounds: `python benchmarks/bench_verify.py [--repeat R]
[--limit S] [FILES...]`.

Times `orbit verify --json` in-process on every example (examples/*.orbit,
the verify blocks of examples/verify: chapter 59's order processing and
chapter 64's expense claim) and on the seeded-bug catalogue, one file at a
time, and prints per file the states, transitions and paths explored and
the best wall time of R runs. Exits 1 when a file takes longer than the
CI budget (--limit, 30 s by default) or when its search was cut short by
the default bounds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from orbit_cli.main import cli

REPO = Path(__file__).resolve().parents[1]


def default_files() -> list[Path]:
    examples = REPO / "examples"
    return [
        *sorted(examples.glob("*.orbit")),
        *sorted((examples / "verify").glob("*.verify.orbit")),
        *sorted((examples / "verify" / "bugs").glob("[0-9]*.orbit")),
    ]


def verify(path: Path, out: Path) -> tuple[float, dict[str, Any]]:
    began = time.perf_counter()
    result = CliRunner().invoke(cli, ["verify", "--json", "--out", str(out), str(path)])
    wall = time.perf_counter() - began
    if result.exit_code not in (0, 1):
        raise SystemExit(f"{path}: exit {result.exit_code}\n{result.output[-2000:]}")
    report: dict[str, Any] = json.loads(result.stdout)
    return wall, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit", type=float, default=30.0, help="seconds allowed per file")
    args = parser.parse_args()
    files: list[Path] = args.files or default_files()
    slow = False
    with tempfile.TemporaryDirectory() as directory:
        for path in files:
            best = float("inf")
            report: dict[str, Any] = {}
            for _ in range(args.repeat):
                wall, report = verify(path, Path(directory))
                best = min(best, wall)
            blocks = report["verifies"]
            states = sum(b["states"] for b in blocks)
            transitions = sum(b["transitions"] for b in blocks)
            paths = sum(b["paths"] for b in blocks)
            cut = [b["name"] for b in blocks if not b["complete"]]
            verdict = "ok" if report["ok"] else f"{report['violations']} violation(s)"
            name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            print(
                f"{name}: {len(blocks)} block(s), {states:,} states, {transitions:,} "
                f"transitions, {paths:,} paths in {best:.2f} s ({verdict})"
                + (f"; cut short: {', '.join(cut)}" if cut else "")
            )
            slow = slow or best > args.limit or bool(cut)
    sys.exit(1 if slow else 0)


if __name__ == "__main__":
    main()
