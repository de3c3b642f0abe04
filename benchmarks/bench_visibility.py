"""bench_visibility: typed visibility's two figures (issue 44, part 1).

`--query` fills a store with `--executions` executions of
examples/visibility.orbit's `Orders` (default 1,000,000; 20,000 customers,
50 executions each, amounts spread over 0..1000), written straight into
`workflow_executions` and `orbit_search_values` (the two fields named by
their ids in `orbit_search_fields`) through the store's own tables (what the engine would have committed, without running a million
starts), then times selective filters through `SqlStore.search_executions`
— the path `GET /v1/executions?where=` takes — and prints p50/p95 per
filter and how many rows each returned (each ≤ 100).

`--commit` runs the same workflow through the engine on a SQLite file
(in-process handler, one thread), once as written and once without its
`search` block, for each of `--steps` (1, or a list such as 1,3,10: chains
of that many task steps). A first uncounted run of each warms the process
and sizes the runs: each then lasts about `--seconds` (or runs
`--steps-executions` executions). `--runs` pairs follow, back to back, the
order alternating (ABBA) so a drift in the machine's load weighs on both,
with the garbage collector emptied and frozen before every run. It prints
per step the wall and process CPU time (`time.process_time`, every thread),
the bytes the process wrote (/proc/self/io: the WAL's frames, checkpoints,
temporary files) and the group commits of each arm, then what indexing
adds: the median of the pairs' ratios with their quartiles, range and a
95 % interval of the median, and the machine's load average.
With `--together` the two arms of a pair run at the same time, each in a
child process of its own, so both meet the same load of the same moments.

`--counted` runs the same two workflows in child processes under valgrind's
callgrind instead of timing them, on one thread (`stepped_run`: the same
groups every time), at two sizes (`--small`, `--large`
executions), and prints the machine instructions of one step of each — the
difference of the two runs over the difference in steps, so start-up,
imports, the deploy and the schema cancel out — and what indexing adds.
Every instruction of the process counts, SQLite's C code included. Needs
`valgrind`.

    python benchmarks/bench_visibility.py --query --store /tmp/vis.db
    python benchmarks/bench_visibility.py --query --store postgres://...
    python benchmarks/bench_visibility.py --commit --store /tmp/vis-commit.db [--steps 1,3,10]
    python benchmarks/bench_visibility.py --counted --store /tmp/vis-counted.db [--steps 5]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from orbit_core import ir
from orbit_core.api import StartRequest
from orbit_core.engine import Engine, tune_process
from orbit_core.visibility.check import FieldCatalog, compile_filter
from orbit_core.visibility.page import SearchQuery
from orbit_lang import compile_source
from orbit_store import schema as s
from orbit_store import search
from orbit_store.sql import SqlStore

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "visibility.orbit"
CUSTOMERS = 20_000
CHUNK = 20_000


def orders(with_search: bool = True, steps: int = 1) -> ir.Definition:
    """`Orders` as in the example, optionally without its `search` block or
    with `steps` steps one after the other (each calling `orders.work`)."""
    text = EXAMPLE.read_text(encoding="utf-8")
    if not with_search:
        start = text.index("    search {")
        text = text[:start] + text[text.index("}", start) + 2 :]
    if steps > 1:
        start = text.index("    step work {")
        one = text[start : text.index("\n    }\n", start) + 7]
        many = one.replace("step work", "step work0")
        for i in range(1, steps):
            many += "\n" + one.replace("step work {", f"step work{i} {{\n        after work{i - 1}")
        text = text.replace(one, many)
    result = compile_source(text, "visibility.orbit")
    assert result.errors == 0, [d.message for d in result.diagnostics]
    (defn,) = result.definitions
    assert bool(defn.search) == with_search
    return defn


def open_store(spec: str) -> SqlStore:
    from benchkit import fresh_store

    from orbit_store.urls import is_postgres

    fresh_store(spec)
    if is_postgres(spec):
        from orbit_store.postgres import PostgresStore

        return PostgresStore(spec)
    from orbit_store.sqlite import SqliteStore

    return SqliteStore(spec)


def load(store: SqlStore, defn: ir.Definition, total: int) -> float:
    """Writes `total` executions and their two search rows; returns seconds."""
    t0 = time.perf_counter()
    rng = random.Random(44)
    x, v = s.workflow_executions, s.orbit_search_values
    base = 1_700_000_000_000
    with store.engine.begin() as conn:
        for statement in search.create_statements(store.engine.dialect):
            if "INDEX" not in statement:
                conn.exec_driver_sql(statement)
        driver = conn.connection.driver_connection
        assert driver is not None
        cursor = driver.cursor()
        names = {(defn.name, "customer"), (defn.name, "amount")}
        ids = search.name_fields(cursor, store.engine.dialect.paramstyle, names)[defn.name]
        for first in range(0, total, CHUNK):
            rows: list[dict[str, Any]] = []
            values: list[dict[str, Any]] = []
            for i in range(first, min(first + CHUNK, total)):
                eid = f"e-{i:07d}"
                status = "RUNNING" if i % 10 == 0 else "COMPLETED"
                rows.append(
                    {
                        "execution_id": eid,
                        "workflow": defn.name,
                        "version": defn.version,
                        "definition_hash": defn.definition_hash,
                        "status": status,
                        "created_at_ms": base + i,
                        "updated_at_ms": base + i + 5,
                        "last_seq": 6,
                    }
                )
                customer = f"c-{i % CUSTOMERS}"
                amount = round(rng.uniform(0, 1000), 2)
                values.append(
                    {
                        "execution_id": eid,
                        "field_id": ids["customer"],
                        "str_value": customer,
                        "num_value": None,
                    }
                )
                values.append(
                    {
                        "execution_id": eid,
                        "field_id": ids["amount"],
                        "str_value": None,
                        "num_value": amount,
                    }
                )
            if store.engine.dialect.name == "postgresql":
                _copy(conn, x.name, rows)
                _copy(conn, v.name, values)
            else:
                conn.execute(x.insert(), rows)
                conn.execute(v.insert(), values)
        for statement in search.create_statements(store.engine.dialect):
            if "INDEX" in statement:
                conn.exec_driver_sql(statement)
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE workflow_executions")
            conn.exec_driver_sql("ANALYZE orbit_search_values")
            conn.exec_driver_sql("ANALYZE orbit_search_fields")
    return time.perf_counter() - t0


def _copy(conn: Any, table: str, rows: list[dict[str, Any]]) -> None:
    """Bulk-loads `rows` into `table` with COPY, on the transaction's own
    psycopg connection (ten times faster than batched INSERTs)."""
    columns = list(rows[0])
    raw = conn.connection.driver_connection
    with (
        raw.cursor() as cursor,
        cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row([row[c] for c in columns])


FILTERS = {
    "customer": 'customer == "{c}"',
    "customer+amount": 'customer == "{c}" and amount > 500',
    "issue example": 'customer == "{c}" and amount > 500 and status == RUNNING',
    "amount range": "amount >= {a} and amount < {b}",
}


def query(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    defn = orders()
    seconds = load(store, defn, args.executions)
    store.close()
    # A fresh open, as a server would: the part is found, nothing cached.
    store = open_store_again(args.store)
    print(
        f"loaded {args.executions:,} executions ({2 * args.executions:,} search rows) in {seconds:.1f} s"
    )
    catalog = FieldCatalog.of([defn])
    rng = random.Random(7)
    for name, pattern in FILTERS.items():
        times: list[float] = []
        counts: list[int] = []
        for _ in range(args.repeat):
            low = rng.uniform(0, 999.9)
            text = pattern.format(c=f"c-{rng.randrange(CUSTOMERS)}", a=low, b=low + 0.01)
            t0 = time.perf_counter()
            typed = compile_filter(text, catalog)
            rows = store.search_executions(SearchQuery(typed, limit=101))
            times.append(time.perf_counter() - t0)
            counts.append(len(rows))
        times.sort()
        p50 = statistics.median(times) * 1000
        p95 = times[int(len(times) * 0.95) - 1] * 1000
        print(
            f"{name:<16} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  "
            f"rows {min(counts)}..{max(counts)}  ({args.repeat} queries)"
        )
    store.close()
    return 0


def open_store_again(spec: str) -> SqlStore:
    from orbit_store.urls import is_postgres

    if is_postgres(spec):
        from orbit_store.postgres import PostgresStore

        return PostgresStore(spec)
    from orbit_store.sqlite import SqliteStore

    return SqliteStore(spec)


def _starts(defn: ir.Definition, numbers: range) -> list[StartRequest]:
    return [
        StartRequest(
            defn.name, None, {"customer": f"c-{i % 100}", "amount": float(i)}, f"x-{i}", None
        )
        for i in numbers
    ]


class Run(NamedTuple):
    """One timed run, per step: wall and process CPU seconds, bytes the
    process wrote (the WAL's pages, from /proc/self/io) and group commits."""

    wall: float
    cpu: float
    written: float
    commits: float


def _written() -> int:
    """Bytes this process has written through write(2) so far (Linux; 0
    elsewhere): SQLite's WAL frames, a page and a header each."""
    try:
        with open("/proc/self/io", encoding="ascii") as io:
            for line in io:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_run(
    spec: str, defn: ir.Definition, executions: int, steps: int, poll_s: float = 0.0005
) -> Run:
    """Wall and CPU seconds (the whole process, every thread), bytes written
    and commits per step for `executions` runs of `defn` (`steps` steps
    each); `poll_s`: how often the end of the last execution is looked for."""
    tune_process()
    store = open_store(spec)
    engine = Engine(store, handler_threads=1, auto_tick=False)
    engine.deploy(defn)
    done = threading.Event()
    finished = 0
    lock = threading.Lock()
    total = executions * steps

    def handler(_input: Any, _task: dict[str, Any]) -> dict[str, Any]:
        nonlocal finished
        with lock:
            finished += 1
            if finished == total:
                done.set()
        return {}

    engine.register_handler("orders.work", "1.0.0", handler)
    # Both arms start with the collector in the same state: nothing young
    # left over from the run before (tune_process froze the rest).
    gc.collect()
    gc.freeze()
    commits0 = engine.health()["commits"]
    w0, t0, c0 = _written(), time.perf_counter(), time.process_time()
    batch = 200
    for first in range(0, executions, batch):
        requests = _starts(defn, range(first, min(first + batch, executions)))
        engine.start_many(requests)
    done.wait()
    while engine.health()["active_executions"]:
        time.sleep(poll_s)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    written, commits = _written() - w0, engine.health()["commits"] - commits0
    engine.close()
    store.close()
    return Run(elapsed / total, cpu / total, written / total, commits / total)


def _median_interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free 95 % interval of the median of `values`: the
    order statistics k and n+1-k with k the largest for which a median
    outside them has at most 2.5 % chance on each side (the sign test)."""
    ordered = sorted(values)
    n = len(ordered)
    k, below = 0, 0.0
    while k < n:
        # P(fewer than k+1 of n fall below the median) for a fair coin.
        below += math.comb(n, k) / 2**n
        if below > 0.025:
            break
        k += 1
    if k == 0:
        return ordered[0], ordered[-1]
    return ordered[k - 1], ordered[n - k]


def _spread(ratios: list[float]) -> str:
    """The median of per-pair ratios with its quartiles, range and interval."""
    ordered = sorted(ratios)
    q1, _, q3 = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (ordered * 3)
    low, high = _median_interval(ordered)
    return (
        f"{statistics.median(ordered):+.1f} % (median of {len(ordered)} pairs; "
        f"quartiles {q1:+.1f} to {q3:+.1f}, range {ordered[0]:+.1f} to {ordered[-1]:+.1f}, "
        f"95 % interval of the median {low:+.1f} to {high:+.1f})"
    )


def _executions(args: argparse.Namespace, per_step: float, steps: int) -> int:
    """Executions of one timed run: `--steps-executions` when given, else
    enough to last about `--seconds` at `per_step` CPU seconds a step."""
    if args.steps_executions is not None:
        return int(args.steps_executions)
    seconds: float = args.seconds
    return max(100, round(seconds / (per_step * steps)))


def commit_series(args: argparse.Namespace, steps: int) -> tuple[float, float]:
    """Times `--runs` pairs of runs of the workflow with `steps` steps, with
    and without its search fields; prints them and returns the median
    per-pair ratios (CPU, wall) in percent."""
    with_fields, without = orders(True, steps), orders(False, steps)
    # One run of each first, not counted: the first run of a process pays
    # for imports, compiled statements and warm caches. It also gauges how
    # many executions make a run of about `--seconds`.
    warm = 50 if args.steps_executions is None else min(args.steps_executions, 500)
    gauge = one_run(args.store, without, warm, steps)
    one_run(args.store, with_fields, warm, steps)
    executions = _executions(args, gauge.cpu, steps)
    plain: list[Run] = []
    indexed: list[Run] = []
    for i in range(args.runs):
        if args.together:
            a, b = _together(args, executions, steps)
            plain.append(a)
            indexed.append(b)
            continue
        # A pair runs back to back, alternating which goes first (ABBA), so
        # a drift in the machine's load weighs on both arms alike.
        order = [(plain, without), (indexed, with_fields)]
        for runs, defn in order if i % 2 == 0 else order[::-1]:
            runs.append(one_run(args.store, defn, executions, steps))
    seconds = statistics.median(r.wall for r in plain) * executions * steps
    print(
        f"{executions} executions of {steps} step(s) a run (about {seconds:.1f} s), "
        f"{args.runs} pairs{' run together' if args.together else ''}, SQLite file, "
        "one handler thread; per step, medians"
    )
    print("                         wall        CPU   CPU (least)   written  commits")
    for name, runs in (("without search fields", plain), ("with 2 search fields", indexed)):
        print(
            f"{name + ':':<23} {statistics.median(r.wall for r in runs) * 1e6:7.1f} us"
            f" {statistics.median(r.cpu for r in runs) * 1e6:7.1f} us"
            f" {min(r.cpu for r in runs) * 1e6:9.1f} us"
            f" {statistics.median(r.written for r in runs):7.0f} B"
            f" {statistics.median(r.commits for r in runs):8.3f}"
        )
    # Each pair ran back to back, under much the same load: its ratio is the
    # figure, and the spread of the ratios says how far to trust it.
    cpu = [100 * (b.cpu - a.cpu) / a.cpu for a, b in zip(plain, indexed, strict=True)]
    wall = [100 * (b.wall - a.wall) / a.wall for a, b in zip(plain, indexed, strict=True)]
    print(f"indexing adds {_spread(cpu)} (CPU)")
    print(f"indexing adds {_spread(wall)} (wall)")
    return statistics.median(cpu), statistics.median(wall)


def _together(args: argparse.Namespace, executions: int, steps: int) -> tuple[Run, Run]:
    """One pair run at the same time, each arm in a child process of its
    own (`--together`): on a machine others share, both then meet the same
    load at the same moments, where back to back they meet the load of two
    different moments. Each child warms up before its timed run."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--one-run",
                which,
                "--timed",
                "--steps",
                str(steps),
                "--steps-executions",
                str(executions),
                "--store",
                f"{args.store}-{which}",
            ],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for which in ("without", "with")
    ]
    runs = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"bench_visibility: a timed child failed ({child.returncode})")
        runs.append(Run(*(float(x) for x in out.split())))
    return runs[0], runs[1]


