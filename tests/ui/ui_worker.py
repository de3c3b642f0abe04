"""Worker `ui-python` for the web UI's browser tests: serves both task
contracts of the expense claim (tests/e2e/projects/expense)."""

import os
from typing import Any

from orbit_sdk import Context, Worker

worker = Worker("ui-python", poll_wait_ms=int(os.environ.get("E2E_POLL_WAIT_MS", "1000")))


@worker.task("payments.pay", version="1.0.0")
def pay(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"payment_id": f"pay-{input['claim_id']}"}


@worker.task("people.notify", version="1.0.0")
def notify(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"delivered": True}


if __name__ == "__main__":
    worker.run()
