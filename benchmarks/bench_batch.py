"""bench_batch: does a batch operation slow down starts? (issue 38)

Starts `orbit server` on a fresh SQLite file (or `--store`), deploys the book's
hello workflow, starts `--executions` executions (no worker takes their tasks,
so they stay RUNNING), then measures the latency of further starts made at
`--rate` per second for `--seconds`, twice: alone, and while a batch pauses
every one of the `--executions` executions (`POST /v1/batches`). Prints the
p50/p99/max start latency of both phases, how long the batch took, and
whether the p99 during the batch stayed under `--limit-ms` (50 ms).

    python benchmarks/bench_batch.py
    python benchmarks/bench_batch.py --executions 10000 --rate 100 --seconds 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HELLO = REPO / "examples" / "hello.orbit"
LISTENING = re.compile(r"listening addr=(\S+)")


class Client:
    """One keep-alive connection."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if data is not None else {}
        self.conn.request(method, path, body=data, headers=headers)
        reply = self.conn.getresponse()
        raw = reply.read()
        return reply.status, (json.loads(raw) if raw else None)


def start_server(store: str) -> tuple[subprocess.Popen[str], str]:
    orbit = shutil.which("orbit") or str(Path(sys.executable).parent / "orbit")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    proc = subprocess.Popen(
        [orbit, "server", "--db", store, "--addr", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    addr = ""
    for line in proc.stderr:
        found = LISTENING.search(line)
        if found:
            addr = found[1]
            break
    if not addr:
        raise SystemExit("orbit server did not start")
    # Keep reading its log, so it never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()
    return proc, addr


def fill(addr: str, count: int, threads: int = 4) -> None:
    def chunk(first: int) -> None:
        client = Client(addr)
        for i in range(first, count, threads):
            status, _ = client.call(
                "POST",
                "/v1/executions",
                {"workflow": "Hello", "execution_id": f"fill-{i:06d}", "input": {"name": "x"}},
            )
            assert status == 201, status

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(chunk, range(threads)))


def starts(addr: str, prefix: str, rate: float, seconds: float) -> list[float]:
    """Latencies (ms) of starts made at `rate`/s for `seconds`."""
    client = Client(addr)
    out: list[float] = []
    interval = 1.0 / rate
    begin = time.perf_counter()
    n = 0
    while time.perf_counter() - begin < seconds:
        due = begin + n * interval
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        t0 = time.perf_counter()
        status, _ = client.call(
            "POST",
            "/v1/executions",
            {"workflow": "Hello", "execution_id": f"{prefix}-{n:06d}", "input": {"name": "y"}},
        )
        out.append((time.perf_counter() - t0) * 1000)
        assert status == 201, status
        n += 1
    return out


def describe(name: str, latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name:<14} starts={len(ordered):>5}  p50={statistics.median(ordered):6.2f} ms  "
        f"p99={p99:6.2f} ms  max={ordered[-1]:7.2f} ms"
    )


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=100.0, help="starts per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--limit-ms", type=float, default=50.0)
    parser.add_argument("--store", help="a database URL or file (default: a fresh SQLite file)")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="bench-batch-")
    store = args.store or str(Path(scratch) / "orbit.db")
    proc, addr = start_server(store)
    try:
        subprocess.run(
            [shutil.which("orbit") or "orbit", "deploy", str(HELLO), "--server", f"http://{addr}"],
            check=True,
            capture_output=True,
        )
        t0 = time.perf_counter()
        fill(addr, args.executions)
        print(f"started {args.executions} executions in {time.perf_counter() - t0:.1f} s")
        alone = starts(addr, "alone", args.rate, args.seconds)
        print(describe("alone", alone))
        client = Client(addr)
        status, created = client.call(
            "POST",
            "/v1/batches",
            {"action": "pause", "filter": {"workflow": "Hello", "status": "RUNNING"}},
        )
        assert status == 201, (status, created)
        batch_id = created["batch_id"]
        batch_start = time.perf_counter()
        during: list[float] = []
        finished: list[float] = []

        def watch() -> None:
            watcher = Client(addr)
            while True:
                _, doc = watcher.call("GET", f"/v1/batches/{batch_id}")
                if doc["state"] == "done":
                    finished.append(time.perf_counter() - batch_start)
                    return
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        while not finished:
            during.extend(starts(addr, f"during-{len(during)}", args.rate, 1.0))
        watcher.join()
        print(describe("during batch", during))
        # (A fresh connection: the first one sat idle past the keep-alive.)
        _, doc = Client(addr).call("GET", f"/v1/batches/{batch_id}")
        print(
            f"batch: {doc['total']} selected, outcomes {doc['outcomes']}, "
            f"{finished[0]:.1f} s ({doc['total'] / finished[0]:.0f} executions/s)"
        )
        verdict = "PASS" if p99(during) <= args.limit_ms else "FAIL"
        print(
            f"{verdict}: p99 of starts during the batch {p99(during):.2f} ms (limit {args.limit_ms:g} ms)"
        )
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
