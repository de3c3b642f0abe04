"""Worker `orders-python` for chapter 59's OrderProcessing: risk.analyze,
payments.charge and payments.refund, with the behaviour the chapter's table
gives each input.

- a customer_id starting with "risky" scores 0.95, so the payment is skipped;
- an amount above 5000 is declined (CARD_DECLINED, not retryable);
- an amount of exactly 4242 takes three seconds to charge;
- with ORBIT_FLAKY=1 the first risk.analyze attempt of each execution fails
  with a retryable error.

Charges are remembered by idempotency key, so a second execution for the same
order gets the first charge back instead of a new one.
"""

import os
import time
from typing import Any

from orbit_sdk import Context, TaskError, Worker

POLL_WAIT_MS = int(os.environ.get("E2E_POLL_WAIT_MS", "3000"))

worker = Worker("orders-python", poll_wait_ms=POLL_WAIT_MS)
_charges: dict[str, dict[str, Any]] = {}  # idempotency key -> result; a payment provider's memory


@worker.task("risk.analyze", version="1.0.0")
def analyze(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if os.environ.get("ORBIT_FLAKY") == "1" and ctx.attempt == 1:
        raise TaskError("RISK_SERVICE_UNAVAILABLE", "upstream timed out", retryable=True)
    if input["customer_id"].startswith("risky"):
        return {"score": 0.95, "reasons": ["customer flagged for review"]}
    return {"score": 0.101, "reasons": []}


@worker.task("payments.charge", version="1.0.0")
def charge(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if ctx.idempotency_key in _charges:
        ctx.log("duplicate charge request; returning the original result")
        return _charges[ctx.idempotency_key]
    amount = input["amount"]
    if amount > 5000:
        raise TaskError(
            "CARD_DECLINED",
            f"charge of {amount:g} {input['currency']} declined",
            retryable=False,
        )
    if amount == 4242:
        time.sleep(3)
    result = {"transaction_id": f"tx-{input['order_id']}", "status": "captured"}
    _charges[ctx.idempotency_key] = result
    ctx.log(f"charged {amount:g} {input['currency']} as {result['transaction_id']}")
    return result


@worker.task("payments.refund", version="1.0.0")
def refund(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    ctx.log(f"refunded {input['transaction_id']}")
    return {"refunded": True}


if __name__ == "__main__":
    worker.run()
