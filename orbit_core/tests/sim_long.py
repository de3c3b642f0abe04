"""The deterministic simulations over many seeds, spread over every core,
with progress: `nox -s sim-long -- --seeds 200000 [--mode engine|shared|both]`.
`engine` is the single engine's (test_engine_simulation.py), `shared` is
shared mode's (test_shared_simulation.py: two or three engines on the
in-memory cluster); `both` runs every seed in each. Each seed is the same
run as in the test suite (the same faults, the same invariants), so a
failing seed replays there with `ORBIT_SIM_SEED=<n> pytest
orbit_core/tests/test_engine_simulation.py` (shared:
`ORBIT_SHARED_SIM_SEED=<n> pytest orbit_core/tests/test_shared_simulation.py`).

Seeds go to a process pool in chunks; the parent prints seeds done, the
rate and the time left after each chunk, and lists every failing seed with
its message at the end (exit status 1 if any), with the rate per busy core
(seeds over the CPU time the workers spent in them). `--minutes` stops
handing out new chunks when the time is up, so a run is bounded either way.

Rates per busy core (December 2026, the 2-core development machine with
other work on it; main and this version run in turn, 300 shared seeds or
1,500 single-engine seeds timed inside a worker, six rounds for shared
mode before and after a rebase, two for the single engine): shared mode
went from 28-43 to 76-109 seeds/s (about 3x, best against best), the
single engine from 330-360 to 360-400. `sim_long.py --seeds 400 --jobs 1 --mode
shared` took 28 s before and 13-17 s after, start-up included. What
changed: the shared simulation checks, decodes and plans the pool's
definitions once per process, as the single engine's did (it did so seven
times per engine); an idle round of a shared-mode server runs no engine
command (it ran four); a catalog adds a plan without rescanning the others
(recovery was quadratic); and a worker runs one chunk without the cycle
collector, then exits. A seed runs the same history as before: a digest of
every stored history of seeds 0-299 of each mode is unchanged.
"""

from __future__ import annotations

import argparse
import builtins
import concurrent.futures
import gc
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_engine_simulation as sim
import test_shared_simulation as shared_sim

# Seeds a worker runs between two collections (chunks are 200 by default).
COLLECT_EVERY = 1000


def _init() -> None:
    sim.patch_chaos(builtins.setattr)
    # A worker runs one chunk and exits (`max_tasks_per_child=1`), so the
    # cycle collector is left off: each seed's engines end as reference
    # cycles, and collecting them cost about a third of a shared-mode seed,
    # while the memory they hold (a quarter of a megabyte per shared seed)
    # goes back at once when the worker exits. What was loaded before the
    # first seed is frozen, so a collection `_chunk` asks for skips it.
    gc.freeze()
    gc.disable()


def _engine_seed(seed: int) -> int:
    try:
        return sim.run_seed(seed)
    finally:
        sim._CURRENT[0] = sim.Faults()


def _shared_seed(seed: int) -> int:
    run = shared_sim.Simulation(seed)
    try:
        run.run()
    finally:
        run.close()
    return len(run.executions)


def _chunk(mode: str, seeds: range) -> tuple[int, int, list[tuple[int, str]], float]:
    """(seeds run, executions, failures, CPU seconds) of one chunk."""
    cpu = time.process_time()
    executions = 0
    failures = []
    kinds = ("engine", "shared") if mode == "both" else (mode,)
    for i, seed in enumerate(seeds):
        if i and i % COLLECT_EVERY == 0:
            gc.collect()  # a long chunk must not hold all its garbage
        for kind in kinds:
            try:
                executions += _engine_seed(seed) if kind == "engine" else _shared_seed(seed)
            except Exception as exc:  # every failure is reported with its seed
                failures.append((seed, f"{kind}: {type(exc).__name__}: {exc}"))
    return len(seeds), executions, failures, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100_000, help="how many seeds")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk", type=int, default=200, help="seeds per task")
    parser.add_argument("--minutes", type=float, default=0, help="stop after (0: no limit)")
    parser.add_argument("--mode", choices=["engine", "shared", "both"], default="engine")
    args = parser.parse_args(argv)
    end = args.first + args.seeds
    chunks = [range(s, min(s + args.chunk, end)) for s in range(args.first, end, args.chunk)]
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    started = time.monotonic()
    done = executions = 0
    cpu = 0.0  # the workers' CPU time in their chunks
    failures: list[tuple[int, str]] = []
    # Workers are forked from a server that has imported this module (and
    # the simulations) once, so a worker per chunk starts in milliseconds.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__"])
    with concurrent.futures.ProcessPoolExecutor(
        args.jobs, mp_context=context, initializer=_init, max_tasks_per_child=1
    ) as pool:
        pending = {pool.submit(_chunk, args.mode, c) for c in chunks[: args.jobs * 2]}
        queued = chunks[args.jobs * 2 :]
        while pending:
            finished, pending = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in finished:
                ran, made, failed, spent = future.result()
                done, executions, cpu = done + ran, executions + made, cpu + spent
                failures += failed
                for seed, message in failed:
                    # At once too: a long run shows what to replay while it goes on.
                    print(f"seed {seed} FAILED: {message[:300]}", flush=True)
                if queued and (deadline is None or time.monotonic() < deadline):
                    pending.add(pool.submit(_chunk, args.mode, queued.pop(0)))
            elapsed = time.monotonic() - started
            rate = done / elapsed if elapsed else 0.0
            left = (args.seeds - done) / rate if rate else 0.0
            print(
                f"{done}/{args.seeds} seeds, {executions} executions, {len(failures)} failing, "
                f"{rate:.0f} seeds/s, ~{left:.0f} s left",
                flush=True,
            )
    for seed, message in sorted(failures):
        print(f"seed {seed} FAILED: {message}", flush=True)
    per_core = f"{done / cpu:.0f} seeds/s per busy core" if cpu else "no seed ran"
    print(
        f"{done} seeds in {time.monotonic() - started:.0f} s ({per_core}): {len(failures)} failing"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
