"""bench_schedules: firing overhead of many schedules (issue 15).

Two figures:

* fired/s: `--schedules` interval schedules (every minute, staggered over
  the minute by `--spread` seconds) on a simulated clock; the clock is
  moved to each second of `--rounds` minutes and every occurrence starts an
  execution of a workflow without steps (it completes at once). Counts
  claims, the starts' group commits and the advances; creation is timed too.
* idle CPU: the same number of schedules whose next occurrence is a day
  away, on the real clock with the engine's threads running, measured as
  process CPU time over `--idle-seconds` (target: under 1 % of a core).
  The engine's own 100 ms tick is included; `--baseline` measures it
  without schedules for comparison.

`--store` is `memory` or a SQLite file path (deleted first).

    python benchmarks/bench_schedules.py
    python benchmarks/bench_schedules.py --store /tmp/bench.db --schedules 2000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from orbit_core import ir
from orbit_core.engine import Engine, tune_process
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import Store, SystemClock
from orbit_core.testing import SimulatedClock

START_MS = 1_794_768_600_000  # 2026-11-15T18:50:00Z, a whole minute


def definition() -> ir.Definition:
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="Tick",
        version="1.0.0",
        input=t.EMPTY_RECORD,
        output=t.EMPTY_RECORD,
        steps=(),
        result=e.EMPTY_OBJECT,
        contracts={},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


def open_store(spec: str) -> Store:
    if spec == "memory":
        return MemoryStore()
    from orbit_store.sqlite import SqliteStore

    path = Path(spec)
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return SqliteStore(path)


def create(engine: Engine, count: int, spread_s: int, interval: str) -> float:
    began = time.perf_counter()
    for i in range(count):
        offset = i % max(spread_s, 1)
        engine.schedules.create(
            {
                "schedule_id": f"s{i:05d}",
                "workflow": "Tick",
                "interval": interval,
                "start_at": _iso(START_MS + offset * 1000),
                "overlap": "allow",
            }
        )
    return time.perf_counter() - began


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


def fire(args: argparse.Namespace) -> dict[str, Any]:
    clock = SimulatedClock(START_MS - 1000)
    engine = Engine(open_store(args.store), clock, handler_threads=0, pipeline=False)
    engine.deploy(definition())
    created_s = create(engine, args.schedules, args.spread, "1m")
    fired_before = engine.health()["schedules_fired"]
    began = time.perf_counter()
    for second in range(args.rounds * 60):
        clock.advance_to(START_MS + second * 1000)
    elapsed = time.perf_counter() - began
    fired = engine.health()["schedules_fired"] - fired_before
    engine.close()
    return {
        "schedules": args.schedules,
        "store": args.store,
        "created_per_s": round(args.schedules / created_s),
        "fired": fired,
        "fired_per_s": round(fired / elapsed),
    }


def idle(args: argparse.Namespace, count: int) -> dict[str, Any]:
    engine = Engine(open_store(args.store), SystemClock())
    engine.deploy(definition())
    now = SystemClock().now_ms()
    for i in range(count):
        engine.schedules.create(
            {
                "schedule_id": f"idle{i:05d}",
                "workflow": "Tick",
                "interval": "1d",
                "start_at": _iso(now + 3_600_000 + (i % 3600) * 1000),
            }
        )
    time.sleep(1.0)  # let creation's aftermath settle
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(args.idle_seconds)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    engine.close()
    return {
        "schedules": count,
        "seconds": round(wall, 1),
        "cpu_percent": round(100 * cpu / wall, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="simulated minutes of firing")
    parser.add_argument("--spread", type=int, default=60, help="seconds the fires are spread over")
    parser.add_argument("--store", default="memory")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--baseline", action="store_true", help="also measure 0 idle schedules")
    parser.add_argument("--skip-idle", action="store_true")
    args = parser.parse_args()
    tune_process()  # as `orbit server` does
    report: dict[str, Any] = {"fire": fire(args)}
    if not args.skip_idle:
        report["idle"] = idle(args, args.schedules)
        if args.baseline:
            report["idle_baseline"] = idle(args, 0)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    if os.environ.get("BENCH_ASSERT") and report.get("idle", {}).get("cpu_percent", 0) >= 1.0:
        sys.exit("idle CPU is not under 1 % of a core")


if __name__ == "__main__":
    main()