def commit(args: argparse.Namespace) -> int:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    figures = {steps: commit_series(args, steps) for steps in args.steps}
    after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if len(figures) > 1:
        print("steps  indexing adds (CPU, median of pairs)  (wall)")
        for steps, (cpu, wall) in figures.items():
            print(f"{steps:5}  {cpu:+35.1f} %  {wall:+6.1f} %")
    print(f"load average (1 min): {load:.2f} before, {after:.2f} after")
    return 0


def stepped_run(spec: str, defn: ir.Definition, executions: int) -> None:
    """`executions` runs of `defn` on one thread, for counting: the starts
    go in batches of 200, then the handlers run on this thread (each step's
    completion its own group). Nothing depends on timing, so two runs of
    one build commit the same groups; with handler threads the groups
    depend on how the threads interleave, which moved the count of a step
    by up to 8 % from one run to the next on the loaded machine."""
    tune_process()
    store = open_store(spec)
    engine = Engine(store, handler_threads=0, auto_tick=False)
    engine.deploy(defn)
    engine.register_handler("orders.work", "1.0.0", lambda _input, _task: {})
    batch = 200
    for first in range(0, executions, batch):
        requests = _starts(defn, range(first, min(first + batch, executions)))
        engine.start_many(requests)
        while engine.run_handlers():
            pass
    assert not engine.health()["active_executions"]
    engine.close()
    store.close()


