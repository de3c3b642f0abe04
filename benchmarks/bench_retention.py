"""bench_retention: what sweeping costs (issue 45, docs/retention.md).

`--executions` finished executions (a workflow without steps, which
completes at once) are made eligible, then swept by the server's `Sweeper`
into a `DirectoryArchive`, while `--threads` threads keep starting new
executions through the same engine. Figures:

* swept/s: executions archived and deleted per second of the sweep;
* start latency p50/p99 (ms) of the concurrent starts without any sweep,
  for `--seconds` before the sweep and again after it (the machine's load
  drifts: the two show how much), and during the sweep.

The sweeper's clock is frozen at the moment the eligible executions exist,
so the starts made meanwhile are not swept. `--store` is a SQLite file
(deleted first) or a postgres:// URL (its ORBIT tables dropped first).

    python benchmarks/bench_retention.py
    python benchmarks/bench_retention.py --executions 20000 --threads 8
    python benchmarks/bench_retention.py --executions 1000000 --bulk

`--bulk` writes the finished executions into the tables directly (rows and
events as the engine commits them) instead of running them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import attrs
from benchkit import fresh_store

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.engine import Engine
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.ports import SystemClock
from orbit_server.archive import DirectoryArchive
from orbit_server.retention import ARCHIVE_BATCH, BATCH, PAUSE_S, Sweeper


def definition() -> ir.Definition:
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="Done",
        version="1.0.0",
        input=t.EMPTY_RECORD,
        output=t.EMPTY_RECORD,
        steps=(),
        result=e.EMPTY_OBJECT,
        contracts={},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


def open_store(spec: str) -> Any:
    fresh_store(spec)
    if spec.startswith(("postgres://", "postgresql://")):
        from orbit_store.postgres import PostgresStore

        return PostgresStore(spec)
    from orbit_store.sqlite import SqliteStore

    return SqliteStore(spec)


def fill(engine: Engine, count: int, threads: int) -> None:
    """`count` finished executions, started from `threads` threads."""

    def run(part: int) -> None:
        for i in range(part, count, threads):
            engine.start("Done", execution_id=f"old-{i:07d}")

    workers = [threading.Thread(target=run, args=(p,)) for p in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def bulk_fill(store: Any, defn: ir.Definition, count: int, ended_ms: int) -> None:
    """`count` finished executions written straight into the store's tables
    (the rows and the three events the engine would have committed), in
    large transactions: a million take minutes this way, not hours."""
    from sqlalchemy import insert

    from orbit_store import schema
    from orbit_store.sql import _event_row

    # Compiled once; fed tuples on the DBAPI connection (dicts through
    # SQLAlchemy cost more than the database does at a million).
    dialect = store.engine.dialect
    add_rows = insert(schema.workflow_executions).compile(dialect=dialect)
    add_events = insert(schema.execution_events).compile(dialect=dialect)

    def params(compiled: Any, values: tuple[Any, ...], columns: tuple[str, ...]) -> Any:
        if compiled.positional:
            order = [columns.index(p) for p in compiled.positiontup]
            return tuple(values[i] for i in order)
        return dict(zip(columns, values, strict=True))

    chunk = 50_000
    for first in range(0, count, chunk):
        rows: list[Any] = []
        events: list[Any] = []
        for i in range(first, min(first + chunk, count)):
            eid = f"old-{i:07d}"
            at = ended_ms - count + i  # distinct ends, oldest first
            row = (eid, defn.name, defn.version, defn.definition_hash, "COMPLETED", at, at, 3)
            rows.append(params(add_rows, row, _ROW_COLUMNS))
            for event in (
                ev.WorkflowCreated(1, at, defn.name, defn.version, defn.definition_hash, {}),
                ev.WorkflowStarted(2, at),
                ev.WorkflowCompleted(3, at, {}),
            ):
                events.append(params(add_events, _event_row(eid, event), _EVENT_COLUMNS))
        raw = store.engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.executemany(str(add_rows), rows)
            cursor.executemany(str(add_events), events)
            raw.commit()
        finally:
            raw.close()
        print(f"  loaded {min(first + chunk, count)}", file=sys.stderr, flush=True)


_ROW_COLUMNS = (
    "execution_id",
    "workflow",
    "version",
    "definition_hash",
    "status",
    "created_at_ms",
    "updated_at_ms",
    "last_seq",
)
_EVENT_COLUMNS = ("execution_id", "seq", "event_type", "step", "payload", "timestamp_ms")


def load(engine: Engine, threads: int, stop: threading.Event, tag: str) -> list[float]:
    """Starts from `threads` threads until `stop`; each start's latency in ms."""
    latencies: list[float] = []
    lock = threading.Lock()

    def run(part: int) -> None:
        mine: list[float] = []
        n = 0
        while not stop.is_set():
            began = time.perf_counter()
            engine.start("Done", execution_id=f"{tag}-{part}-{n}")
            mine.append((time.perf_counter() - began) * 1000)
            n += 1
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=run, args=(p,)) for p in range(threads)]
    for w in workers:
        w.start()
    stop.wait()
    for w in workers:
        w.join()
    return latencies


