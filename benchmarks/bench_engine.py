"""bench_engine: the decider and the store, no network (chapter 47).

Starts every execution (each a chain of `--steps` sequential task steps), then
plays the worker until every execution has completed, and prints
executions/s and steps/s. `--store` is `memory`, a SQLite file path
(deleted first) or a postgres:// URL (ORBIT's tables dropped first). With
`--in-flight N`, N executions run at once: new ones are started as earlier
ones complete. One thread starts them, with `Engine.start_many`, as many as
there is room for at a time.

How the worker is played (`--worker`):
- `handlers` (default): a no-op in-process handler on `--workers` engine
  handler threads, the public `register_handler` path. Handler threads claim
  tasks in batches and report a batch's results in the command that claims
  the next batch.
- `poll`: `--workers` threads calling the public `poll` and `complete` for
  one task at a time, as a remote worker's requests do.

`--targets` runs the issue's target scenarios, each several times in a fresh
process, and prints every figure against its target.

    python benchmarks/bench_engine.py --executions 2000 --steps 3 --store memory
    python benchmarks/bench_engine.py --store /tmp/bench.db
    python benchmarks/bench_engine.py --targets --store /tmp/bench.db
    python benchmarks/bench_engine.py --store postgres://orbit:secret@127.0.0.1:5432/bench
    python benchmarks/bench_engine.py --targets --store postgres://orbit:secret@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import attrs

from orbit_core import ir
from orbit_core.api import StartRequest
from orbit_core.engine import Engine, tune_process
from orbit_core.errors import OrbitError
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import Store
from orbit_store.urls import redact

TASK = "bench.step"


def definition(steps: int) -> ir.Definition:
    record = t.RecordType((t.Field("i", t.INT),))
    chain = []
    for i in range(steps):
        after = (f"s{i - 1}",) if i else ()
        chain.append(
            ir.Step(
                f"s{i}",
                "task",
                task=TASK,
                depends_on=after,
                with_=e.Object((e.Entry("i", e.Int(i)),)),
            )
        )
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="Bench",
        version="1.0.0",
        input=t.EMPTY_RECORD,
        output=t.EMPTY_RECORD,
        steps=tuple(chain),
        result=e.EMPTY_OBJECT,
        contracts={TASK: ir.TaskContract(TASK, "1.0.0", record, t.EMPTY_RECORD)},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


def open_store(spec: str) -> Store:
    if spec == "memory":
        return MemoryStore()
    from benchkit import fresh_store

    from orbit_store.urls import is_postgres

    fresh_store(spec)
    if is_postgres(spec):
        from orbit_store.postgres import PostgresStore

        return PostgresStore(spec)
    from orbit_store.sqlite import SqliteStore

    return SqliteStore(spec)


def rss_mb() -> float:
    """The current resident set size (peak RSS would count the import of
    SQLAlchemy and the start phase's garbage)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class Starter:
    """Starts executions `bench-0`, `bench-1`, ... keeping `in_flight` of them
    running, each call of `Engine.start_many` taking as many as there is
    room for: a lone start waits for its commit, so starting one at a time
    would start one execution per commit and the starter, not the engine,
    would set the pace."""

    def __init__(self, engine: Engine, total: int, in_flight: int) -> None:
        self.engine = engine
        self.total = total
        self.in_flight = in_flight
        self.started = 0
        self.finished = 0
        self.room = threading.Condition()

    def start_initial(self) -> None:
        """The first `in_flight` executions."""
        self._start(self._take(min(self.in_flight, self.total)))

    def keep_in_flight(self) -> None:
        """Starts the rest, as earlier executions finish."""
        while ids := self._next_when_room():
            self._start(ids)

    def one_finished(self) -> None:
        with self.room:
            self.finished += 1
            self.room.notify()

    def _start(self, ids: range) -> None:
        requests = [StartRequest("Bench", execution_id=f"bench-{i}") for i in ids]
        for answer in self.engine.start_many(requests):
            if isinstance(answer, OrbitError):
                raise answer

    def _next_when_room(self) -> range:
        """The numbers of the next executions, once fewer than `in_flight`
        run; empty when all are started."""
        with self.room:
            while self.started < self.total and self.started - self.finished >= self.in_flight:
                self.room.wait()
            room = self.in_flight - (self.started - self.finished)
            return self._take(min(room, self.total - self.started))

    def _take(self, count: int) -> range:
        first = self.started
        self.started += count
        return range(first, first + count)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tune_process()
    store = open_store(args.store)
    handlers = args.worker == "handlers"
    pipeline = {"default": None, "thread": True, "inline": False}[args.commit]
    engine = Engine(
        store,
        handler_threads=args.workers if handlers else 0,
        auto_tick=False,
        pipeline=pipeline,
    )
    engine.deploy(definition(args.steps))
    total = args.executions
    starter = Starter(engine, total, min(args.in_flight or total, total))
    last = f"s{args.steps - 1}"
    all_done = threading.Event()

    def step_done(step_id: str) -> None:
        if step_id == last:
            starter.one_finished()
            if starter.finished == total:
                all_done.set()

    t0 = time.perf_counter()
    c0 = time.process_time()
    starter.start_initial()
    t_started = time.perf_counter()
    waiting_rss = rss_mb()

    if handlers:

        def handler(_input: Any, task: dict[str, Any]) -> dict[str, Any]:
            step_done(task["step_id"])
            return {}

        engine.register_handler(TASK, "1.0.0", handler)
    else:
        session = engine.workers.register("bench", "python", [(TASK, "1.0.0")])
        session_id = session["worker_session_id"]

        def worker() -> None:
            while not all_done.is_set():
                task = engine.workers.poll(session_id, args.poll_ms)
                if task is not None:
                    engine.workers.complete(task["token"], {})
                    step_done(task["step_id"])

        for _ in range(args.workers):
            threading.Thread(target=worker, daemon=True).start()

    starter.keep_in_flight()
    all_done.wait()
    # The last results were handed in; they count once they are committed.
    while engine.health()["active_executions"]:
        time.sleep(0.0005)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    engine.close()
    return {
        "elapsed": elapsed,
        "cpu": cpu,
        "start_phase": t_started - t0,
        "waiting_rss": waiting_rss,
        "commits": engine.counters.commits,
        "steps_per_s": total * args.steps / elapsed,
        "steps_per_cpu_s": total * args.steps / cpu,
    }


def report(args: argparse.Namespace, result: dict[str, Any]) -> None:
    worker = (
        f"{args.workers} in-process handler threads (register_handler; batched claims and reports)"
        if args.worker == "handlers"
        else f"{args.workers} threads calling poll/complete, one task each"
    )
    print(f"store        {redact(args.store)}")
    print(
        f"executions   {args.executions} ({args.steps} task steps each, "
        f"{args.in_flight or args.executions} in flight, started in batches from one thread)"
    )
    print(f"worker       {worker}")
    elapsed, steps = result["elapsed"], args.executions * args.steps
    print(
        f"total        {elapsed:.2f}s (starting {result['start_phase']:.2f}s, "
        f"{result['commits']} commits)"
    )
    print(
        f"throughput   {args.executions / elapsed:.0f} executions/s, {steps / elapsed:.0f} steps/s"
    )
    print(
        f"cpu          {result['cpu']:.2f}s of process time: {result['steps_per_cpu_s']:.0f} "
        "steps per CPU-second (the machine is shared; this one ignores other processes)"
    )
    print(
        f"memory       {result['waiting_rss']:.0f} MB RSS with "
        f"{args.in_flight or args.executions} executions waiting"
    )


def profiled(fn: Any, args: argparse.Namespace, path: str) -> dict[str, Any]:
    """Runs `fn(args)` under cProfile in this thread and in every thread
    started meanwhile (the engine's handler threads do most of the work), and
    writes the merged statistics to `path`."""
    import cProfile
    import pstats

    profilers: list[cProfile.Profile] = []

    def start_in_thread(*_: Any) -> None:
        # Called once as a new thread starts: cProfile takes over its hook.
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()

    main = cProfile.Profile()
    threading.setprofile(start_in_thread)
    try:
        result: dict[str, Any] = main.runcall(fn, args)
    finally:
        threading.setprofile(None)
    stats = pstats.Stats(main)
    for profiler in profilers:
        profiler.disable()
        stats.add(profiler)
    stats.dump_stats(path)
    return result


# ---- --targets


def _measure(options: list[str]) -> dict[str, Any]:
    """One run of the benchmark in a fresh process."""
    command = [sys.executable, __file__, "--json", *options]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _runs(scenarios: dict[str, list[str]], runs: int) -> dict[str, list[dict[str, Any]]]:
    """`runs` results per scenario, taken in turns so that a busy moment of
    the (shared) machine does not fall on one scenario only."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in scenarios}
    for _ in range(runs):
        for name, options in scenarios.items():
            out[name].append(_measure(options))
    return out


def _median(results: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in results))


def targets(args: argparse.Namespace) -> int:
    from orbit_store.urls import is_postgres

    # A postgres:// --store adds the PostgreSQL target; SQLite then uses the default file.
    postgres = args.store if is_postgres(args.store) else None
    sqlite = args.store if args.store != "memory" and postgres is None else "/tmp/orbit-bench.db"
    print(
        f"each figure: the median of {args.runs} runs in fresh processes, taken in turns "
        "(best in brackets); steps per CPU-second count this process's CPU only"
    )
    scenarios = {
        "memory": ["--store", "memory"],
        "sqlite": ["--store", sqlite],
        "sqlite64": ["--store", sqlite, "--executions", "5000", "--in-flight", "64"],
        "few": ["--store", "memory", "--executions", "10000", "--in-flight", "100"],
        "many": ["--store", "memory", "--executions", "10000"],
    }
    if postgres is not None:
        scenarios["postgres"] = ["--store", postgres]
    results = _runs(scenarios, args.runs)
    rows: list[tuple[str, str, str, bool]] = []

    def throughput(label: str, name: str, target: float) -> None:
        runs = results[name]
        median = _median(runs, "steps_per_s")
        best = max(r["steps_per_s"] for r in runs)
        cpu = _median(runs, "steps_per_cpu_s")
        figure = f"{median:.0f} steps/s ({best:.0f}); {cpu:.0f} steps per CPU-second"
        rows.append((label, figure, f">= {target:.0f} steps/s", median >= target))

    throughput("in memory, 2000 x 3", "memory", 15_000)
    throughput(f"SQLite ({sqlite}), 2000 x 3", "sqlite", 10_000)
    throughput("SQLite, 5000 x 3, 64 in flight", "sqlite64", 5_000)
    if postgres is not None:
        throughput(f"PostgreSQL ({redact(postgres)}), 2000 x 3", "postgres", 3_000)
    a, b = _median(results["few"], "steps_per_s"), _median(results["many"], "steps_per_s")
    ca, cb = (_median(results[n], "steps_per_cpu_s") for n in ("few", "many"))
    apart = abs(a - b) / max(a, b)
    rows.append(
        (
            "100 vs 10000 in flight (memory)",
            f"{a:.0f} vs {b:.0f} steps/s, {apart:.0%} apart; per CPU-second {ca:.0f} vs "
            f"{cb:.0f}, {abs(ca - cb) / max(ca, cb):.0%} apart",
            "within 20 %",
            apart <= 0.20,
        )
    )
    rss = _median(results["many"], "waiting_rss")
    rows.append(("10000 executions waiting", f"{rss:.0f} MB RSS", "< 300 MB", rss < 300))

    width = max(len(r[0]) for r in rows)
    for label, figure, target, ok in rows:
        print(f"{label:<{width}}  {figure}  [target {target}: {'met' if ok else 'NOT met'}]")
    return 0 if all(r[3] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=2000, help="executions to run")
    parser.add_argument("--steps", type=int, default=3, help="sequential task steps each")
    parser.add_argument(
        "--store",
        default="memory",
        help="memory, a SQLite file path (deleted first) or a postgres:// URL (tables dropped)",
    )
    parser.add_argument(
        "--in-flight", type=int, default=0, help="executions running at once (default: all)"
    )
    parser.add_argument(
        "--worker",
        choices=("handlers", "poll"),
        default="handlers",
        help="in-process handler threads (batched), or threads calling poll/complete",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="handler threads (default 1 in memory, 2 on SQLite) or poll threads (default 8)",
    )
    parser.add_argument("--poll-ms", type=int, default=50, help="long-poll wait of poll workers")
    parser.add_argument(
        "--commit",
        choices=("default", "thread", "inline"),
        default="default",
        help="the engine's commits: its default, a committer thread, or the group's leader",
    )
    parser.add_argument(
        "--profile", metavar="FILE", help="write a cProfile of the run, all threads, to FILE"
    )
    parser.add_argument("--targets", action="store_true", help="measure the issue's targets")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure with --targets")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.targets:
        return targets(args)
    if not args.workers:
        if args.worker == "poll":
            args.workers = 8
        else:
            # In memory a second handler thread only adds GIL hand-offs; on a
            # durable store one runs handlers while the other's group is written.
            args.workers = 1 if args.store == "memory" else 2
    if args.profile:
        result = profiled(run, args, args.profile)
    else:
        result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        report(args, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
