"""bench_engine: the decider and the store, no network (chapter 47).

Starts every execution (each a chain of `--steps` sequential task steps), then
plays the worker, polling and completing tasks until every execution has
completed, and prints executions/s and steps/s. `--store` is `memory` or a
SQLite file path (deleted first). With `--in-flight N`, at most N executions
run at once (new ones start as others complete), to compare scale.

    python benchmarks/bench_engine.py --executions 2000 --steps 3 --store memory
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

from orbit_core import ir
from orbit_core.engine import Engine, tune_process
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import Store

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
    import attrs

    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


def open_store(spec: str) -> Store:
    if spec == "memory":
        return MemoryStore()
    from orbit_store.sqlite import SqliteStore

    for suffix in ("", "-wal", "-shm"):
        Path(spec + suffix).unlink(missing_ok=True)
    return SqliteStore(spec)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args: argparse.Namespace) -> dict[str, Any]:
    tune_process()
    store = open_store(args.store)
    engine = Engine(store, handler_threads=0, auto_tick=False)
    engine.deploy(definition(args.steps))
    session = engine.register_worker("bench", "python", [(TASK, "1.0.0")])["worker_session_id"]
    total = args.executions
    in_flight = min(args.in_flight or total, total)
    counter = iter(range(total))
    started = 0
    lock = threading.Lock()

    def start_one(limit: int = total) -> bool:
        nonlocal started
        with lock:
            if started >= limit:
                return False
            i = next(counter, None)
            if i is None:
                return False
            started += 1
        engine.start("Bench", execution_id=f"bench-{i}")
        return True

    def start_many() -> None:
        for _ in range(in_flight):
            if not start_one(in_flight):
                return

    t0 = time.perf_counter()
    c0 = time.process_time()
    # Executions are started first, as the book's program does; with several
    # threads the starts share group commits on a durable store.
    starters = [threading.Thread(target=start_many) for _ in range(args.workers - 1)]
    for th in starters:
        th.start()
    start_many()
    for th in starters:
        th.join()
    t_started = time.perf_counter()
    waiting_rss = rss_mb()
    completed = 0
    last = args.steps - 1
    done = threading.Event()

    def worker() -> None:
        nonlocal completed
        while not done.is_set():
            task = engine.poll(session, args.poll_ms)
            if task is None:
                continue
            engine.complete(task["token"], {})
            if task["step_id"] == f"s{last}":
                with lock:
                    completed += 1
                    finished = completed == total
                if finished:
                    done.set()
                    return
                if args.in_flight:
                    start_one()

    threads = [threading.Thread(target=worker) for _ in range(args.workers - 1)]
    for th in threads:
        th.start()
    worker()
    done.wait()
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    for th in threads:
        th.join(timeout=5)
    engine.close()
    return {
        "elapsed": elapsed,
        "cpu": cpu,
        "start_phase": t_started - t0,
        "waiting_rss": waiting_rss,
        "executions": total,
        "commits": engine.counters["commits"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=2000, help="executions to run")
    parser.add_argument("--steps", type=int, default=3, help="sequential task steps each")
    parser.add_argument(
        "--store", default="memory", help="memory, or a SQLite file path (deleted first)"
    )
    parser.add_argument(
        "--in-flight", type=int, default=0, help="executions running at once (default: all)"
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="worker threads (default 1 in memory, 8 on SQLite)"
    )
    parser.add_argument("--poll-ms", type=int, default=50, help="long-poll wait of each worker")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the run to FILE")
    args = parser.parse_args(argv)
    if not args.workers:
        args.workers = 1 if args.store == "memory" else 8
    print(f"store        {args.store}")
    print(
        f"executions   {args.executions} ({args.steps} task steps each, "
        f"{args.in_flight or args.executions} in flight, {args.workers} worker threads)"
    )
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        result = profiler.runcall(run, args)
        profiler.dump_stats(args.profile)
    else:
        result = run(args)
    elapsed = result["elapsed"]
    steps = args.executions * args.steps
    print(
        f"total        {elapsed:.2f}s (starting {result['start_phase']:.2f}s, "
        f"{result['commits']} commits)"
    )
    print(
        f"throughput   {args.executions / elapsed:.0f} executions/s, {steps / elapsed:.0f} steps/s"
    )
    cpu = result["cpu"]
    print(
        f"cpu          {cpu:.2f}s of process time: {steps / cpu:.0f} steps per CPU-second "
        "(the machine is shared; this one ignores other processes)"
    )
    print(
        f"memory       {result['waiting_rss']:.0f} MB RSS with "
        f"{args.in_flight or args.executions} executions waiting"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    raise SystemExit(main())
