"""The book's example histories for sleep, signals, queries, compute steps,
fan-out, children, compensation, handlers, event handlers, continue-as-new and
limits (chapters 17-25, 39, 40, 61), event by event."""

from __future__ import annotations

from typing import Any

import pytest
from engine_kit import (
    Bool,
    Float,
    Int,
    Str,
    Worker,
    binop,
    call,
    child_contract,
    inp,
    lit,
    lst,
    obj,
    opt,
    parse_book,
    rec,
    ref,
    step,
    task,
    timeline,
    times,
    var,
    workflow,
)

from orbit_core.decide import Limits
from orbit_core.engine import Engine
from orbit_core.errors import ConflictError, InvalidError, NotFoundError
from orbit_core.ir import Compensation, ContinueAsNew, EventHandler, ForEach, Query, Signal
from orbit_core.ir import expr as e
from orbit_core.jsontypes import JsonValue
from orbit_core.state import fold
from orbit_core.testing import run_until_idle, simulated_engine


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine()
    yield eng
    eng.close()


def advance(engine: Engine, ms: int, step_ms: int = 100) -> None:
    """Moves simulated time in ticks of `step_ms`, as the real 100 ms tick would."""
    for _ in range(ms // step_ms):
        engine.clock.advance(step_ms)  # type: ignore[attr-defined]


def assert_fold_matches(engine: Engine, execution_id: str) -> None:
    state = engine.state(execution_id)
    assert fold(engine.events(execution_id), execution_id).to_json() == state.to_json()


def test_sleep_and_workflow_timeout(engine: Engine) -> None:
    """Chapter 40's timeout-1: `timeout 3s`, a 200 ms sleep, no worker for `work`."""
    wf = workflow(
        "Demo",
        [
            step("pause", "sleep", sleep_ms=200),
            step("work", task="demo.work", after=["pause"], with_=obj(n=1)),
        ],
        [task("demo.work", rec(n=Int), rec(ok=Bool))],
        timeout_ms=3000,
    )
    engine.deploy(wf)
    engine.start("Demo", execution_id="timeout-1")
    advance(engine, 3000)
    assert timeline(engine, "timeout-1") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  TimerStarted              step=pause
+   284ms   #4  TimerFired                step=pause
+   284ms   #5  StepScheduled             step=work attempt=1
+    3.1s   #6  WorkflowTimeoutReached
+    3.1s   #7  StepCancelled             step=work
+    3.1s   #8  WorkflowTimedOut
"""
    )
    assert times(engine, "timeout-1") == [0, 0, 0, 200, 200, 3000, 3000, 3000]
    doc = engine.get("timeout-1")
    assert (doc["status"], doc["compensation"], doc["abort"]) == (
        "TIMED_OUT",
        "none",
        {"kind": "timed_out"},
    )
    assert doc["units"]["pause"]["output"] == {}


def batch() -> Any:
    return workflow(
        "Batch",
        [
            step("pause", "sleep", sleep_ms=2000),
            step("first", "await", signal="item", after=["pause"]),
            step("second", "await", signal="item", after=["first"]),
        ],
        [],
        timeout_ms=3_600_000,
        signals=(Signal("item", rec(sku=Str, quantity=(Int, 1))),),
        result=obj(
            skus=[ref("first", "sku"), ref("second", "sku")],
            total=binop("add", ref("first", "quantity"), ref("second", "quantity")),
        ),
    )


def test_signals_are_buffered_and_delivered_in_order(engine: Engine) -> None:
    """Chapter 20's batch-1."""
    engine.deploy(batch())
    engine.start("Batch", execution_id="batch-1")
    assert engine.signal("batch-1", "item", {"sku": "A-1"})["seq"] == 4
    reply = engine.signal("batch-1", "item", {"sku": "B-2", "quantity": 3})
    assert reply == {"execution_id": "batch-1", "signal": "item", "accepted": True, "seq": 5}
    advance(engine, 2000)
    assert timeline(engine, "batch-1") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  TimerStarted              step=pause
+    13ms   #4  SignalReceived            name=item
+    24ms   #5  SignalReceived            name=item
+    2.0s   #6  TimerFired                step=pause
+    2.0s   #7  SignalAwaitStarted        step=first signal=item
+    2.0s   #8  SignalDelivered           step=first signal_seq=4
+    2.0s   #9  SignalAwaitStarted        step=second signal=item
+    2.0s  #10  SignalDelivered           step=second signal_seq=5
+    2.0s  #11  WorkflowCompleted
"""
    )
    doc = engine.get("batch-1")
    assert doc["output"] == {"skus": ["A-1", "B-2"], "total": 4}
    assert [s["delivered_to"] for s in doc["signals"]] == ["first", "second"]
    assert doc["signals"][0]["payload"] == {"sku": "A-1", "quantity": 1}
    with pytest.raises(ConflictError) as info:
        engine.signal("batch-1", "nope", {})
    assert info.value.message == "execution is already COMPLETED"


def confirm_charge() -> Any:
    return workflow(
        "ConfirmCharge",
        [
            step(
                "charge",
                task="payments.charge",
                with_=obj(order_id=inp("order_id"), amount=inp("amount")),
                compensate=Compensation(
                    "payments.refund",
                    obj(transaction_id=ref("charge", "transaction_id"), amount=inp("amount")),
                ),
            ),
            step("confirmation", "await", signal="confirm", after=["charge"], timeout_ms=2000),
        ],
        [
            task("payments.charge", rec(order_id=Str, amount=Float), rec(transaction_id=Str)),
            task("payments.refund", rec(transaction_id=Str, amount=Float), rec(refunded=Bool)),
        ],
        input=rec(order_id=Str, amount=Float),
        signals=(Signal("confirm", rec(ok=Bool)),),
    )


def test_await_timeout_compensates(engine: Engine) -> None:
    """Chapter 20's confirm-1."""
    engine.deploy(confirm_charge())
    w = Worker(engine, "orders-python", ["payments.charge", "payments.refund"])
    engine.start("ConfirmCharge", input={"order_id": "1", "amount": 5.0}, execution_id="confirm-1")
    w.run({"transaction_id": "tx-1"})
    advance(engine, 2000)
    w.run({"refunded": True})
    assert timeline(engine, "confirm-1") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  StepScheduled             step=charge attempt=1
+     3ms   #4  StepDispatched            step=charge attempt=1 worker_id=orders-python
+    12ms   #5  StepSucceeded             step=charge attempt=1
+    14ms   #6  SignalAwaitStarted        step=confirmation signal=confirm
+    2.0s   #7  StepFailed                step=confirmation error=SIGNAL_TIMEOUT no `confirm` signal arrived before the step's timeout
+    2.0s   #8  CompensationStarted       reason=step `confirmation` failed: no `confirm` signal arrived before the step's timeout
+    2.0s   #9  StepScheduled             step=compensate:charge attempt=1
+    2.0s  #10  StepDispatched            step=compensate:charge attempt=1 worker_id=orders-python
+    2.0s  #11  StepSucceeded             step=compensate:charge attempt=1
+    2.0s  #12  CompensationCompleted
+    2.0s  #13  WorkflowFailed            error=SIGNAL_TIMEOUT step `confirmation` failed: no `confirm` signal arrived before the step's timeout
"""
    )
    events: list[Any] = engine.history("confirm-1")["events"]  # JSON
    assert events[5]["deadline_ms"] == events[5]["timestamp_ms"] + 2000
    assert (
        engine.get("confirm-1")["units"]["confirmation"]["wake_at_ms"] == events[5]["deadline_ms"]
    )


def approval() -> Any:
    needs = ref("assess", "needs_approval")
    return workflow(
        "OrderApproval",
        [
            step(
                "assess",
                "compute",
                compute=obj(
                    needs_approval=binop("ge", inp("amount"), 1000.0), rounded=inp("amount")
                ),
            ),
            step("decision", "await", signal="review", when=needs, timeout_ms=172_800_000),
            step(
                "charge",
                task="payments.charge",
                using="python",
                when=binop(
                    "or",
                    e.Unary("not", needs),
                    call("coalesce", ref("decision", "approved"), False),
                ),
                with_=obj(
                    order_id=inp("order_id"),
                    amount=ref("assess", "rounded"),
                    currency=inp("currency"),
                ),
                idempotency_key=binop("add", "charge-", inp("order_id")),
            ),
            step(
                "notify",
                task="notifications.send",
                after=["charge"],
                with_=obj(
                    customer_id=inp("customer_id"),
                    message=e.If(
                        call("is_null", e.StepRef("charge")),
                        lit("Your order was not approved"),
                        lit("Your order is confirmed"),
                    ),
                ),
            ),
        ],
        [
            task(
                "payments.charge",
                rec(order_id=Str, amount=Float, currency=Str),
                rec(transaction_id=Str),
            ),
            task("notifications.send", rec(customer_id=Str, message=Str), rec(delivered=Bool)),
        ],
        input=rec(order_id=Str, customer_id=Str, amount=Float, currency=(Str, "USD")),
        output=rec(status=Str, transaction_id=opt(Str)),
        signals=(Signal("review", rec(approved=Bool, reviewer=Str, comment=opt(Str))),),
        queries=(
            Query(
                "status",
                obj(
                    needs_approval=needs,
                    approved=ref("decision", "approved"),
                    reviewer=ref("decision", "reviewer"),
                    charged=e.Unary("not", call("is_null", e.StepRef("charge"))),
                ),
                rec(),
            ),
        ),
        result=obj(
            status=e.If(call("is_null", e.StepRef("charge")), lit("rejected"), lit("charged")),
            transaction_id=ref("charge", "transaction_id"),
        ),
    )


def test_approval_with_compute_await_signal_and_query(engine: Engine) -> None:
    """Chapter 20's order-A-100, -101 and -103."""
    engine.deploy(approval())
    py = Worker(engine, "orders-python", ["payments.charge"])
    ts = Worker(engine, "orders-typescript", ["notifications.send"], runtime="typescript")
    engine.start(
        "OrderApproval",
        input={"order_id": "A-100", "customer_id": "c-7", "amount": 2500.0},
        execution_id="order-A-100",
    )
    assert engine.query("order-A-100", "status")["value"] == {
        "needs_approval": True,
        "approved": None,
        "reviewer": None,
        "charged": False,
    }
    with pytest.raises(NotFoundError) as unknown:
        engine.query("order-A-100", "stat")
    assert (unknown.value.code, unknown.value.message) == (
        "UNKNOWN_QUERY",
        "OrderApproval@1.0.0 has no query `stat`; declared: status",
    )
    with pytest.raises(NotFoundError) as nosignal:
        engine.signal("order-A-100", "reveiw", {})
    assert nosignal.value.message == "OrderApproval@1.0.0 has no signal `reveiw`; declared: review"
    with pytest.raises(InvalidError) as bad:
        engine.signal("order-A-100", "review", {"approved": "yes", "reviewer": "dana"})
    assert (bad.value.code, bad.value.message) == (
        "SIGNAL_PAYLOAD_INVALID",
        "payload for signal `review` is invalid at $.approved: expected Bool, found a string",
    )
    seq = engine.signal(
        "order-A-100",
        "review",
        {"approved": True, "reviewer": "dana", "comment": "verified by phone"},
    )["seq"]
    assert seq == 5
    charge = py.take()
    assert charge["idempotency_key"] == "charge-A-100"
    py.ok(charge, {"transaction_id": "tx-A-100"})
    ts.run({"delivered": True})
    assert timeline(engine, "order-A-100") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  StepSucceeded             step=assess attempt=1
+     1ms   #4  SignalAwaitStarted        step=decision signal=review
+   538ms   #5  SignalReceived            name=review
+   540ms   #6  SignalDelivered           step=decision signal_seq=5
+   540ms   #7  StepScheduled             step=charge attempt=1
+   547ms   #8  StepDispatched            step=charge attempt=1 worker_id=orders-python
+   556ms   #9  StepSucceeded             step=charge attempt=1
+   557ms  #10  StepScheduled             step=notify attempt=1
+   562ms  #11  StepDispatched            step=notify attempt=1 worker_id=orders-typescript
+   568ms  #12  StepSucceeded             step=notify attempt=1
+   569ms  #13  WorkflowCompleted
"""
    )
    doc = engine.get("order-A-100")
    assert doc["output"] == {"status": "charged", "transaction_id": "tx-A-100"}
    assert doc["signals"] == [
        {
            "seq": 5,
            "name": "review",
            "payload": {"approved": True, "reviewer": "dana", "comment": "verified by phone"},
            "received_at_ms": doc["created_at_ms"],
            "delivered_to": "decision",
        }
    ]
    status: Any = engine.query("order-A-100", "status")["value"]  # JSON
    assert status["charged"] is True

    engine.start(
        "OrderApproval",
        input={"order_id": "A-101", "customer_id": "c-8", "amount": 4000.0},
        execution_id="order-A-101",
    )
    engine.signal("order-A-101", "review", {"approved": False, "reviewer": "lee"})
    notify = ts.take()
    message: Any = notify["input"]  # JSON
    assert message["message"] == "Your order was not approved"
    ts.ok(notify, {"delivered": True})
    doc = engine.get("order-A-101")
    assert doc["units"]["charge"]["status"] == "SKIPPED"
    assert doc["output"] == {"status": "rejected", "transaction_id": None}
    assert "StepSkipped step=charge reason=`when` condition was false" in timeline(
        engine, "order-A-101"
    )

    engine.start(
        "OrderApproval",
        input={"order_id": "A-103", "customer_id": "c-9", "amount": 5000.0},
        execution_id="order-A-103",
    )
    engine.cancel("order-A-103", "order withdrawn")
    assert timeline(engine, "order-A-103")[4:] == parse_book(
        """
+   312ms   #5  CancelRequested           reason=order withdrawn
+   313ms   #6  StepCancelled             step=decision
+   313ms   #7  StepCancelled             step=charge
+   313ms   #8  StepCancelled             step=notify
+   313ms   #9  WorkflowCancelled
"""
    )
    with pytest.raises(ConflictError):
        engine.signal("order-A-103", "review", {"approved": True, "reviewer": "x"})


def test_compute_fan_out_order_and_expression_errors(engine: Engine) -> None:
    """Chapter 21: a `for` compute step records StepFanOut, one success per
    element and the aggregate; a runtime error is EXPRESSION_ERROR."""
    line = rec(sku=Str, quantity=Int)
    wf = workflow(
        "Totals",
        [
            step("totals", "compute", compute=obj(units=call("len", inp("lines")))),
            step(
                "line_totals",
                "compute",
                for_each=ForEach("line", inp("lines")),
                compute=obj(sku=var("line", "sku"), total=var("line", "quantity")),
            ),
            step(
                "per_unit",
                "compute",
                compute=ref("totals", "units"),
                when=binop("gt", ref("totals", "units"), 0),
            ),
        ],
        [],
        input=rec(lines=lst(line)),
        result=obj(line_totals=e.StepRef("line_totals"), per_unit=e.StepRef("per_unit")),
    )
    engine.deploy(wf)
    engine.start(
        "Totals",
        input={"lines": [{"sku": "A", "quantity": 12}, {"sku": "B", "quantity": 1}]},
        execution_id="totals-1",
    )
    assert timeline(engine, "totals-1")[2:] == [
        "StepSucceeded step=totals attempt=1",
        *parse_book(
            """
+     2ms   #4  StepFanOut                step=line_totals
+     2ms   #5  StepSucceeded             step=line_totals[0] attempt=1
+     2ms   #6  StepSucceeded             step=line_totals[1] attempt=1
+     2ms   #7  StepSucceeded             step=per_unit attempt=1
+     2ms   #8  StepSucceeded             step=line_totals attempt=1
"""
        ),
        "WorkflowCompleted",
    ]
    output: Any = engine.get("totals-1")["output"]  # JSON
    assert output["line_totals"] == [
        {"sku": "A", "total": 12},
        {"sku": "B", "total": 1},
    ]

    discount = workflow(
        "Discount",
        [
            step(
                "factor",
                "compute",
                compute=binop(
                    "mul",
                    inp("subtotal"),
                    binop("div", 100, binop("sub", 100, inp("discount_percent"))),
                ),
            )
        ],
        [],
        input=rec(subtotal=Float, discount_percent=(Int, 0)),
    )
    engine.deploy(discount)
    engine.start(
        "Discount", input={"subtotal": 10.0, "discount_percent": 100}, execution_id="discount-1"
    )
    doc = engine.get("discount-1")
    assert (doc["status"], doc["compensation"]) == ("FAILED", "none")
    assert doc["error"] == {
        "code": "EXPRESSION_ERROR",
        "message": "step `factor` failed: evaluating `compute`: division by zero",
        "retryable": False,
    }


def saga(fail_second_compensation: bool = False) -> Any:
    undo = task("a.undo", rec(v=Int), rec(ok=Bool))
    return workflow(
        "Saga",
        [
            step(
                "first",
                task="a.run",
                with_=obj(n=1),
                compensate=Compensation("a.undo", obj(v=ref("first", "v"))),
            ),
            step(
                "second",
                task="a.run",
                after=["first"],
                with_=obj(n=2),
                compensate=Compensation("a.undo", obj(v=ref("second", "v"))),
            ),
            step("broken", task="a.run", after=["second"], with_=obj(n=3)),
        ],
        [task("a.run", rec(n=Int), rec(v=Int)), undo],
    )


def test_compensation_newest_first_and_failures_reported_at_the_end(engine: Engine) -> None:
    """Chapter 22: compensations run one at a time, newest first; a failed one
    does not stop the rest and is reported after all ran."""
    engine.deploy(saga())
    w = Worker(engine, "w", ["a.run", "a.undo"])
    engine.start("Saga", execution_id="saga-1")
    w.run({"v": 1})
    w.run({"v": 2})
    w.err(w.take(), "HTTP_ERROR", "server responded 503", False)
    undo_second = w.take()
    assert undo_second["step_id"] == "compensate:second"
    assert engine.workers.poll(w.session, 0) is None  # one at a time
    w.ok(undo_second, {"ok": True})
    w.run({"ok": True})
    assert timeline(engine, "saga-1")[-11:] == [
        "StepAttemptFailed step=broken attempt=1 error=HTTP_ERROR server responded 503",
        "StepFailed step=broken error=HTTP_ERROR server responded 503",
        "CompensationStarted reason=step `broken` failed: server responded 503",
        "StepScheduled step=compensate:second attempt=1",
        "StepDispatched step=compensate:second attempt=1 worker_id=w",
        "StepSucceeded step=compensate:second attempt=1",
        "StepScheduled step=compensate:first attempt=1",
        "StepDispatched step=compensate:first attempt=1 worker_id=w",
        "StepSucceeded step=compensate:first attempt=1",
        "CompensationCompleted",
        "WorkflowFailed error=HTTP_ERROR step `broken` failed: server responded 503",
    ]
    lines = timeline(engine, "saga-1")
    assert lines[-1] == "WorkflowFailed error=HTTP_ERROR step `broken` failed: server responded 503"
    assert lines[-2] == "CompensationCompleted"

    engine.start("Saga", execution_id="saga-2")
    w.run({"v": 1})
    w.run({"v": 2})
    w.err(w.take(), "BROKEN", "no", False)
    w.err(w.take(), "UNDO_FAILED", "cannot undo second", False)
    undo_first = w.take()
    assert undo_first["step_id"] == "compensate:first"
    w.ok(undo_first, {"ok": True})
    lines = timeline(engine, "saga-2")
    assert lines[-3:] == [
        "StepSucceeded step=compensate:first attempt=1",
        "CompensationFailed step=second error=UNDO_FAILED cannot undo second",
        "WorkflowFailed error=BROKEN step `broken` failed: no",
    ]
    assert engine.get("saga-2")["compensation"] == "failed"


def checkout() -> Any:
    notify = task("notifications.send", rec(customer_id=Str, message=Str), rec(delivered=Bool))
    return workflow(
        "Checkout",
        [
            step(
                "reserve",
                task="inventory.reserve",
                with_=obj(order_id=inp("order_id")),
                compensate=Compensation(
                    "inventory.release", obj(reservation_id=ref("reserve", "reservation_id"))
                ),
            ),
            step(
                "charge",
                task="payments.charge",
                after=["reserve"],
                with_=obj(order_id=inp("order_id"), amount=inp("amount")),
            ),
        ],
        [
            task("inventory.reserve", rec(order_id=Str), rec(reservation_id=Str)),
            task("inventory.release", rec(reservation_id=Str), rec(released=Bool)),
            task("payments.charge", rec(order_id=Str, amount=Float), rec(transaction_id=Str)),
            notify,
        ],
        input=rec(order_id=Str, customer_id=Str, amount=Float),
        handlers={
            "failure": (
                step(
                    "tell_customer",
                    task="notifications.send",
                    with_=obj(
                        customer_id=inp("customer_id"),
                        message=binop("add", "We could not complete: ", path_failure("message")),
                    ),
                ),
                step(
                    "summary",
                    "compute",
                    compute=obj(
                        code=path_failure("code"),
                        reserved=e.Unary("not", call("is_null", e.StepRef("reserve"))),
                        charged=e.Unary("not", call("is_null", e.StepRef("charge"))),
                    ),
                ),
            ),
            "cancel": (
                step(
                    "confirm_cancel",
                    task="notifications.send",
                    with_=obj(customer_id=inp("customer_id"), message="cancelled"),
                ),
            ),
        },
    )


def path_failure(field: str) -> e.Expr:
    return e.Get(e.Failure(), field)


def test_outcome_handlers_run_after_compensation(engine: Engine) -> None:
    """Chapter 23's declined payment."""
    engine.deploy(checkout())
    ts = Worker(
        engine,
        "orders-typescript",
        ["inventory.reserve", "inventory.release", "notifications.send"],
    )
    py = Worker(engine, "orders-python", ["payments.charge"])
    engine.start(
        "Checkout",
        input={"order_id": "9", "customer_id": "c-1", "amount": 9000.0},
        execution_id="checkout-1",
    )
    ts.run({"reservation_id": "r-9"})
    py.err(py.take(), "CARD_DECLINED", "charge of 9000.0 USD declined", False)
    ts.run({"released": True})
    tell = ts.take()
    assert tell["step_id"] == "on_failure:tell_customer"
    told: Any = tell["input"]  # JSON
    assert told["message"] == (
        "We could not complete: step `charge` failed: charge of 9000.0 USD declined"
    )
    ts.ok(tell, {"delivered": True})
    assert timeline(engine, "checkout-1")[7:] == parse_book(
        """
+    59ms   #8  StepAttemptFailed         step=charge attempt=1 error=CARD_DECLINED charge of 9000.0 USD declined
+    59ms   #9  StepFailed                step=charge error=CARD_DECLINED charge of 9000.0 USD declined
+    59ms  #10  CompensationStarted       reason=step `charge` failed: charge of 9000.0 USD declined
+    59ms  #11  StepScheduled             step=compensate:reserve attempt=1
+    70ms  #12  StepDispatched            step=compensate:reserve attempt=1 worker_id=orders-typescript
+   150ms  #13  StepSucceeded             step=compensate:reserve attempt=1
+   151ms  #14  CompensationCompleted
+   151ms  #15  HandlersStarted           kind=failure
+   151ms  #16  StepScheduled             step=on_failure:tell_customer attempt=1
+   151ms  #17  StepSucceeded             step=on_failure:summary attempt=1
+   154ms  #18  StepDispatched            step=on_failure:tell_customer attempt=1 worker_id=orders-typescript
+   187ms  #19  StepSucceeded             step=on_failure:tell_customer attempt=1
+   187ms  #20  WorkflowFailed            error=CARD_DECLINED step `charge` failed: charge of 9000.0 USD declined
"""
    )
    doc = engine.get("checkout-1")
    assert doc["handlers"] == {"kind": "failure", "compensation": "completed"}
    assert doc["units"]["on_failure:summary"]["output"] == {
        "code": "CARD_DECLINED",
        "reserved": True,
        "charged": False,
    }
    assert_fold_matches(engine, "checkout-1")

    engine.start(
        "Checkout",
        input={"order_id": "10", "customer_id": "c-2", "amount": 1.0},
        execution_id="checkout-2",
    )
    engine.cancel("checkout-2")
    confirm = ts.take()
    assert confirm["step_id"] == "on_cancel:confirm_cancel"
    ts.ok(confirm, {"delivered": True})
    assert engine.get("checkout-2")["status"] == "CANCELLED"


def shipment() -> Any:
    notify = task("notifications.send", rec(customer_id=Str, message=Str), rec(delivered=Bool))
    return workflow(
        "Shipment",
        [
            step("arrival", "await", signal="delivered", timeout_ms=30 * 86_400_000),
            step(
                "confirm",
                task="notifications.send",
                with_=obj(
                    customer_id=inp("customer_id"),
                    message=binop("add", "signed by ", ref("arrival", "signed_by")),
                ),
            ),
        ],
        [notify],
        input=rec(shipment_id=Str, customer_id=Str),
        signals=(
            Signal("location", rec(place=Str, eta_hours=(Int, 0))),
            Signal("delivered", rec(signed_by=Str)),
        ),
        events=(
            EventHandler(
                "location",
                (
                    step("text", "compute", compute=binop("add", "in ", e.Get(e.Event(), "place"))),
                    step(
                        "tell",
                        task="notifications.send",
                        with_=obj(customer_id=inp("customer_id"), message=e.StepRef("text")),
                    ),
                ),
            ),
        ),
        result=obj(signed_by=ref("arrival", "signed_by")),
    )


def test_event_handler_instances(engine: Engine) -> None:
    """Chapter 24's Shipment."""
    engine.deploy(shipment())
    w = Worker(engine, "simulator", ["notifications.send"])
    engine.start(
        "Shipment", input={"shipment_id": "S-1", "customer_id": "c-1"}, execution_id="ship-1"
    )
    engine.signal("ship-1", "location", {"place": "Rotterdam", "eta_hours": 30})
    tell = w.take()
    assert tell["step_id"] == "on_event:location@4:tell"
    assert tell["input"] == {"customer_id": "c-1", "message": "in Rotterdam"}
    w.ok(tell, {"delivered": True})
    engine.signal("ship-1", "location", {"place": "Utrecht"})
    w.run({"delivered": True})
    engine.signal("ship-1", "delivered", {"signed_by": "J. de Vries"})
    w.run({"delivered": True})
    lines = timeline(engine, "ship-1")
    assert lines[2:12] == parse_book(
        """
+     0ms   #3  SignalAwaitStarted        step=arrival signal=delivered
+     0ms   #4  SignalReceived            name=location
+     0ms   #5  SignalDelivered           step=on_event:location@4 signal_seq=4
+     0ms   #6  StepSucceeded             step=on_event:location@4:text attempt=1
+     0ms   #7  StepScheduled             step=on_event:location@4:tell attempt=1
+     0ms   #8  StepDispatched            step=on_event:location@4:tell attempt=1 worker_id=simulator
+     0ms   #9  StepSucceeded             step=on_event:location@4:tell attempt=1
+     0ms  #10  SignalReceived            name=location
+     0ms  #11  SignalDelivered           step=on_event:location@10 signal_seq=10
+     0ms  #12  StepSucceeded             step=on_event:location@10:text attempt=1
"""
    )
    assert lines[15:17] == [
        "SignalReceived name=delivered",
        "SignalDelivered step=arrival signal_seq=16",
    ]
    assert lines[-2:] == ["StepSucceeded step=confirm attempt=1", "WorkflowCompleted"]
    assert len(lines) == 21
    assert engine.get("ship-1")["output"] == {"signed_by": "J. de Vries"}


def inbox() -> Any:
    return workflow(
        "Inbox",
        [
            step("take", "await", signal="message", timeout_ms=86_400_000),
            step("pause", "sleep", sleep_ms=2000, after=["take"]),
        ],
        [],
        input=rec(seen=(Int, 0)),
        output=rec(seen=Int),
        signals=(Signal("message", rec(text=Str)),),
        continue_as_new=ContinueAsNew(
            obj(seen=binop("add", inp("seen"), 1)),
            binop("ne", ref("take", "text"), "stop"),
        ),
        result=obj(seen=binop("add", inp("seen"), 1)),
    )


def test_continue_as_new_carries_signals() -> None:
    """Chapter 25's inbox-1, on a server with --max-history-events 12."""
    eng = simulated_engine(limits=Limits(max_history_events=12))
    run_inbox(eng)
    eng.close()


def run_inbox(eng: Engine) -> None:
    eng.deploy(inbox())
    eng.start("Inbox", execution_id="inbox-1")
    for text in ("first", "second", "stop"):
        eng.signal("inbox-1", "message", {"text": text})
    run_until_idle(eng)
    assert timeline(eng, "inbox-1", 1) == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  SignalAwaitStarted        step=take signal=message
+    10ms   #4  SignalReceived            name=message
+    11ms   #5  SignalDelivered           step=take signal_seq=4
+    11ms   #6  TimerStarted              step=pause
+    20ms   #7  SignalReceived            name=message
+    28ms   #8  SignalReceived            name=message
+    2.1s   #9  TimerFired                step=pause
+    2.1s  #10  WorkflowContinuedAsNew    next_run=2
"""
    )
    assert timeline(eng, "inbox-1", 2) == parse_book(
        """
+     0ms   #1  WorkflowCreated           run=2
+     0ms   #2  WorkflowStarted
+     0ms   #3  SignalReceived            name=message
+     0ms   #4  SignalReceived            name=message
+     2ms   #5  SignalAwaitStarted        step=take signal=message
+     2ms   #6  SignalDelivered           step=take signal_seq=3
+     2ms   #7  TimerStarted              step=pause
+    2.1s   #8  TimerFired                step=pause
+    2.1s   #9  WorkflowContinuedAsNew    next_run=3
"""
    )
    run2 = eng.history("inbox-1", 2)
    assert run2["run"] == 2
    assert run2["events"][0]["input"] == {"seen": 1}
    assert run2["events"][3]["payload"] == {"text": "stop"}
    doc = eng.get("inbox-1")
    assert (doc["run"], doc["status"], doc["output"]) == (3, "COMPLETED", {"seen": 3})
    assert eng.history("inbox-1")["run"] == 3
    with pytest.raises(NotFoundError) as info:
        eng.history("inbox-1", 7)
    assert (info.value.code, info.value.message) == (
        "RUN_NOT_FOUND",
        "execution `inbox-1` has runs 1 to 3; there is no run 7",
    )
    assert [r["execution_id"] for r in eng.list_executions()["executions"]] == ["inbox-1"]
    assert eng.health()["started"] == 1
    assert eng.health()["continued_as_new"] == 2
    total = sum(len(eng.events("inbox-1", run)) for run in (1, 2, 3))
    assert total == 27


def labels() -> Any:
    return workflow(
        "PrintLabels",
        [
            step(
                "print",
                task="labels.print",
                for_each=ForEach("sku", inp("skus")),
                with_=obj(sku=e.Var("sku")),
            )
        ],
        [task("labels.print", rec(sku=Str), rec(label=Str))],
        input=rec(skus=lst(Str)),
        handlers={
            "failure": (
                step(
                    "alert",
                    "compute",
                    compute=obj(code=path_failure("code"), message=path_failure("message")),
                ),
            )
        },
    )


def test_fan_out_limit() -> None:
    """Chapter 39's labels-2, --max-fan-out 3."""
    eng = simulated_engine(limits=Limits(max_fan_out=3))
    eng.deploy(labels())
    eng.start("PrintLabels", input={"skus": ["a", "b", "c", "d"]}, execution_id="labels-2")
    assert timeline(eng, "labels-2") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     2ms   #3  StepFailed                step=print error=LIMIT_EXCEEDED `for` over 4 elements exceeds the fan-out limit of 3 (--max-fan-out or the workflow's `limits`)
+     2ms   #4  HandlersStarted           kind=failure
+     2ms   #5  StepSucceeded             step=on_failure:alert attempt=1
+     2ms   #6  WorkflowFailed            error=LIMIT_EXCEEDED step `print` failed: `for` over 4 elements exceeds the fan-out limit of 3 (--max-fan-out or the workflow's `limits`)
"""
    )
    eng.close()


def test_history_limit() -> None:
    """Chapter 39's labels-3, --max-history-events 10."""
    eng = simulated_engine(limits=Limits(max_history_events=10))
    eng.deploy(labels())
    w = Worker(eng, "printer", ["labels.print"])
    eng.start("PrintLabels", input={"skus": ["a", "b", "c"]}, execution_id="labels-3")
    for _ in range(3):
        w.run({"label": "x"})
    assert timeline(eng, "labels-3") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  StepFanOut                step=print
+     1ms   #4  StepScheduled             step=print[0] attempt=1
+     1ms   #5  StepScheduled             step=print[1] attempt=1
+     1ms   #6  StepScheduled             step=print[2] attempt=1
+   2m14s   #7  StepDispatched            step=print[0] attempt=1 worker_id=printer
+   2m15s   #8  StepSucceeded             step=print[0] attempt=1
+   2m15s   #9  StepDispatched            step=print[1] attempt=1 worker_id=printer
+   2m15s  #10  StepSucceeded             step=print[1] attempt=1
+   2m15s  #11  StepDispatched            step=print[2] attempt=1 worker_id=printer
+   2m15s  #12  StepSucceeded             step=print[2] attempt=1
+   2m15s  #13  LimitExceeded             limit=max_history_events
+   2m15s  #14  StepCancelled             step=print
+   2m15s  #15  HandlersStarted           kind=failure
+   2m15s  #16  StepSucceeded             step=on_failure:alert attempt=1
+   2m15s  #17  WorkflowFailed            error=LIMIT_EXCEEDED the execution reached 10 history events (--max-history-events or the workflow's `limits`)
"""
    )
    events = eng.history("labels-3")["events"]
    assert events[12]["message"] == (
        "the execution reached 10 history events (--max-history-events or the workflow's `limits`)"
    )
    eng.close()


def fulfilment() -> tuple[Any, Any]:
    item = rec(sku=Str, quantity=Int)
    shipping = workflow(
        "Shipping",
        [
            step(
                "quote",
                task="shipping.quote",
                with_=obj(order_id=inp("order_id"), items=inp("items")),
            ),
            step(
                "book",
                task="shipping.book",
                with_=obj(order_id=inp("order_id"), carrier=ref("quote", "carrier")),
                timeout_ms=30_000,
            ),
        ],
        [
            task("shipping.quote", rec(order_id=Str, items=Int), rec(carrier=Str, cost=Float)),
            task("shipping.book", rec(order_id=Str, carrier=Str), rec(tracking=Str)),
        ],
        input=rec(order_id=Str, items=Int),
        output=rec(carrier=Str, tracking=Str, cost=Float),
        result=obj(
            carrier=ref("quote", "carrier"),
            tracking=ref("book", "tracking"),
            cost=ref("quote", "cost"),
        ),
    )
    parent = workflow(
        "Fulfilment",
        [
            step(
                "reserve",
                task="inventory.reserve",
                for_each=ForEach("item", inp("items")),
                max_parallel=4,
                using="typescript",
                with_=obj(
                    order_id=binop("add", binop("add", inp("order_id"), "-"), var("item", "sku")),
                    items=[e.Var("item")],
                ),
                compensate=Compensation(
                    "inventory.release", obj(reservation_id=ref("reserve", "reservation_id"))
                ),
            ),
            step(
                "ship",
                "workflow",
                workflow="Shipping",
                with_=obj(order_id=inp("order_id"), items=call("len", inp("items"))),
                timeout_ms=3_600_000,
            ),
        ],
        [
            task("inventory.reserve", rec(order_id=Str, items=lst(item)), rec(reservation_id=Str)),
            task("inventory.release", rec(reservation_id=Str), rec(released=Bool)),
            child_contract(shipping),
        ],
        input=rec(order_id=Str, items=lst(item)),
        result=obj(reservations=e.StepRef("reserve"), tracking=ref("ship", "tracking")),
    )
    return shipping, parent


ITEMS: list[JsonValue] = [{"sku": "BOOK-1", "quantity": 1}, {"sku": "PEN-2", "quantity": 3}]


def test_fan_out_and_child_workflow(engine: Engine) -> None:
    """Chapter 61's ful-B-1 and ful-noship-1."""
    shipping, parent = fulfilment()
    with pytest.raises(InvalidError) as info:
        engine.deploy(parent)
    assert info.value.code == "CHILD_NOT_REGISTERED"
    engine.deploy(shipping)
    engine.deploy(parent)
    ts = Worker(
        engine, "orders-typescript", ["inventory.reserve", "inventory.release"], "typescript"
    )
    py = Worker(engine, "orders-python", ["shipping.quote", "shipping.book"])
    assert (
        Worker(engine, "other", ["inventory.reserve"]).engine.workers.poll(
            Worker(engine, "py-only", ["inventory.reserve"]).session, 0
        )
        is None
    )

    engine.start("Fulfilment", input={"order_id": "B-1", "items": ITEMS}, execution_id="ful-B-1")
    ts.run({"reservation_id": "res-B-1-BOOK-1"})
    ts.run({"reservation_id": "res-B-1-PEN-2"})
    engine.clock.advance(100)  # type: ignore[attr-defined]
    quote = py.take()
    assert quote["execution_id"] == "ful-B-1.ship"
    py.ok(quote, {"carrier": "ups", "cost": 7.5})
    py.run({"tracking": "UPS-B-1"})
    doc = engine.get("ful-B-1")
    assert doc["output"] == {
        "reservations": [
            {"reservation_id": "res-B-1-BOOK-1"},
            {"reservation_id": "res-B-1-PEN-2"},
        ],
        "tracking": "UPS-B-1",
    }
    assert doc["units"]["ship"]["worker_id"] == "orbit-runtime"
    assert doc["units"]["ship"]["worker_session"] == "child:ful-B-1.ship"
    child = engine.get("ful-B-1.ship")
    assert child["parent"] == {"execution_id": "ful-B-1", "step": "ship"}
    assert child["output"] == {"carrier": "ups", "tracking": "UPS-B-1", "cost": 7.5}

    engine.start(
        "Fulfilment", input={"order_id": "noship-1", "items": ITEMS}, execution_id="ful-noship-1"
    )
    first, second = ts.take(), ts.take()
    ts.ok(second, {"reservation_id": "r1"})
    ts.ok(first, {"reservation_id": "r0"})
    engine.clock.advance(100)  # type: ignore[attr-defined]
    py.run({"carrier": "ups", "cost": 7.5})
    py.err(py.take(), "NO_CARRIER", "no carrier serves this address", False)
    release0 = ts.take()
    assert release0["step_id"] == "compensate:reserve[0]"
    assert release0["input"] == {"reservation_id": "r0"}
    assert release0["idempotency_key"] == "ful-noship-1/compensate:reserve[0]"
    ts.ok(release0, {"released": True})
    ts.run({"released": True})
    assert timeline(engine, "ful-noship-1") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     5ms   #3  StepFanOut                step=reserve
+     5ms   #4  StepScheduled             step=ship attempt=1
+     5ms   #5  StepScheduled             step=reserve[0] attempt=1
+     5ms   #6  StepScheduled             step=reserve[1] attempt=1
+     6ms   #7  StepDispatched            step=reserve[0] attempt=1 worker_id=orders-typescript
+     9ms   #8  StepDispatched            step=reserve[1] attempt=1 worker_id=orders-typescript
+    14ms   #9  StepSucceeded             step=reserve[1] attempt=1
+    15ms  #10  StepSucceeded             step=reserve[0] attempt=1
+    16ms  #11  StepSucceeded             step=reserve attempt=1
+    51ms  #12  StepDispatched            step=ship attempt=1 worker_id=orbit-runtime
+   149ms  #13  StepAttemptFailed         step=ship attempt=1 error=NO_CARRIER child workflow `Shipping` failed: step `book` failed: no carrier serves this address
+   150ms  #14  StepFailed                step=ship error=NO_CARRIER child workflow `Shipping` failed: step `book` failed: no carrier serves this address
+   150ms  #15  CompensationStarted       reason=step `ship` failed: child workflow `Shipping` failed: step `book` failed: no carrier serves this address
+   150ms  #16  StepScheduled             step=compensate:reserve[0] attempt=1
+   151ms  #17  StepDispatched            step=compensate:reserve[0] attempt=1 worker_id=orders-typescript
+   156ms  #18  StepSucceeded             step=compensate:reserve[0] attempt=1
+   156ms  #19  StepScheduled             step=compensate:reserve[1] attempt=1
+   158ms  #20  StepDispatched            step=compensate:reserve[1] attempt=1 worker_id=orders-typescript
+   163ms  #21  StepSucceeded             step=compensate:reserve[1] attempt=1
+   163ms  #22  CompensationCompleted
+   163ms  #23  WorkflowFailed            error=NO_CARRIER step `ship` failed: child workflow `Shipping` failed: step `book` failed: no carrier serves this address
"""
    )
    assert timeline(engine, "ful-noship-1.ship") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     2ms   #3  StepScheduled             step=quote attempt=1
+     3ms   #4  StepDispatched            step=quote attempt=1 worker_id=orders-python
+    10ms   #5  StepSucceeded             step=quote attempt=1
+    11ms   #6  StepScheduled             step=book attempt=1
+    13ms   #7  StepDispatched            step=book attempt=1 worker_id=orders-python
+    18ms   #8  StepAttemptFailed         step=book attempt=1 error=NO_CARRIER no carrier serves this address
+    18ms   #9  StepFailed                step=book error=NO_CARRIER no carrier serves this address
+    18ms  #10  WorkflowFailed            error=NO_CARRIER step `book` failed: no carrier serves this address
"""
    )
    error = engine.get("ful-noship-1")["error"]
    assert error["details"] == {"child_execution_id": "ful-noship-1.ship"}
    listed = [r["execution_id"] for r in engine.list_executions()["executions"]]
    assert "ful-noship-1.ship" in listed


def test_cancelling_a_parent_cancels_its_child(engine: Engine) -> None:
    shipping, parent = fulfilment()
    engine.deploy(shipping)
    engine.deploy(parent)
    ts = Worker(engine, "ts", ["inventory.reserve", "inventory.release"], "typescript")
    engine.start("Fulfilment", input={"order_id": "c", "items": []}, execution_id="ful-c")
    engine.clock.advance(100)  # type: ignore[attr-defined]
    assert engine.get("ful-c.ship")["status"] == "RUNNING"
    engine.cancel("ful-c")
    child = engine.get("ful-c.ship")
    assert child["status"] == "CANCELLED"
    assert child["abort"] == {"kind": "cancelled", "reason": "parent workflow aborted"}
    doc = engine.get("ful-c")
    assert doc["status"] == "CANCELLED"
    assert doc["units"]["ship"]["error"]["code"] == "CHILD_CANCELLED"
    assert ts.heartbeat() == []
