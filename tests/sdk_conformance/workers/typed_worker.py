"""The Python SDK's typed conformance program (../README.md, "Typed
workers"): `conf.echo` served through the types `orbit codegen --lang
python` generated from conformance.orbit, which the suite writes beside this
file as `conformance.py`. It answers the text in upper case, so a run shows
that this handler, not an untyped one, served it."""

import os
import sys

from conformance import CONF_ECHO, ConfEchoInput, ConfEchoOutput  # type: ignore[import-not-found]

from orbit_sdk import Context, Worker

worker = Worker(
    os.environ["CONF_WORKER_ID"],
    concurrency=int(os.environ.get("CONF_CONCURRENCY", "1")),
    poll_wait_ms=int(os.environ.get("CONF_POLL_WAIT_MS", "5000")),
)


@worker.task(CONF_ECHO)
def echo(input: ConfEchoInput, ctx: Context) -> ConfEchoOutput:
    print(f"CONF start {ctx.execution_id} {ctx.step_id}", flush=True, file=sys.stderr)
    return ConfEchoOutput(text=input.text.upper())


if __name__ == "__main__":
    worker.run()
