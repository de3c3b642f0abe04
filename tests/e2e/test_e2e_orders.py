"""Chapter 59, orders with compensation: the book's OrderProcessing workflow
served by a Python and a TypeScript worker written for these tests, through
every path the chapter runs: completed, held for review, declined and
compensated, cancelled during a payment, retried, and submitted twice."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from e2e_processes import REPO, Cli, Server, Stack, Worker, started_execution, stop_all
from e2e_transcripts import same

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

WORKFLOW = str(REPO / "tests" / "book" / "support" / "order_processing.orbit")
PARALLEL = ("analyze_risk", "validate_order", "reserve_inventory")


@dataclass
class Orders:
    server: Server
    cli: Cli
    python: Worker
    typescript: Worker
    workers: Path

    def order(self, order_id: str, customer: str, amount: float, quantity: int = 2) -> str:
        return json.dumps(
            {
                "order_id": order_id,
                "customer_id": customer,
                "amount": amount,
                "items": [{"sku": "BOOK-1", "quantity": quantity}],
            }
        )

    def run(self, *args: str) -> CompletedProcess[str]:
        return self.cli("run", WORKFLOW, *args)


@pytest.fixture(scope="module")
def orders(module_stack: Stack) -> Orders:
    server = module_stack.server()
    workers = module_stack.workers_dir()
    python = module_stack.python_worker("orders-python", workers / "order_workers.py", server)
    typescript = module_stack.typescript_worker(
        "orders-typescript", workers / "order_workers.ts", server
    )
    return Orders(server, module_stack.cli(server), python, typescript, workers)


@pytest.fixture(scope="module")
def a1(orders: Orders) -> CompletedProcess[str]:
    return orders.run("--input", orders.order("A-1", "c-42", 120.0))


def test_check(orders: Orders) -> None:
    assert orders.cli.ok("check", WORKFLOW).stdout.strip() == "ok OrderProcessing@1.0.0 (5 steps)"


def test_an_order_completes(a1: CompletedProcess[str]) -> None:
    assert a1.returncode == 0, a1.stderr
    same(
        a1.stderr,
        """\
        deployed OrderProcessing@1.0.0 (sha256:4fdfac082bf3)
        started execution ff2cbf0c-ccb6-42e1-98ac-84ec85a2196b
          ✓ analyze_risk                   succeeded 7ms
          ✓ validate_order                 succeeded 13ms
          ✓ reserve_inventory              succeeded 11ms
          ✓ process_payment                succeeded 8ms
          ✓ send_notification              succeeded 8ms

        COMPLETED ff2cbf0c-ccb6-42e1-98ac-84ec85a2196b  OrderProcessing@1.0.0
          elapsed: 56ms
        """,
        any_order=PARALLEL,
    )
    assert json.loads(a1.stdout) == {
        "status": "completed",
        "transaction_id": "tx-A-1",
        "risk_score": 0.101,
    }


def test_a_risky_customer_is_held_for_review(orders: Orders, a1: CompletedProcess[str]) -> None:
    held = orders.run("--input", orders.order("A-3", "risky-7", 120.0, quantity=1))
    assert held.returncode == 0, held.stderr
    same(
        held.stderr,
        """\
        up to date OrderProcessing@1.0.0 (sha256:4fdfac082bf3)
        started execution 1e10703f-37cc-42ac-ae1e-c4e4ce1eeb5a
          ✓ analyze_risk                   succeeded 18ms
          ✓ validate_order                 succeeded 16ms
          ✓ reserve_inventory              succeeded 6ms
          ↷ process_payment                skipped
          ✓ send_notification              succeeded 7ms

        COMPLETED 1e10703f-37cc-42ac-ae1e-c4e4ce1eeb5a  OrderProcessing@1.0.0
          elapsed: 69ms
        """,
        # `orbit run` orders units finished in the same millisecond by name,
        # so the skip can be printed before the reservation it waited for.
        any_order=(*PARALLEL, "process_payment"),
    )
    events = orders.server.events(started_execution(held))
    done = {e["step"]: e["seq"] for e in events if e["type"] == "StepSucceeded"}
    skipped = next(e for e in events if e["type"] == "StepSkipped")
    assert skipped["step"] == "process_payment"
    assert skipped["seq"] > max(done["analyze_risk"], done["reserve_inventory"])
    assert json.loads(held.stdout) == {
        "status": "held_for_review",
        "transaction_id": None,
        "risk_score": 0.95,
    }
    assert "Order A-3 is held for review" in orders.typescript.log()


def test_a_declined_card_compensates_the_reservation(
    orders: Orders, a1: CompletedProcess[str]
) -> None:
    declined = orders.run("--input", orders.order("A-2", "c-42", 9000))
    assert declined.returncode == 1
    same(
        declined.stderr,
        """\
        up to date OrderProcessing@1.0.0 (sha256:4fdfac082bf3)
        started execution 3647177c-74f4-4569-968f-824e267dce4a
          ✓ analyze_risk                   succeeded 4ms
          ✓ validate_order                 succeeded 4ms
          ✓ reserve_inventory              succeeded 4ms
          ✗ process_payment                failed charge of 9000 USD declined
          ⊘ send_notification              cancelled
          ✓ compensate:reserve_inventory   succeeded 4ms

        FAILED 3647177c-74f4-4569-968f-824e267dce4a  OrderProcessing@1.0.0
          elapsed: 26ms
          compensation: completed
          error: CARD_DECLINED step `process_payment` failed: charge of 9000 USD declined
        """,
        any_order=PARALLEL,
    )
    logs = orders.cli.ok("logs", started_execution(declined))
    same(
        logs.stdout,
        """\
        +     0ms   #1  WorkflowCreated
        +     0ms   #2  WorkflowStarted
        +     1ms   #3  StepScheduled             step=validate_order attempt=1
        +     1ms   #4  StepScheduled             step=analyze_risk attempt=1
        +     3ms   #5  StepDispatched            step=analyze_risk attempt=1 worker_id=orders-python
        +     5ms   #6  StepDispatched            step=validate_order attempt=1 worker_id=orders-typescript
        +     7ms   #7  StepSucceeded             step=analyze_risk attempt=1
        +     9ms   #8  StepSucceeded             step=validate_order attempt=1
        +     9ms   #9  StepScheduled             step=reserve_inventory attempt=1
        +    10ms  #10  StepDispatched            step=reserve_inventory attempt=1 worker_id=orders-typescript
        +    14ms  #11  StepSucceeded             step=reserve_inventory attempt=1
        +    15ms  #12  StepScheduled             step=process_payment attempt=1
        +    15ms  #13  StepDispatched            step=process_payment attempt=1 worker_id=orders-python
        +    19ms  #14  StepAttemptFailed         step=process_payment attempt=1 error=CARD_DECLINED charge of 9000 USD declined
        +    20ms  #15  StepFailed                step=process_payment error=CARD_DECLINED charge of 9000 USD declined
        +    20ms  #16  StepCancelled             step=send_notification
        +    20ms  #17  CompensationStarted       reason=step `process_payment` failed: charge of 9000 USD declined
        +    20ms  #18  StepScheduled             step=compensate:reserve_inventory attempt=1
        +    22ms  #19  StepDispatched            step=compensate:reserve_inventory attempt=1 worker_id=orders-typescript
        +    26ms  #20  StepSucceeded             step=compensate:reserve_inventory attempt=1
        +    26ms  #21  CompensationCompleted
        +    26ms  #22  WorkflowFailed            error=CARD_DECLINED step `process_payment` failed: charge of 9000 USD declined
        """,
        any_order=PARALLEL,
    )
    assert '"reservation_id":"res-A-2"' in orders.typescript.log().split('"released"', 1)[1]


def test_a_cancellation_during_the_payment_refunds_it(
    orders: Orders, a1: CompletedProcess[str]
) -> None:
    start = orders.run(
        "--id", "order-A-4", "--no-wait", "--input", orders.order("A-4", "c-42", 4242, 1)
    )
    assert start.returncode == 0, start.stderr
    assert start.stdout.strip() == "order-A-4"
    same(
        start.stderr,
        """\
        up to date OrderProcessing@1.0.0 (sha256:4fdfac082bf3)
        started execution order-A-4
        """,
    )
    orders.server.wait_for_event(
        "order-A-4", lambda e: e["type"] == "StepDispatched" and e["step"] == "process_payment"
    )
    cancel = orders.cli.ok("cancel", "order-A-4")
    assert (cancel.stdout + cancel.stderr).strip() == (
        "cancellation requested; execution is RUNNING"
    )
    orders.server.wait_for_status("order-A-4", {"CANCELLED"})
    status = orders.cli.ok("status", "order-A-4")
    same(
        status.stdout,
        """\
        CANCELLED order-A-4  OrderProcessing@1.0.0
          elapsed: 3.0s
          compensation: completed

          STEP                         STATUS       ATTEMPT     TIME  DETAIL
          validate_order               SUCCEEDED          1      8ms  worker orders-typescript
          analyze_risk                 SUCCEEDED          1      9ms  worker orders-python
          reserve_inventory            SUCCEEDED          1      7ms  worker orders-typescript
          send_notification            CANCELLED          0
          process_payment              SUCCEEDED          1     3.0s  worker orders-python
          compensate:process_payment   SUCCEEDED          1      4ms  worker orders-python
          compensate:reserve_inventory SUCCEEDED          1      5ms  worker orders-typescript
        """,
        any_order=PARALLEL,
    )
    logs = orders.cli.ok("logs", "order-A-4").stdout.splitlines()
    same(
        "\n".join(logs[11:]),
        """\
        +    22ms  #12  StepScheduled             step=process_payment attempt=1
        +    23ms  #13  StepDispatched            step=process_payment attempt=1 worker_id=orders-python
        +    1.0s  #14  CancelRequested           reason=requested via API
        +    1.0s  #15  StepCancelled             step=send_notification
        +    3.0s  #16  StepSucceeded             step=process_payment attempt=1
        +    3.0s  #17  CompensationStarted       reason=cancelled: requested via API
        +    3.0s  #18  StepScheduled             step=compensate:process_payment attempt=1
        +    3.0s  #19  StepDispatched            step=compensate:process_payment attempt=1 worker_id=orders-python
        +    3.0s  #20  StepSucceeded             step=compensate:process_payment attempt=1
        +    3.0s  #21  StepScheduled             step=compensate:reserve_inventory attempt=1
        +    3.0s  #22  StepDispatched            step=compensate:reserve_inventory attempt=1 worker_id=orders-typescript
        +    3.0s  #23  StepSucceeded             step=compensate:reserve_inventory attempt=1
        +    3.0s  #24  CompensationCompleted
        +    3.0s  #25  WorkflowCancelled
        """,
    )
    state = json.loads(orders.cli.ok("inspect", "order-A-4").stdout)
    assert state["units"]["compensate:process_payment"]["idempotency_key"] == "refund-A-4"
    assert state["units"]["compensate:process_payment"]["input"] == {
        "transaction_id": "tx-A-4",
        "amount": 4242.0,
    }
    assert "refunded tx-A-4" in orders.python.log()


def test_a_submission_with_the_same_id_attaches(orders: Orders, a1: CompletedProcess[str]) -> None:
    order = orders.order("A-6", "c-42", 120.0)
    first = orders.run("--id", "order-A-6", "--input", order)
    assert first.returncode == 0, first.stderr
    again = orders.run("--id", "order-A-6", "--input", order)
    assert again.returncode == 0, again.stderr
    assert "attached to existing execution order-A-6" in again.stderr
    assert "started execution" not in again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)
    starts = [e for e in orders.server.events("order-A-6") if e["type"] == "WorkflowCreated"]
    assert len(starts) == 1


def test_a_second_execution_for_the_same_order_is_not_charged_twice(
    orders: Orders, a1: CompletedProcess[str]
) -> None:
    order = orders.order("A-7", "c-42", 120.0)
    first = orders.run("--input", order)
    second = orders.run("--input", order)
    assert first.returncode == second.returncode == 0
    assert json.loads(second.stdout)["transaction_id"] == "tx-A-7"
    events = orders.server.events(started_execution(second))
    payment = next(
        e for e in events if e["type"] == "StepScheduled" and e["step"] == "process_payment"
    )
    assert payment["idempotency_key"] == "charge-A-7"
    duplicate = [
        line
        for line in orders.python.log().splitlines()
        if "duplicate charge request; returning the original result" in line
    ]
    assert len(duplicate) == 1
    same(
        duplicate[0],
        'INFO orbit duplicate charge request; returning the original result {"execution_id": "9f76c35c-...", "step": "process_payment", "attempt": 1}',
    )
    assert started_execution(second) in duplicate[0]
    assert orders.python.log().count("charged 120 USD as tx-A-7") == 1


def test_zz_a_transient_failure_is_retried(orders: Orders, module_stack: Stack) -> None:
    # Last in the module: it leaves a flaky Python worker behind.
    stop_all([orders.python])
    orders.python = module_stack.python_worker(
        "orders-python",
        orders.workers / "order_workers.py",
        orders.server,
        env={"ORBIT_FLAKY": "1"},
    )
    retried = orders.run("--id", "order-A-5", "--input", orders.order("A-5", "c-42", 120.0))
    assert retried.returncode == 0, retried.stderr
    same(
        retried.stderr,
        """\
        up to date OrderProcessing@1.0.0 (sha256:4fdfac082bf3)
        started execution order-A-5
          ↻ analyze_risk                   retry_wait upstream timed out
          ✓ validate_order                 succeeded 6ms
          ✓ reserve_inventory              succeeded 3ms
          ✓ analyze_risk                   succeeded 6ms
          ✓ process_payment                succeeded 10ms
          ✓ send_notification              succeeded 4ms

        COMPLETED order-A-5  OrderProcessing@1.0.0
          elapsed: 1.1s
        """,
        any_order=PARALLEL,
    )
    assert json.loads(retried.stdout) == {
        "status": "completed",
        "transaction_id": "tx-A-5",
        "risk_score": 0.101,
    }
    logs = orders.cli.ok("logs", "order-A-5").stdout
    assert re.search(
        r"#\d+  StepAttemptFailed         step=analyze_risk attempt=1"
        r" error=RISK_SERVICE_UNAVAILABLE upstream timed out\n"
        r".*#\d+  RetryScheduled            step=analyze_risk delay_ms=1000\n",
        logs,
    ), logs
