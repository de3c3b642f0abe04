"""What benchmarks share: for the source-program ones (bench_parse,
bench_check) a generated program of an exact size and best-of-N timing; for
bench_engine and bench_http, emptying the store `--store` names."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


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


def fresh_store(spec: str) -> None:
    """Empties what `--store` names before a run: a SQLite file is deleted
    with its WAL and shared-memory files; a PostgreSQL database (a
    postgres:// URL) loses ORBIT's tables, which the store creates again."""
    from orbit_store.urls import is_postgres

    if is_postgres(spec):
        from orbit_store.postgres import PostgresStore
        from orbit_store.schema import metadata

        store = PostgresStore(spec)
        try:
            metadata.drop_all(store.engine)
        finally:
            store.close()
        return
    for suffix in ("", "-wal", "-shm"):
        Path(spec + suffix).unlink(missing_ok=True)
