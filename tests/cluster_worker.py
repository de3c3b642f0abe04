"""The Python SDK worker of the cluster tests (tests/test_cluster_standby.py).

It serves `bench.step` (server_ir.chain): returns {"i": i + 1} and appends
one line `<execution id> <step> <attempt> <redelivery>` to CLUSTER_RUNS for
every attempt it runs. A step named in CLUSTER_HOLD_STEP waits, before
returning, until the file CLUSTER_RELEASE exists, so a test can kill the
leader while the worker holds that task."""

import os
import time

from orbit_sdk import Context, Worker

worker = Worker("cluster-python", concurrency=2, poll_wait_ms=2000)


@worker.task("bench.step", version="1.0.0")
def step(input: dict[str, int], ctx: Context) -> dict[str, int]:
    with open(os.environ["CLUSTER_RUNS"], "a") as f:
        f.write(f"{ctx.execution_id} {ctx.step_id} {ctx.attempt} {ctx.redelivery}\n")
    if ctx.step_id == os.environ.get("CLUSTER_HOLD_STEP"):
        release = os.environ["CLUSTER_RELEASE"]
        while not os.path.exists(release):
            time.sleep(0.02)
    return {"i": input["i"] + 1}


if __name__ == "__main__":
    worker.run()