def percentiles(latencies: list[float]) -> dict[str, float]:
    if len(latencies) < 2:
        return {"starts": len(latencies)}
    cuts = statistics.quantiles(latencies, n=100)
    return {"starts": len(latencies), "p50_ms": round(cuts[49], 2), "p99_ms": round(cuts[98], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0, help="the baseline's duration")
    parser.add_argument("--store", default=os.path.join(tempfile.gettempdir(), "bench-ret.db"))
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument(
        "--pause", type=float, default=PAUSE_S, help="least seconds between batches"
    )
    parser.add_argument("--archive-batch", type=int, default=ARCHIVE_BATCH)
    parser.add_argument("--archive", default=None, help="directory (default: a temporary one)")
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="write the finished executions straight into the tables (for a million)",
    )
    args = parser.parse_args()

    store = open_store(args.store)
    began = time.perf_counter()
    if args.bulk:
        store.prepare_retention()  # its index built while the tables are empty
        bulk_fill(store, definition(), args.executions, SystemClock().now_ms())
    engine = Engine(store, SystemClock())
    engine.deploy(definition())
    if not args.bulk:
        fill(engine, args.executions, args.threads)
    filled_s = time.perf_counter() - began
    time.sleep(0.05)  # the last ones' end is now strictly in the past
    frozen = SystemClock().now_ms()

    stop = threading.Event()
    timer = threading.Timer(args.seconds, stop.set)
    timer.start()
    baseline = load(engine, args.threads, stop, "base")

    with tempfile.TemporaryDirectory() as scratch:
        archive = DirectoryArchive(args.archive or scratch)
        sweeper = Sweeper(
            store,
            archive,
            1,
            clock=lambda: frozen,
            interval_s=60.0,
            batch=args.batch,
            pause_s=args.pause,
            archive_batch=args.archive_batch,
        )
        stop = threading.Event()
        during: list[float] = []
        loader = threading.Thread(
            target=lambda: during.extend(load(engine, args.threads, stop, "during"))
        )
        loader.start()
        summary = sweeper.sweep()
        assert summary is not None  # a sweeper with a store and no gate always sweeps
        stop.set()
        loader.join()
        archived = len(archive)
    stop = threading.Event()
    timer = threading.Timer(args.seconds, stop.set)
    timer.start()
    after = load(engine, args.threads, stop, "after")
    engine.close()
    store.close()
    print(
        json.dumps(
            {
                "store": args.store,
                "executions": args.executions,
                "threads": args.threads,
                "batch": args.batch,
                "archive_batch": args.archive_batch,
                "pause_s": args.pause,
                "filled_s": round(filled_s, 2),
                "swept": summary.swept,
                "archived": archived,
                "sweep_s": round(summary.seconds, 2),
                "swept_per_s": round(summary.swept / max(summary.seconds, 1e-9)),
                "baseline": percentiles(baseline),
                "during_sweep": percentiles(during),
                "after_sweep": percentiles(after),
            },
            indent=2,
        )
    )
    if summary.swept != args.executions:
        sys.exit(f"swept {summary.swept} of {args.executions}")


if __name__ == "__main__":
    main()
