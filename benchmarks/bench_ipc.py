"""bench_ipc: what handing worker calls to another process would cost.

Issue 47 asks whether the server's HTTP work (parsing, authentication, JSON)
should move into processes around one engine process. Each such call then
crosses a pipe twice: the HTTP process sends the engine process the turn's
decoded calls, and gets their answers back. This measures that crossing
alone, with calls shaped like a worker's `result-then-poll` (a token, a
small output, a poll) and answers shaped like its reply (the ack and the
next task), in batches like the worker loop's turns, over a socket pair
between two processes (multiprocessing.connection, pickle). It prints the
CPU time per call on each side and the round trips per second:

    python benchmarks/bench_ipc.py --calls 200000 --batch 20
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
import resource
import time
from typing import Any


def _call(i: int) -> tuple[str, str, dict[str, Any], str, int]:
    return ("complete", f"token-{i:08d}-3f2a9c", {"i": i, "ok": True}, "session-0001", 1000)


def _answer(call: tuple[str, str, dict[str, Any], str, int]) -> dict[str, Any]:
    return {
        "accepted": True,
        "task": {
            "token": call[1] + "-next",
            "execution_id": "bench-1234-5678",
            "step_id": "s4",
            "attempt": 1,
            "task_name": "bench.step",
            "contract_version": "1.0.0",
            "input": call[2],
            "deadline_ms": 1796666646000,
        },
    }


def _engine_side(conn: multiprocessing.connection.Connection, out: Any) -> None:
    start = resource.getrusage(resource.RUSAGE_SELF)
    while True:
        batch = conn.recv()
        if batch is None:
            break
        conn.send([_answer(call) for call in batch])
    end = resource.getrusage(resource.RUSAGE_SELF)
    out.send(end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    here, there = multiprocessing.Pipe()
    report_r, report_w = multiprocessing.Pipe(duplex=False)
    proc = multiprocessing.Process(target=_engine_side, args=(there, report_w))
    proc.start()
    calls = [_call(i) for i in range(args.batch)]
    # The engine side's answers are made there; this side only sends,
    # receives and unpickles, as an HTTP process would.
    start = resource.getrusage(resource.RUSAGE_SELF)
    began = time.monotonic()
    trips = args.calls // args.batch
    for _ in range(trips):
        here.send(calls)
        here.recv()
    elapsed = time.monotonic() - began
    end = resource.getrusage(resource.RUSAGE_SELF)
    here.send(None)
    engine_cpu = report_r.recv()
    proc.join()
    front_cpu = end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime
    # The engine side's own work per call (building the answer) is counted
    # once more here, so that it can be taken off.
    made = time.process_time()
    for _ in range(trips):
        [_answer(call) for call in calls]
    answers = time.process_time() - made
    n = trips * args.batch
    print(f"calls        {n} in batches of {args.batch} ({trips / elapsed:.0f} round trips/s)")
    print(f"http side    {1e6 * front_cpu / n:.1f} us of CPU per call (send, receive, unpickle)")
    print(
        f"engine side  {1e6 * (engine_cpu - answers) / n:.1f} us of CPU per call "
        f"(receive, unpickle, pickle, send; the answers' making taken off)"
    )


if __name__ == "__main__":
    main()
