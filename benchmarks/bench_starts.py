"""bench_starts: what a client's start costs the server, over HTTP.

Starts `orbit server` on a fresh SQLite file, deploys bench_http's workflow
(one task step, which no worker serves: only the starts are measured), and
starts `--executions` executions from `--clients` threads, each on one
kept-alive connection, as fast as they go. Prints the starts per second and
the server's CPU time per start (its process tree, from /proc). Builds are
compared by running this from each checkout in turns:

    python benchmarks/bench_starts.py --executions 3000 --clients 4 --store /tmp/starts.db
"""

from __future__ import annotations

import argparse
import threading
import time

from bench_http import Client, cpu_split, definition, start_server

TOKEN = "bench-starts-admin-token"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--store", default="/tmp/bench-starts.db")
    args = parser.parse_args()
    proc, url, _ = start_server(args.store, TOKEN, TOKEN + "-worker", [])
    try:
        status, reply = Client(url, TOKEN).call("POST", "/v1/workflows", definition(1))
        assert status == 201, reply
        prefix = f"starts-{int(time.time())}"

        def starter(n: int) -> None:
            client = Client(url, TOKEN)
            for i in range(n, args.executions, args.clients):
                body = {"workflow": "BenchHttp", "execution_id": f"{prefix}-{i}"}
                status, reply = client.call("POST", "/v1/executions", body)
                assert status == 201, reply

        threads = [threading.Thread(target=starter, args=(n,)) for n in range(args.clients)]
        before = cpu_split(proc)
        began = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - began
        after = cpu_split(proc)
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"starts       {args.executions} from {args.clients} clients")
    print(f"throughput   {args.executions / elapsed:.0f} starts/s")
    if before is not None and after is not None:
        per_start = 1000 * (after[0] - before[0]) / args.executions
        print(f"cpu          server {per_start:.3f} ms/start")


if __name__ == "__main__":
    main()
