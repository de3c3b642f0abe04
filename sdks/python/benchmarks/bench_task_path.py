"""CPU of one task's path through the worker, in-process and without a network.

    python sdks/python/benchmarks/bench_task_path.py [--tasks N] [--profile]

Runs Worker._execute over and over on one thread: the `executing` log line
(to /dev/null, through the handler run() sets up), the context, the
handler, the result's JSON, and a result-then-poll report over a
connection whose socket answers every request at once with the next task.
What it leaves out (system calls, waiting for the server, other threads
wanting the GIL) is most of a live step's cost; what it keeps is the
Python the SDK runs per task, so it shows a change to that path sooner
than bench_worker_cpu.py can. --profile prints cProfile's top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import time
from typing import Any

from orbit_sdk import Worker, _http, _log
from orbit_sdk._delivery import Reporter
from orbit_sdk._session import Session

TASK = {
    "token": "tok-abcdef0123456789",
    "execution_id": "bench-12675-1796667287-2984",
    "workflow": "BenchHttp",
    "workflow_version": "1.0.0",
    "step_id": "s9",
    "task_name": "bench.step",
    "attempt": 1,
    "idempotency_key": "bench-12675-1796667287-2984:s9",
    "redelivery": False,
    "deadline_ms": None,
    "input": {"i": 3},
}
_BODY = json.dumps({"accepted": True, "task": TASK}, separators=(",", ":")).encode()
# Headers as `orbit server` sends them.
ANSWER = (
    b"HTTP/1.1 200 OK\r\nServer: gunicorn\r\nDate: Mon, 07 Dec 2026 18:16:37 GMT\r\n"
    b"Connection: keep-alive\r\nx-orbit-api-version: orbit-api/1\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(_BODY), _BODY)
)


class AnsweringSocket:
    """Takes every request and answers it with the next task."""

    def sendall(self, data: bytes) -> None:
        pass

    def recv(self, size: int) -> bytes:
        return ANSWER

    def settimeout(self, timeout: float | None) -> None:
        pass

    def close(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    worker = Worker("bench", server="http://127.0.0.1:1", token="worker", poll_wait_ms=1000)
    worker.register("bench.step", lambda input, ctx: {"i": input["i"] + 1})
    _log.configure_logging()
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - for the process's life
    client = worker.client
    conn = _http._Connection(client.timeout)
    conn.sock = AnsweringSocket()  # type: ignore[assignment]
    client._transport._idle.append(conn)
    session = Session(
        client, worker._announcement(), worker._stopping, worker._random, worker._contact
    )
    session._id = "session-1"
    session.result_then_poll = True
    reporter = Reporter(client, session, worker._stopping, worker._random)

    def run(tasks: int) -> None:
        task: Any = TASK
        for _ in range(tasks):
            task = worker._execute(reporter, task)

    run(2000)  # warm up
    best = float("inf")
    for _ in range(5):
        began = time.thread_time()
        run(args.tasks // 5)
        best = min(best, (time.thread_time() - began) / (args.tasks // 5))
    print(f"task path    {best * 1e6:.2f} us of CPU per task (best of 5, one thread)")
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        run(min(args.tasks, 20000))
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
