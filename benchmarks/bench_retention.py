"""bench_retention: what sweeping costs (issue 45, docs/retention.md).

`--executions` finished executions (a workflow without steps, which
completes at once) are made eligible, then swept by the server's `Sweeper`
into a `DirectoryArchive`, while `--threads` threads keep starting new
executions through the same engine. Figures:

* swept/s: executions archived and deleted per second of the sweep;
* start latency p50/p99 (ms) of the concurrent starts without a sweep and
  during it. One load runs throughout: `--seconds` before the sweep, then
  the sweep works for `--phase` seconds and is held (between two chunks)
  for as long, in turn, then `--seconds` after. A shared machine's load
  drifts by the minute, so the two kinds interleave rather than follow each
  other, and `p99_by_window` gives the spread of the p99 over `--window`
  second windows of each kind.

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
from orbit_server.retention import ARCHIVE_BATCH, BATCH, HOLD_RATIO, PAUSE_S, Sweeper


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


def reopen(spec: str) -> Any:
    """The store at `spec` as it is (a server's restart)."""
    if spec.startswith(("postgres://", "postgresql://")):
        from orbit_store.postgres import PostgresStore

        return PostgresStore(spec)
    from orbit_store.sqlite import SqliteStore

    return SqliteStore(spec)


def copy_template(source: str, target: str) -> None:
    """A SQLite file (closed, so its WAL is checkpointed into it) copied."""
    import shutil

    if source.startswith(("postgres://", "postgresql://")):
        sys.exit("--template is for a SQLite --store")
    fresh_store(target)
    shutil.copyfile(source, target)


def space(spec: str) -> tuple[float, float]:
    """The database's size (MB) after the sweep and a restart, and the size
    of a database holding only what is live now, written afresh: SQLite's
    `VACUUM INTO` a new file (as tight as a fresh server's file gets, so the
    comparison is the strict one); PostgreSQL's database after `VACUUM
    FULL` of ORBIT's tables (autovacuum makes the space reusable, but gives
    the files back only when their tail is empty)."""
    mb = 1024 * 1024
    store = reopen(spec)  # the restart; SQLite checkpoints its WAL on close
    store.close()
    if spec.startswith(("postgres://", "postgresql://")):
        import psycopg

        from orbit_store import schema

        with psycopg.connect(spec, autocommit=True) as conn:
            size = "SELECT pg_database_size(current_database())"
            after = conn.execute(size).fetchone()[0]  # type: ignore[index]
            present = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            ours = set(schema.metadata.tables)
            for (name,) in conn.execute(present).fetchall():
                if name in ours:
                    conn.execute(f'VACUUM FULL "{name}"')
            fresh = conn.execute(size).fetchone()[0]  # type: ignore[index]
        return round(after / mb, 1), round(fresh / mb, 1)
    import sqlite3

    after = sum(
        os.path.getsize(spec + suffix) for suffix in ("", "-wal") if os.path.exists(spec + suffix)
    )
    compact = spec + ".fresh"
    if os.path.exists(compact):
        os.unlink(compact)
    db = sqlite3.connect(spec)
    try:
        db.execute("VACUUM INTO ?", (compact,))
    finally:
        db.close()
    fresh = os.path.getsize(compact)
    os.unlink(compact)
    return round(after / mb, 1), round(fresh / mb, 1)


def load_timed(
    engine: Engine, threads: int, stop: threading.Event, out: list[tuple[float, float]]
) -> None:
    """Starts from `threads` threads until `stop`: (start time, ms) each."""

    def run(part: int) -> None:
        n = 0
        while not stop.is_set():
            began = time.perf_counter()
            engine.start("Done", execution_id=f"load-{part}-{n}")
            out.append((began, (time.perf_counter() - began) * 1000))  # atomic
            n += 1

    workers = [threading.Thread(target=run, args=(p,)) for p in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


class Gate:
    """Holds the sweeper before its next chunk (its next candidates' read)
    while `hold` is in force, and counts how long it was held."""

    def __init__(self) -> None:
        self._go = threading.Event()
        self._go.set()
        self._blocked = threading.Event()
        self.held_s = 0.0

    def around(self, read: Any) -> Any:
        def gated(*args: Any, **kwargs: Any) -> Any:
            if not self._go.is_set():
                began = time.perf_counter()
                self._blocked.set()
                self._go.wait()
                self.held_s += time.perf_counter() - began
            return read(*args, **kwargs)

        return gated

    def hold(self) -> None:
        self._blocked.clear()
        self._go.clear()

    def wait_held(self, sweeping: threading.Thread) -> float | None:
        """When the sweeper stopped at the gate (None: it finished first)."""
        while not self._blocked.wait(0.01):
            if not sweeping.is_alive():
                self._go.set()
                return None
        return time.perf_counter()

    def release(self) -> None:
        self._go.set()


def progress(
    swept: int,
    began: float,
    held_s: float,
    starts: list[tuple[float, float]],
    quiet: list[tuple[float, float]],
) -> None:
    """A line on stderr after each phase, so that a long run tells how it
    goes: the starts of the last held phase and of the work since."""
    working = time.perf_counter() - began - held_s
    a, b = quiet[-1]
    recent: list[tuple[float, float]] = []
    for at, ms in reversed(starts):  # newest first; stop before the last held phase
        if at < a:
            break
        recent.append((at, ms))
    line = {
        "swept": swept,
        "working_s": round(working, 1),
        "swept_per_s": round(swept / max(working, 1e-9)),
        "last_held": percentiles([ms for at, ms in recent if at < b]),
        "since": percentiles([ms for at, ms in recent if at >= b]),
    }
    print(json.dumps(line), file=sys.stderr, flush=True)


def window_p99s(
    starts: list[tuple[float, float]], window: float, is_quiet: Any, quiet: bool
) -> dict[str, float]:
    """The p99 of each `window` seconds of starts of one kind: their least,
    median and greatest (the spread the machine's load gives)."""
    by: dict[int, list[float]] = {}
    for at, ms in starts:
        if is_quiet(at) == quiet:
            by.setdefault(int(at // window), []).append(ms)
    cuts = sorted(statistics.quantiles(v, n=100)[98] for v in by.values() if len(v) >= 200)
    if not cuts:
        return {}
    return {
        "windows": len(cuts),
        "least": round(cuts[0], 1),
        "median": round(statistics.median(cuts), 1),
        "greatest": round(cuts[-1], 1),
    }


def redact(spec: str) -> str:
    from orbit_store.urls import redact as hide

    return hide(spec)


def percentiles(latencies: list[float]) -> dict[str, float]:
    if len(latencies) < 2:
        return {"starts": len(latencies)}
    cuts = statistics.quantiles(latencies, n=100)
    return {"starts": len(latencies), "p50_ms": round(cuts[49], 2), "p99_ms": round(cuts[98], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="load without a sweep before and after it"
    )
    parser.add_argument(
        "--phase",
        type=float,
        default=10.0,
        help="the sweep works this long, then is held this long, in turn (0: never held)",
    )
    parser.add_argument(
        "--limit",
        type=float,
        default=0.0,
        help="stop the sweep after this many seconds of work (0: sweep everything)",
    )
    parser.add_argument("--window", type=float, default=5.0, help="seconds per p99 window")
    parser.add_argument("--store", default=os.path.join(tempfile.gettempdir(), "bench-ret.db"))
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument(
        "--pause", type=float, default=PAUSE_S, help="least seconds between batches"
    )
    parser.add_argument("--archive-batch", type=int, default=ARCHIVE_BATCH)
    parser.add_argument(
        "--hold-ratio", type=float, default=HOLD_RATIO, help="pause per second of sweeping work"
    )
    parser.add_argument(
        "--held", type=float, default=None, help="seconds held per phase (default: --phase)"
    )
    parser.add_argument("--archive", default=None, help="directory (default: a temporary one)")
    parser.add_argument(
        "--template",
        default=None,
        help="SQLite: a copy of the filled database, made by the first run and copied by the next",
    )
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="write the finished executions straight into the tables (for a million)",
    )
    args = parser.parse_args()

    began = time.perf_counter()
    if args.template and os.path.exists(args.template):
        copy_template(args.template, args.store)
        store = reopen(args.store)
    else:
        store = open_store(args.store)
        if args.bulk:
            store.prepare_retention()  # its index built while the tables are empty
            bulk_fill(store, definition(), args.executions, SystemClock().now_ms())
        if args.template:
            store.close()
            copy_template(args.store, args.template)
            store = reopen(args.store)
    engine = Engine(store, SystemClock())
    engine.deploy(definition())
    if not args.bulk:
        fill(engine, args.executions, args.threads)
    filled_s = time.perf_counter() - began
    time.sleep(0.05)  # the last ones' end is now strictly in the past
    frozen = SystemClock().now_ms()

    # One load for the whole run; each start is kept with its start time
    # and sorted afterwards into what ran while the sweeper worked and what
    # ran while it did not.
    starts: list[tuple[float, float]] = []
    stop = threading.Event()
    loader = threading.Thread(target=load_timed, args=(engine, args.threads, stop, starts))
    loader.start()
    time.sleep(args.seconds)  # without a sweep, before
    quiet: list[tuple[float, float]] = [(0.0, time.perf_counter())]

    with tempfile.TemporaryDirectory() as scratch:
        archive = DirectoryArchive(args.archive or scratch)
        gate = Gate()
        store.retention_candidates = gate.around(store.retention_candidates)
        sweeper = Sweeper(
            store,
            archive,
            1,
            clock=lambda: frozen,
            interval_s=60.0,
            batch=args.batch,
            pause_s=args.pause,
            archive_batch=args.archive_batch,
            hold_ratio=args.hold_ratio,
        )
        summaries: list[Any] = []
        sweeping = threading.Thread(target=lambda: summaries.append(sweeper.sweep()))
        sweeping.start()
        # Phases: the sweeper works for `--phase` seconds, then is held
        # (between two chunks) for as long; the load never stops.
        began_sweep = time.perf_counter()
        while sweeping.is_alive():
            if args.limit and time.perf_counter() - began_sweep - gate.held_s >= args.limit:
                sweeper.close()  # stops before its next step
                sweeping.join()
                break
            sweeping.join(args.phase or args.limit or None)
            progress(sweeper.swept_total, began_sweep, gate.held_s, starts, quiet)
            if not sweeping.is_alive() or args.phase <= 0:
                continue
            gate.hold()
            held = gate.wait_held(sweeping)
            if held is not None:
                time.sleep(args.phase if args.held is None else args.held)
                quiet.append((held, time.perf_counter()))
                gate.release()
        summary = summaries[0]
        assert summary is not None  # a sweeper with a store and no gate always sweeps
        archived = len(archive)
    after = time.perf_counter()
    time.sleep(args.seconds)  # without a sweep, after
    stop.set()
    loader.join()
    quiet.append((after, float("inf")))
    engine.close()
    store.close()
    sizes = space(args.store) if summary.swept == args.executions else None

    def is_quiet(at: float) -> bool:
        return any(a <= at < b for a, b in quiet)

    without = [ms for at, ms in starts if is_quiet(at)]
    during = [ms for at, ms in starts if not is_quiet(at)]
    working_s = summary.seconds - gate.held_s
    print(
        json.dumps(
            {
                "store": redact(args.store),
                "executions": args.executions,
                "threads": args.threads,
                "batch": args.batch,
                "archive_batch": args.archive_batch,
                "pause_s": args.pause,
                "phase_s": args.phase,
                "limit_s": args.limit,
                "held_per_phase_s": args.phase if args.held is None else args.held,
                "hold_ratio": args.hold_ratio,
                "filled_s": round(filled_s, 2),
                "swept": summary.swept,
                "archived": archived,
                "sweep_s": round(summary.seconds, 2),
                "held_s": round(gate.held_s, 2),
                "swept_per_s": round(summary.swept / max(working_s, 1e-9)),
                "without_sweep": percentiles(without),
                "during_sweep": percentiles(during),
                "size_after_restart_mb": sizes and sizes[0],
                "size_fresh_mb": sizes and sizes[1],
                "p99_by_window": {
                    "without": window_p99s(starts, args.window, is_quiet, True),
                    "during": window_p99s(starts, args.window, is_quiet, False),
                },
            },
            indent=2,
        )
    )
    if summary.swept != args.executions and not args.limit:
        sys.exit(f"swept {summary.swept} of {args.executions}")


if __name__ == "__main__":
    main()
