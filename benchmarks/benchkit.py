"""What the source-program benchmarks (bench_parse, bench_check) share: a
generated program of an exact size, and best-of-N timing."""

from __future__ import annotations

import time
from collections.abc import Callable


def generate(block: Callable[[int], list[str]], lines: int) -> str:
    """As many whole `block(0)`, `block(1)`, ... as fit in `lines` lines, padded
    with comment lines to exactly `lines`."""
    out: list[str] = []
    i = 0
    while len(out) + len(block(i)) <= lines:
        out += block(i)
        i += 1
    out += ["// padding"] * (lines - len(out))
    return "\n".join(out) + "\n"


def best_of(run: Callable[[], object], repeat: int) -> float:
    """The fastest of `repeat` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best
