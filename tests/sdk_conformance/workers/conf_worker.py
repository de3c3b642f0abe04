"""The Python SDK's conformance worker program (interface: ../README.md)."""

import os
import sys
import time
from typing import Any

from orbit_sdk import Context, TaskError, Worker

worker = Worker(
    os.environ["CONF_WORKER_ID"],
    concurrency=int(os.environ.get("CONF_CONCURRENCY", "1")),
    poll_wait_ms=int(os.environ.get("CONF_POLL_WAIT_MS", "5000")),
)


def event(name: str, ctx: Context) -> None:
    print(f"CONF {name} {ctx.execution_id} {ctx.step_id}", flush=True, file=sys.stderr)


@worker.task("conf.echo", version="1.0.0")
def echo(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    event("start", ctx)
    return {"text": input["text"]}


@worker.task("conf.flaky", version="1.0.0")
def flaky(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    event("start", ctx)
    if ctx.attempt < input["succeed_on"]:
        raise TaskError("CONF_RETRYABLE", f"attempt {ctx.attempt} fails", retryable=True)
    return {"attempt": ctx.attempt}


@worker.task("conf.fail_permanent", version="1.0.0")
def fail_permanent(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    event("start", ctx)
    raise TaskError(
        "CONF_PERMANENT", "permanent failure", retryable=False, details={"source": "conformance"}
    )


@worker.task("conf.bad_output", version="1.0.0")
def bad_output(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    event("start", ctx)
    return {"wrong": True}


@worker.task("conf.sleep", version="1.0.0")
def sleep(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    event("start", ctx)
    time.sleep(input["ms"] / 1000)
    event("done", ctx)
    return {"slept": input["ms"]}


@worker.task("conf.sleep_until_cancelled", version="1.0.0")
def sleep_until_cancelled(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    event("start", ctx)
    end = time.monotonic() + input["seconds"]
    while time.monotonic() < end:
        if ctx.cancelled.wait(0.05):
            event("cancelled", ctx)
            raise TaskError("CANCELLED", "cancelled by the runtime", retryable=False)
        remaining = ctx.remaining_ms()
        if remaining == 0:
            event("deadline", ctx)
            raise TaskError("CONF_DEADLINE", "the attempt's deadline passed", retryable=False)
    return {"waited": True}


if __name__ == "__main__":
    worker.run()