def counted(args: argparse.Namespace) -> int:
    """Instructions per step with and without the search fields (callgrind)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_visibility: --counted needs valgrind on the PATH")
    # One short run outside valgrind first: it writes the bytecode caches,
    # which the first counted run would otherwise compile (and count) alone.
    for steps in args.steps:
        # The children run one step count each (`_child` passes the first).
        one = argparse.Namespace(**{**vars(args), "steps": (steps,)})
        _child(one, "with", 10)
        per: dict[str, float] = {}
        for which in ("without", "with"):
            small, large = (_callgrind(one, which, n) for n in (args.small, args.large))
            per[which] = (large - small) / ((args.large - args.small) * steps)
        print(
            f"{args.small} and {args.large} executions of {steps} step(s), SQLite file, "
            "handlers on the caller's thread, under callgrind; instructions per step "
            "(whole process)"
        )
        print(f"without search fields: {per['without']:12,.0f}")
        print(f"with 2 search fields:  {per['with']:12,.0f}")
        added = 100 * (per["with"] - per["without"]) / per["without"]
        print(f"indexing adds {added:+.1f} % (instructions)")
    return 0


def _callgrind(args: argparse.Namespace, which: str, executions: int) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out"]
        stderr = _child(args, which, executions, wrapper)
    found = re.search(r"Collected : (\d+)", stderr)
    if found is None:
        raise SystemExit(f"bench_visibility: no instruction count from callgrind:\n{stderr}")
    return int(found[1])


def _child(
    args: argparse.Namespace, which: str, executions: int, wrapper: list[str] | None = None
) -> str:
    """One `--one-run` of this file in a child process; its stderr."""
    # A fixed hash seed, so that dicts and sets lay out alike from run to run.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [
            *(wrapper or []),
            sys.executable,
            __file__,
            "--one-run",
            which,
            "--steps",
            str(args.steps[0]),
            "--steps-executions",
            str(executions),
            "--store",
            args.store,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr


def _step_counts(text: str) -> tuple[int, ...]:
    counts = tuple(int(part) for part in text.split(","))
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("steps are counts of 1 or more")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", action="store_true")
    parser.add_argument("--commit", action="store_true")
    parser.add_argument("--store", default="/tmp/bench-visibility.db")
    parser.add_argument("--executions", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5, help="pairs of timed runs (--commit)")
    parser.add_argument(
        "--steps-executions",
        type=int,
        default=None,
        help="executions of one run (default: --commit sizes its runs by --seconds)",
    )
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="about how long one timed run lasts (--commit)"
    )
    parser.add_argument(
        "--steps",
        type=_step_counts,
        default=(1,),
        help="steps per execution, or several: 1,3,10 (--commit, --counted)",
    )
    parser.add_argument("--counted", action="store_true", help="instructions per step (callgrind)")
    parser.add_argument(
        "--small", type=int, default=100, help="executions of --counted's first run"
    )
    parser.add_argument("--large", type=int, default=500, help="executions of its second run")
    # The child of --counted: one run, with or without the search fields.
    parser.add_argument("--one-run", choices=("with", "without"), help=argparse.SUPPRESS)
    parser.add_argument("--timed", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--together",
        action="store_true",
        help="run each pair's two arms at the same time, in two processes (--commit)",
    )
    args = parser.parse_args(argv)
    if args.one_run is not None and args.timed:
        # The child of --together: a warm-up run, then the timed one.
        defn = orders(args.one_run == "with", args.steps[0])
        executions = args.steps_executions or 3000
        one_run(f"{args.store}.warm", defn, min(executions, 200), args.steps[0])
        run = one_run(args.store, defn, executions, args.steps[0])
        print(" ".join(repr(x) for x in run))
        return 0
    if args.one_run is not None:
        defn = orders(args.one_run == "with", args.steps[0])
        stepped_run(args.store, defn, args.steps_executions or 3000)
        return 0
    if not (args.query or args.commit or args.counted):
        parser.error("give --query, --commit and/or --counted")
    if args.query:
        query(args)
    if args.commit:
        commit(args)
    if args.counted:
        counted(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
