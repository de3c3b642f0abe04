"""bench_flow: what flow control costs and what fairness buys (issue 39).

An embedded engine on a SQLite file (deleted first), no network, with
in-process handlers, as `bench_engine` does.

(a) limits: `--executions` executions (60,000) of a one-step workflow
    over `--keys` customers (10,000: six each, one over the limit), run
    without limits and with each `--limits` variant, `--rounds` times each
    in turns: `workflow` is `concurrency { max: 5, key: input.customer_id }`
    on the workflow, `step` the same on the step, `rate` the step's
    `rate { max: 5, per: 1s, key: input.customer_id }`. Prints the tasks
    dispatched per second of each (the median) and each limited run's ratio
    to the free one, by wall clock and per CPU-second (the target: at least
    0.80).
(b) fairness: `--big` executions for one customer and `--small` for
    another, all queued before the worker comes, with `fairness { key:
    input.customer_id }` on the step. Prints how many of the big customer's
    had finished when the small customer's last one did (the target: fewer
    than 5 % of the big ones).

`--shared` runs (b) in shared mode instead (and (a) not at all): two
shared-mode servers in this process (`orbit_server.shared.SharedNode`, as
`orbit server --cluster-mode shared` runs them) on one PostgreSQL database
(`--pg`, or a throw-away server started with tests/pgkit.py). Executions
are started through both in turns, and the worker comes only once every
task waits on the shared task board; it polls one server (`a`) alone, so
half of what it takes is owned by the other. What it measures is the
board's order (orbit_store/shared.py, "The board's order").

    python benchmarks/bench_flow.py --store /tmp/bench-flow.db
    python benchmarks/bench_flow.py --limits all --rounds 3
    python benchmarks/bench_flow.py --quick --store /tmp/bench-flow.db
    python benchmarks/bench_flow.py --shared
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
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
STEP_RATE = "rate { max: 5, per: 1s, key: input.customer_id }"
# Each variant: (its name, the clause on the workflow, the clause on the step).
VARIANTS = {
    "workflow": ("", LIMIT, ""),
    "step": ("", "", LIMIT),
    "rate": ("", "", STEP_RATE),
}
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


def limits_run(
    path: str, customers: list[str], workflow: str, threads: int, step: str = ""
) -> tuple[float, float]:
    """Tasks dispatched per second, from the first start to the last task,
    and per second of this process's CPU time (less swayed by the other
    processes of a shared machine)."""
    engine = open_engine(path, threads)
    try:
        engine.deploy(definition(workflow, step))
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


@contextlib.contextmanager
def postgres_url(given: str | None) -> Iterator[str]:
    """`given`, or a new database on a throw-away server (tests/pgkit.py)."""
    if given:
        fresh_store(given)
        yield given
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import pgkit

    server = pgkit.acquire()
    try:
        yield server.url(server.create_database("bench"))
    finally:
        pgkit.release()


def shared_fairness_run(url: str, big: int, small: int) -> dict[str, Any]:
    """(b) with two shared-mode servers (module docstring)."""
    from orbit_server.app import create_app
    from orbit_server.config import ServerConfig
    from orbit_server.shared import SharedNode

    def node(name: str) -> SharedNode:
        config = ServerConfig(db=url, cluster=True, cluster_mode="shared", node_id=name)
        return SharedNode(
            config,
            node_id=name,
            advertise_addr=None,
            build_engine=lambda store, sharing: Engine(store, sharing=sharing),
            make_app=lambda engine, view: create_app(engine, config),
        )

    nodes = [node("a"), node("b")]
    try:
        for each in nodes:
            each.start()
        a = nodes[0]
        a.engine.deploy(definition(step=FAIR))
        for each in nodes[1:]:
            each.engine.reload_definitions()
        customers = ["big"] * big + ["small"] * small
        for n, each in enumerate(nodes):
            mine = customers[n :: len(nodes)]
            for first in range(0, len(mine), BATCH):
                requests = [
                    StartRequest(
                        "Flow", input={"customer_id": c}, execution_id=f"f-{n}-{first + i}"
                    )
                    for i, c in enumerate(mine[first : first + BATCH])
                ]
                for answer in each.engine.start_many(requests):
                    if isinstance(answer, OrbitError):
                        raise answer
        # Every task on the board (no poll anywhere: each server moves its
        # own there within a tenth of a second) before the worker comes.
        deadline = time.monotonic() + 600
        while a.tables.queued() < len(customers):
            if time.monotonic() > deadline:
                raise RuntimeError("the tasks did not all reach the board")
            time.sleep(0.1)
        session = a.engine.workers.register("w-1", "python", [("bench.work", "1.0.0")])
        sid = session["worker_session_id"]
        finished = {"big": 0, "small": 0}
        t0 = time.perf_counter()
        while finished["small"] < small:
            task = a.engine.workers.poll(sid, 5_000)
            if task is None:
                raise RuntimeError("the worker found no task")
            value = task["input"]
            assert isinstance(value, dict)
            finished[str(value["customer_id"])] += 1
            a.engine.workers.complete(str(task["token"]), {})
        return {
            "big": big,
            "small": small,
            "big_finished_when_small_done": finished["big"],
            "share": finished["big"] / big,
            "seconds": time.perf_counter() - t0,
            "servers": len(nodes),
        }
    finally:
        for each in nodes:
            each.close(leave=False)


def _print_fairness(fair: dict[str, Any]) -> None:
    print(f"(b) fairness {fair['big']} queued for `big`, {fair['small']} for `small` ({FAIR})")
    print(
        f"    when the last `small` finished, {fair['big_finished_when_small_done']} of `big` "
        f"had ({100 * fair['share']:.2f} %; target: under 5 %)"
    )


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
    parser.add_argument(
        "--limits",
        default="workflow",
        help=f"comma-separated limited variants of (a): {', '.join(VARIANTS)} (or all)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line of results")
    parser.add_argument(
        "--shared", action="store_true", help="(b) alone, on two shared-mode servers"
    )
    parser.add_argument("--pg", help="a postgres:// URL for --shared (default: a throw-away one)")
    args = parser.parse_args(argv)
    if args.quick:
        args.keys, args.executions, args.big, args.small, args.rounds = 50, 300, 300, 5, 1
    if args.shared:
        tune_process()
        with postgres_url(args.pg) as url:
            fair = shared_fairness_run(url, args.big, args.small)
        if args.json:
            print(json.dumps({"fairness": fair}))
            return 0
        print(f"store        PostgreSQL, shared mode: {fair['servers']} servers, one polled")
        _print_fairness(fair)
        return 0
    variants = list(VARIANTS) if args.limits == "all" else args.limits.split(",")
    for name in variants:
        if name not in VARIANTS:
            parser.error(f"unknown --limits variant {name!r}")
    tune_process()
    # Customers in turns, so each key has executions/keys of them (above
    # the limit of 5 when executions > 5 * keys).
    customers = [f"c-{i % args.keys}" for i in range(args.executions)]
    # In turns, and the median of each: the machine is shared, and a busy
    # moment should not fall on one variant only.
    free_runs: list[tuple[float, float]] = []
    limited_runs: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        free_runs.append(limits_run(args.store, customers, "", args.threads))
        for name in variants:
            _, workflow, step = VARIANTS[name]
            limited_runs[name].append(
                limits_run(args.store, customers, workflow, args.threads, step)
            )
    frees = [r[0] for r in free_runs]
    free = statistics.median(frees)
    free_cpu = statistics.median(r[1] for r in free_runs)
    limited: dict[str, dict[str, Any]] = {}
    for name, variant_runs in limited_runs.items():
        walls = [r[0] for r in variant_runs]
        cpu = statistics.median(r[1] for r in variant_runs)
        limited[name] = {
            "tasks_per_s": statistics.median(walls),
            "runs": walls,
            "ratio": statistics.median(walls) / free,
            "cpu_tasks_per_s": cpu,
            "cpu_ratio": cpu / free_cpu,
        }
    fair = fairness_run(args.store, args.big, args.small)
    first = limited[variants[0]] if variants else None
    result: dict[str, Any] = {
        "free_tasks_per_s": free,
        "free_runs": frees,
        "free_cpu_tasks_per_s": free_cpu,
        "limited": limited,
        "fairness": fair,
    }
    if first is not None:
        # The figures of the first variant, as earlier versions printed them.
        result |= {
            "limited_tasks_per_s": first["tasks_per_s"],
            "ratio": first["ratio"],
            "limited_runs": first["runs"],
            "cpu_ratio": first["cpu_ratio"],
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
    for name in variants:
        got, (_, workflow, step) = limited[name], VARIANTS[name]
        where = f"workflow {workflow}" if workflow else f"step {step}"
        print(
            f"    {name:<8} {got['tasks_per_s']:.0f} tasks dispatched/s ({_rates(got['runs'])}; {where})"
        )
        print(
            f"             ratio {got['ratio']:.2f} wall, {got['cpu_ratio']:.2f} per CPU-second "
            f"({got['cpu_tasks_per_s']:.0f} limited, {free_cpu:.0f} free tasks per CPU-second; "
            "target: at least 0.80)"
        )
    _print_fairness(fair)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
