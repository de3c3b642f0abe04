"""bench_flow: what flow control costs and what fairness buys (issue 39).

An embedded engine on a SQLite file (deleted first), no network, with
in-process handlers, as `bench_engine` does.

(a) limits: `--executions` executions (60,000) of a one-step workflow
    over `--keys` customers (10,000: six each, one over the limit), run
    twice: with `concurrency { max: 5, key: input.customer_id }` on the
    workflow and without, `--rounds` times each in turns. Prints the tasks
    dispatched per second of each (the median) and their ratio (the target: the limited run within 20 % of the free
    one).
(b) fairness: `--big` executions for one customer and `--small` for
    another, all queued before the worker comes, with `fairness { key:
    input.customer_id }` on the step. Prints how many of the big customer's
    had finished when the small customer's last one did (the target: fewer
    than 5 % of the big ones).

    python benchmarks/bench_flow.py --store /tmp/bench-flow.db
    python benchmarks/bench_flow.py --quick --store /tmp/bench-flow.db
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

from benchkit import fresh_store

from orbit_core.api import StartRequest
from orbit_core.engine import Engine, tune_process
from orbit_core.errors import OrbitError
from orbit_core.ir import Definition
from orbit_lang.compiler import compile_source
from orbit_store.sqlite import SqliteStore

SOURCE = """
task "bench.work" {
    version "1.0.0"
    input { customer_id: String }
    output {}
}

workflow Flow {
    version "1.0.0"
    input { customer_id: String }
    WORKFLOW

    step work {
        worker "bench.work"
        with { customer_id: input.customer_id }
        STEP
    }
}
"""
LIMIT = "concurrency { max: 5, key: input.customer_id }"
FAIR = "fairness { key: input.customer_id }"
BATCH = 500


def definition(workflow: str = "", step: str = "") -> Definition:
    result = compile_source(SOURCE.replace("WORKFLOW", workflow).replace("STEP", step), "b.orbit")
    assert result.errors == 0, result.diagnostics
    (defn,) = result.definitions
    return defn


def open_engine(path: str, threads: int) -> Engine:
    fresh_store(path)
    return Engine(SqliteStore(path), handler_threads=threads, auto_tick=False)


def start_all(engine: Engine, customers: list[str]) -> None:
    for first in range(0, len(customers), BATCH):
        requests = [
            StartRequest("Flow", input={"customer_id": c}, execution_id=f"f-{first + n}")
            for n, c in enumerate(customers[first : first + BATCH])
        ]
        for answer in engine.start_many(requests):
            if isinstance(answer, OrbitError):
                raise answer


def limits_run(path: str, customers: list[str], workflow: str, threads: int) -> tuple[float, float]:
    """Tasks dispatched per second, from the first start to the last task,
    and per second of this process's CPU time (less swayed by the other
    processes of a shared machine)."""
    engine = open_engine(path, threads)
    try:
        engine.deploy(definition(workflow))
        done = threading.Event()
        count = [0]
        lock = threading.Lock()

        def handler(_input: Any, task: dict[str, Any]) -> dict[str, Any]:
            with lock:
                count[0] += 1
                if count[0] == len(customers):
                    done.set()
            return {}

        t0, c0 = time.perf_counter(), time.process_time()
        # The worker is there from the start: dispatch keeps pace with the starts.
        engine.register_handler("bench.work", "1.0.0", handler)
        start_all(engine, customers)
        if not done.wait(timeout=3600):
            raise RuntimeError("the run did not finish")
        while engine.health()["active_executions"]:
            time.sleep(0.001)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return len(customers) / wall, len(customers) / cpu
    finally:
        engine.close()


def fairness_run(path: str, big: int, small: int) -> dict[str, Any]:
    engine = open_engine(path, 1)
    try:
        engine.deploy(definition(step=FAIR))
        start_all(engine, ["big"] * big + ["small"] * small)
        finished = {"big": 0, "small": 0}
        big_at_small_done: list[int] = []
        all_small = threading.Event()
        lock = threading.Lock()

        def handler(value: Any, task: dict[str, Any]) -> dict[str, Any]:
            with lock:
                finished[value["customer_id"]] += 1
                if finished["small"] == small and not big_at_small_done:
                    big_at_small_done.append(finished["big"])
                    all_small.set()
            return {}

        t0 = time.perf_counter()
        engine.register_handler("bench.work", "1.0.0", handler)
        if not all_small.wait(timeout=3600):
            raise RuntimeError("the small customer's executions did not finish")
        return {
            "big": big,
            "small": small,
            "big_finished_when_small_done": big_at_small_done[0],
            "share": big_at_small_done[0] / big,
            "seconds": time.perf_counter() - t0,
        }
    finally:
        engine.close()


def _rates(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--store", default="/tmp/orbit-bench-flow.db", help="a SQLite file")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--executions", type=int, default=60_000)
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="handler threads in (a)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant in (a)")
    parser.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    parser.add_argument("--json", action="store_true", help="one JSON line of results")
    args = parser.parse_args(argv)
    if args.quick:
        args.keys, args.executions, args.big, args.small, args.rounds = 50, 300, 300, 5, 1
    tune_process()
    # Customers in turns, so each key has executions/keys of them (above
    # the limit of 5 when executions > 5 * keys).
    customers = [f"c-{i % args.keys}" for i in range(args.executions)]
    # In turns, and the median of each: the machine is shared, and a busy
    # moment should not fall on one variant only.
    free_runs, limited_runs = [], []
    for _ in range(args.rounds):
        free_runs.append(limits_run(args.store, customers, "", args.threads))
        limited_runs.append(limits_run(args.store, customers, LIMIT, args.threads))
    frees, limiteds = [r[0] for r in free_runs], [r[0] for r in limited_runs]
    free, limited = statistics.median(frees), statistics.median(limiteds)
    free_cpu = statistics.median(r[1] for r in free_runs)
    limited_cpu = statistics.median(r[1] for r in limited_runs)
    fair = fairness_run(args.store, args.big, args.small)
    result = {
        "free_tasks_per_s": free,
        "limited_tasks_per_s": limited,
        "ratio": limited / free,
        "free_runs": frees,
        "limited_runs": limiteds,
        "cpu_ratio": limited_cpu / free_cpu,
        "fairness": fair,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"store        SQLite {args.store}")
    print(
        f"(a) limits   {args.executions} executions over {args.keys} customers, "
        f"{args.threads} handler threads"
    )
    runs = f"median of {args.rounds}, runs in turns"
    print(f"    free     {free:.0f} tasks dispatched/s ({runs}: {_rates(frees)})")
    print(f"    limited  {limited:.0f} tasks dispatched/s ({runs}: {_rates(limiteds)}; {LIMIT})")
    print(f"    ratio    {limited / free:.2f} (target: at least 0.80)")
    print(
        f"    per CPU  {free_cpu:.0f} free, {limited_cpu:.0f} limited tasks per CPU-second: "
        f"ratio {limited_cpu / free_cpu:.2f}"
    )
    print(f"(b) fairness {args.big} queued for `big`, {args.small} for `small` ({FAIR})")
    print(
        f"    when the last `small` finished, {fair['big_finished_when_small_done']} of `big` "
        f"had ({100 * fair['share']:.2f} %; target: under 5 %)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
