"""A Python worker for chapter 42's delivery guarantees, named by
E2E_WORKER_ID, with one poll slot.

- demo.work returns its input, or with E2E_HANG=1 never returns, so the test
  can kill the worker while it holds the task;
- demo.wait waits `seconds` for the runtime to cancel the attempt, and stops
  with CANCELLED as soon as the heartbeat's cancel list names it.
"""

import os
import threading
from typing import Any

from orbit_sdk import Context, TaskError, Worker

worker = Worker(
    os.environ["E2E_WORKER_ID"],
    concurrency=1,
    poll_wait_ms=int(os.environ.get("E2E_POLL_WAIT_MS", "3000")),
)


@worker.task("demo.work", version="1.0.0")
def work(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    ctx.log(f"working on n={input['n']}")
    if os.environ.get("E2E_HANG") == "1":
        threading.Event().wait()
    return {"n": input["n"]}


@worker.task("demo.wait", version="1.0.0")
def wait(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    ctx.log("waiting for the runtime to cancel")
    if ctx.cancelled.wait(input["seconds"]):
        ctx.log("cancelled by the runtime")
        raise TaskError("CANCELLED", "stopped by the runtime", retryable=False)
    return {"waited": True}


if __name__ == "__main__":
    worker.run()
