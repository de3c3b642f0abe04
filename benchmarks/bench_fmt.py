"""`orbit fmt` speed: `python benchmarks/bench_fmt.py [--lines N] [--repeat R]`.

Takes the program `bench_check` generates (most of the language: schemas,
contracts, fan-out, conditions, signals, queries, handlers, lambdas, tests),
strips its layout (no indentation, extra spaces inside lines) so that every
line has something to fix, then times:

- `orbit fmt FILE` as a user runs it: a fresh process, so Python start-up
  and imports count (the target: under 1 s for 5,000 lines). Its CPU time
  is printed too: on a shared machine it is the steadier figure;
- `orbit_lang.formatter.format_source` in-process, on the messy text and on
  the already formatted text (the `--check` of a tidy file).

Prints the best of R runs of each, and checks that the result is the
generator's own (canonical) layout.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_check
import benchkit

from orbit_lang.formatter import format_source

TARGET_S = 1.0


def messy(text: str) -> str:
    """Every line without its indentation, with spaces doubled after `:` and `,`."""
    return "\n".join(
        line.strip().replace(": ", ":  ").replace(", ", " ,") for line in text.split("\n")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    orbit = shutil.which("orbit", path=str(Path(sys.executable).parent)) or "orbit"
    tidy = bench_check.generate(args.lines)
    text = messy(tidy)
    result = format_source(text, "bench.orbit")
    assert result.text == tidy, "the formatter did not restore the generated layout"
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.orbit"

        cpu: list[float] = []

        def cli() -> None:
            path.write_text(text, encoding="utf-8")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([orbit, "fmt", str(path)], check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)

        wall = benchkit.best_of(cli, args.repeat)
        assert path.read_text(encoding="utf-8") == tidy
    messy_s = benchkit.best_of(lambda: format_source(text, "bench.orbit"), args.repeat)
    tidy_s = benchkit.best_of(lambda: format_source(tidy, "bench.orbit"), args.repeat)
    verdict = "ok" if wall < TARGET_S else "SLOWER THAN TARGET"
    print(
        f"orbit fmt: {args.lines} lines in {wall:.3f} s, {min(cpu):.3f} s of CPU "
        f"(target < {TARGET_S} s: {verdict})"
    )
    print(
        f"  in-process: {messy_s:.3f} s to format the messy text, "
        f"{tidy_s:.3f} s to find the formatted text unchanged"
    )


if __name__ == "__main__":
    main()
