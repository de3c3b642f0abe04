"""Tasks per second through one worker process and a fake runtime.

    python sdks/python/benchmarks/bench_throughput.py [--tasks N] [--concurrency N]

The fake runtime of the tests runs in a child process, so the worker has its
own interpreter as it would in production. The same load runs twice: with
kept-alive connections (what the SDK does) and with a new TCP connection for
every request, to show what reuse is worth. The fake is pure Python too, so
the figures are a lower bound of what the SDK can do against a faster server.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sdk_fake_runtime import Call, FakeRuntime

from orbit_sdk import Client, Worker, _http


def serve(pipe: Connection) -> None:
    """Child process: a fake runtime with two extra routes to drive it."""
    fake = FakeRuntime(heartbeat_interval_ms=5000)

    def enqueue(call: Call) -> tuple[int, Any]:
        for i in range(call.body["tasks"]):
            fake.enqueue("bench.noop", {"n": i})
        return 200, {}

    def stats(call: Call) -> tuple[int, Any]:
        return 200, {"results": len(fake.results), "connections": fake.connections}

    fake.routes["POST", "/bench/enqueue"] = enqueue
    fake.routes["GET", "/bench/stats"] = stats
    pipe.send(fake.url)
    pipe.recv()  # blocks until the parent is done
    fake.close()


def run(tasks: int, concurrency: int) -> tuple[float, int]:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=serve, args=(child,), daemon=True)
    process.start()
    url = parent.recv()
    worker = Worker("bench", server=url, concurrency=concurrency, poll_wait_ms=1000)
    worker.register("bench.noop", lambda input, ctx: {"n": input["n"]})
    thread = worker.start()
    with Client(server=url) as driver:
        time.sleep(0.5)  # let the worker register and start polling
        began = time.perf_counter()
        driver.post("/bench/enqueue", {"tasks": tasks})
        while driver.get("/bench/stats")["results"] < tasks:
            time.sleep(0.01)
        elapsed = time.perf_counter() - began
        worker.stop()
        thread.join()
        # The driver's own connection is not counted.
        connections = driver.get("/bench/stats")["connections"] - 1
    parent.send("done")
    process.join()
    return tasks / elapsed, connections


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    logging.getLogger("orbit").setLevel(logging.WARNING)

    rate, connections = run(args.tasks, args.concurrency)
    print(f"keep-alive:          {rate:7.0f} tasks/s  {connections:6d} TCP connections")

    keep = _http.Transport._release
    _http.Transport._release = lambda self, conn: conn.close()  # type: ignore[method-assign]
    try:
        rate, connections = run(args.tasks, args.concurrency)
    finally:
        _http.Transport._release = keep  # type: ignore[method-assign]
    print(f"connection per call: {rate:7.0f} tasks/s  {connections:6d} TCP connections")


if __name__ == "__main__":
    main()
