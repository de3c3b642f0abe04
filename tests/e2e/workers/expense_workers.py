"""Worker `expense-python` for chapter 64's ExpenseClaim: pays a claim once
per idempotency key and logs each payment."""

import os
from typing import Any

from orbit_sdk import Context, Worker

worker = Worker("expense-python", poll_wait_ms=int(os.environ.get("E2E_POLL_WAIT_MS", "3000")))
_payments: dict[str, str] = {}  # idempotency key -> payment id


@worker.task("payments.pay", version="1.0.0")
def pay(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    payment_id = _payments.setdefault(ctx.idempotency_key, f"pay-{input['claim_id']}")
    ctx.log(f"paid {input['amount']:g} for claim {input['claim_id']} as {payment_id}")
    return {"payment_id": payment_id}


if __name__ == "__main__":
    worker.run()
