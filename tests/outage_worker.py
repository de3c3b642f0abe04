"""The Python SDK worker of tests/test_server_postgres_outage.py.

It serves `bench.step` (server_ir.chain): returns {"i": i + 1} after
OUTAGE_STEP_MS milliseconds, so that some attempts are always running, and
their results on their way, when the database goes away. Its log (standard
error) is the SDK's."""

import os
import time

from orbit_sdk import Context, Worker

worker = Worker(f"outage-python-{os.getpid()}", concurrency=4, poll_wait_ms=2000)
STEP_S = int(os.environ.get("OUTAGE_STEP_MS", "50")) / 1000


@worker.task("bench.step", version="1.0.0")
def step(input: dict[str, int], ctx: Context) -> dict[str, int]:
    time.sleep(STEP_S)
    return {"i": input["i"] + 1}


if __name__ == "__main__":
    worker.run()
