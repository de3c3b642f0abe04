"""The book's example histories for task steps, retries, compensation,
cancellation and delivery (chapters 04, 15, 40, 42, 59, 68), event by event."""

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
    inp,
    lst,
    obj,
    parse_book,
    plain,
    rec,
    ref,
    step,
    task,
    timeline,
    times,
    workflow,
)

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.errors import ConflictError
from orbit_core.ir import Compensation, Retry
from orbit_core.jsontypes import JsonObject
from orbit_core.state import fold
from orbit_core.testing import SimulatedClock, simulated_engine

LINE_ITEM = rec(sku=Str, quantity=Int)
ORDER_CONTRACTS = [
    task("orders.validate", rec(order_id=Str, amount=Float, items=lst(LINE_ITEM)), rec(valid=Bool)),
    task("risk.analyze", rec(customer_id=Str, amount=Float), rec(score=Float)),
    task("inventory.reserve", rec(order_id=Str, items=lst(LINE_ITEM)), rec(reservation_id=Str)),
    task("inventory.release", rec(reservation_id=Str), rec(released=Bool)),
    task("payments.charge", rec(order_id=Str, amount=Float, currency=Str), rec(transaction_id=Str)),
    task("payments.refund", rec(transaction_id=Str, amount=Float), rec(refunded=Bool)),
    task("notifications.send", rec(customer_id=Str, message=Str), rec(delivered=Bool)),
]


def order_processing(charge_compensated: bool = False) -> Any:
    """examples/order_processing.orbit, as far as the engine can tell."""
    refund = Compensation(
        "payments.refund",
        obj(transaction_id=ref("process_payment", "transaction_id"), amount=inp("amount")),
    )
    return workflow(
        "OrderProcessing",
        [
            step(
                "validate_order",
                task="orders.validate",
                with_=obj(order_id=inp("order_id"), amount=inp("amount"), items=inp("items")),
            ),
            step(
                "analyze_risk",
                task="risk.analyze",
                with_=obj(customer_id=inp("customer_id"), amount=inp("amount")),
                retry=Retry(attempts=3),
            ),
            step(
                "reserve_inventory",
                task="inventory.reserve",
                after=["validate_order"],
                with_=obj(order_id=inp("order_id"), items=inp("items")),
                compensate=Compensation(
                    "inventory.release",
                    obj(reservation_id=ref("reserve_inventory", "reservation_id")),
                ),
            ),
            step(
                "process_payment",
                task="payments.charge",
                after=["reserve_inventory", "analyze_risk"],
                with_=obj(order_id=inp("order_id"), amount=inp("amount"), currency=inp("currency")),
                idempotency_key=binop("add", "charge-", inp("order_id")),
                timeout_ms=30_000,
                compensate=refund if charge_compensated else None,
            ),
            step(
                "send_notification",
                task="notifications.send",
                after=["process_payment"],
                with_=obj(customer_id=inp("customer_id"), message="Order received"),
            ),
        ],
        ORDER_CONTRACTS,
        input=rec(
            order_id=Str, customer_id=Str, amount=Float, currency=(Str, "USD"), items=lst(LINE_ITEM)
        ),
        output=rec(status=Str, transaction_id=Str),
        result=obj(status="completed", transaction_id=ref("process_payment", "transaction_id")),
    )


ORDER_INPUT: JsonObject = {
    "order_id": "1002",
    "customer_id": "c-42",
    "amount": 99.5,
    "items": [{"sku": "BOOK-1", "quantity": 1}],
}


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine(session_timeout_ms=5000)
    yield eng
    eng.close()


def test_order_1002_retry_duplicate_decline_and_compensation(engine: Engine) -> None:
    """Chapter 40's example history of order-1002."""
    engine.deploy(order_processing())
    ts = Worker(engine, "ts-1", ["orders.validate", "inventory.reserve", "inventory.release"])
    py = Worker(engine, "py-1", ["risk.analyze", "payments.charge"])
    engine.start("OrderProcessing", input=ORDER_INPUT, execution_id="order-1002")
    validate = ts.take()
    assert ts.ok(validate, {"valid": True}) == {"accepted": True}
    assert ts.ok(validate, {"valid": True}) == {
        "accepted": False,
        "reason": "duplicate result; step already resolved",
    }
    risk = py.take()
    py.err(risk, "RISK_UNAVAILABLE", "scoring service returned 503")
    ts.run({"reservation_id": "res-77"})
    engine.clock.advance(1000)  # type: ignore[attr-defined]
    py.run({"score": 0.12})
    charge = py.take()
    assert charge["idempotency_key"] == "charge-1002"
    assert charge["timeout_ms"] == 30_000
    py.err(
        charge, "CARD_DECLINED", "card was declined", False, {"decline_code": "insufficient_funds"}
    )
    ts.run({"released": True})
    assert timeline(engine, "order-1002") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  StepScheduled             step=validate_order attempt=1
+     1ms   #4  StepScheduled             step=analyze_risk attempt=1
+    11ms   #5  StepDispatched            step=validate_order attempt=1 worker_id=ts-1
+    14ms   #6  StepSucceeded             step=validate_order attempt=1
+    15ms   #7  StepScheduled             step=reserve_inventory attempt=1
+    17ms   #8  StaleResultIgnored        step=validate_order outcome=duplicate
+    21ms   #9  StepDispatched            step=analyze_risk attempt=1 worker_id=py-1
+    23ms  #10  StepAttemptFailed         step=analyze_risk attempt=1 error=RISK_UNAVAILABLE scoring service returned 503
+    24ms  #11  RetryScheduled            step=analyze_risk delay_ms=1000
+    33ms  #12  StepDispatched            step=reserve_inventory attempt=1 worker_id=ts-1
+    35ms  #13  StepSucceeded             step=reserve_inventory attempt=1
+    1.0s  #14  StepScheduled             step=analyze_risk attempt=2
+    1.3s  #15  StepDispatched            step=analyze_risk attempt=2 worker_id=py-1
+    1.3s  #16  StepSucceeded             step=analyze_risk attempt=2
+    1.3s  #17  StepScheduled             step=process_payment attempt=1
+    1.6s  #18  StepDispatched            step=process_payment attempt=1 worker_id=py-1
+    1.6s  #19  StepAttemptFailed         step=process_payment attempt=1 error=CARD_DECLINED card was declined
+    1.6s  #20  StepFailed                step=process_payment error=CARD_DECLINED card was declined
+    1.6s  #21  StepCancelled             step=send_notification
+    1.6s  #22  CompensationStarted       reason=step `process_payment` failed: card was declined
+    1.6s  #23  StepScheduled             step=compensate:reserve_inventory attempt=1
+    1.6s  #24  StepDispatched            step=compensate:reserve_inventory attempt=1 worker_id=ts-1
+    1.6s  #25  StepSucceeded             step=compensate:reserve_inventory attempt=1
+    1.6s  #26  CompensationCompleted
+    1.6s  #27  WorkflowFailed            error=CARD_DECLINED step `process_payment` failed: card was declined
"""
    )
    events: list[Any] = [ev.to_json(x) for x in engine.events("order-1002")]  # JSON
    base = events[0]["timestamp_ms"]
    assert {k: v for k, v in events[10].items() if k != "timestamp_ms"} == {
        "seq": 11,
        "type": "RetryScheduled",
        "step": "analyze_risk",
        "next_attempt": 2,
        "delay_ms": 1000,
        "fire_at_ms": base + 1000,
    }
    assert events[16]["input"] == {"order_id": "1002", "amount": 99.5, "currency": "USD"}
    assert events[16]["idempotency_key"] == "charge-1002"
    assert events[16]["redelivery"] is False
    assert events[17]["deadline_ms"] == events[17]["timestamp_ms"] + 30_000
    assert events[21]["steps"] == ["reserve_inventory"]
    assert events[26]["error"] == {
        "code": "CARD_DECLINED",
        "message": "step `process_payment` failed: card was declined",
        "retryable": False,
        "details": {"decline_code": "insufficient_funds"},
    }
    assert events[26]["compensation"] == "completed"
    doc: Any = engine.get("order-1002")  # JSON, looked into below
    assert doc["status"] == "FAILED"
    assert doc["compensation"] == "completed"
    assert doc["compensation_order"] == ["reserve_inventory"]
    assert doc["abort"] == {"kind": "failed", "error": events[26]["error"]}
    assert doc["error"] == events[26]["error"]
    assert doc["units"]["send_notification"] == {
        "status": "CANCELLED",
        "attempt": 0,
        "redelivery": False,
        "finished_at_ms": doc["finished_at_ms"],
        "dispatch_count": 0,
    }
    payment = doc["units"]["process_payment"]
    assert payment["status"] == "FAILED"
    assert payment["idempotency_key"] == "charge-1002"
    assert payment["tokens"] == [[charge["token"], 1]]
    assert payment["last_error"] == payment["error"]
    assert doc["input"]["currency"] == "USD"
    assert doc["last_seq"] == 27


def test_hello_retry_then_compensation(engine: Engine) -> None:
    """Chapter 04: a retry after 500 ms, then a failure that compensates `publish`."""
    contracts = [
        task("greeting.compose", rec(name=Str), rec(message=Str)),
        task("greeting.decorate", rec(message=Str, excitement=Int), rec(text=Str)),
        task("greeting.publish", rec(text=Str), rec(url=Str)),
        task("greeting.unpublish", rec(url=Str), rec(removed=Bool)),
        task("greeting.notify", rec(text=Str), rec(sent=Bool)),
    ]
    hello = workflow(
        "Hello",
        [
            step(
                "compose",
                task="greeting.compose",
                with_=obj(name=inp("name")),
                retry=Retry(attempts=3, initial_delay_ms=500),
            ),
            step(
                "decorate",
                task="greeting.decorate",
                with_=obj(message=ref("compose", "message"), excitement=inp("excitement")),
            ),
            step(
                "publish",
                task="greeting.publish",
                with_=obj(text=ref("decorate", "text")),
                compensate=Compensation("greeting.unpublish", obj(url=ref("publish", "url"))),
            ),
            step(
                "notify",
                task="greeting.notify",
                with_=obj(text=ref("decorate", "text")),
                after=["publish"],
            ),
        ],
        contracts,
        input=rec(name=Str, excitement=(Int, 3)),
    )
    engine.deploy(hello)
    w = Worker(engine, "hello-python", [c.name for c in contracts])
    engine.start("Hello", input={"name": "Ada"}, execution_id="hello-2")
    w.err(w.take(), "NAME_SERVICE_BUSY", "try again shortly")
    engine.clock.advance(500)  # type: ignore[attr-defined]
    w.run({"message": "Hello, Ada"})
    decorate = w.take()
    assert decorate["input"] == {"message": "Hello, Ada", "excitement": 3}
    w.ok(decorate, {"text": "Hello, Ada!!!"})
    w.run({"url": "https://example.com/1"})
    w.err(w.take(), "MESSAGE_TOO_LONG", "48 characters", False)
    unpublish = w.take()
    assert (
        unpublish["step_id"] == "compose"
        or unpublish["idempotency_key"] == "hello-2/compensate:publish"
    )
    w.ok(unpublish, {"removed": True})
    assert timeline(engine, "hello-2") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     2ms   #3  StepScheduled             step=compose attempt=1
+     3ms   #4  StepDispatched            step=compose attempt=1 worker_id=hello-python
+     7ms   #5  StepAttemptFailed         step=compose attempt=1 error=NAME_SERVICE_BUSY try again shortly
+     8ms   #6  RetryScheduled            step=compose delay_ms=500
+   508ms   #7  StepScheduled             step=compose attempt=2
+   511ms   #8  StepDispatched            step=compose attempt=2 worker_id=hello-python
+   517ms   #9  StepSucceeded             step=compose attempt=2
+   518ms  #10  StepScheduled             step=decorate attempt=1
+   519ms  #11  StepDispatched            step=decorate attempt=1 worker_id=hello-python
+   523ms  #12  StepSucceeded             step=decorate attempt=1
+   524ms  #13  StepScheduled             step=publish attempt=1
+   526ms  #14  StepDispatched            step=publish attempt=1 worker_id=hello-python
+   530ms  #15  StepSucceeded             step=publish attempt=1
+   531ms  #16  StepScheduled             step=notify attempt=1
+   535ms  #17  StepDispatched            step=notify attempt=1 worker_id=hello-python
+   539ms  #18  StepAttemptFailed         step=notify attempt=1 error=MESSAGE_TOO_LONG 48 characters
+   540ms  #19  StepFailed                step=notify error=MESSAGE_TOO_LONG 48 characters
+   540ms  #20  CompensationStarted       reason=step `notify` failed: 48 characters
+   540ms  #21  StepScheduled             step=compensate:publish attempt=1
+   542ms  #22  StepDispatched            step=compensate:publish attempt=1 worker_id=hello-python
+   548ms  #23  StepSucceeded             step=compensate:publish attempt=1
+   549ms  #24  CompensationCompleted
+   549ms  #25  WorkflowFailed            error=MESSAGE_TOO_LONG step `notify` failed: 48 characters
"""
    )
    assert times(engine, "hello-2")[6] == 500


def test_retries_exhausted_with_exponential_backoff_on_a_builtin_task() -> None:
    """Chapter 15: three attempts from 100 ms, run by the runtime itself."""

    class RefusingAdapter:
        def supports(self, task_name: str) -> bool:
            return task_name == "orbit.http.request"

        def run(self, task_name: str, input: Any, timeout_ms: Any, done: Any) -> None:
            done(
                None,
                ev.make_error(
                    "HTTP_ERROR", "request failed: io: Connection refused (os error 111)", True
                ),
            )

    http = task(
        "orbit.http.request",
        rec(method=(Str, "GET"), url=Str),
        rec(status=Int),
    )
    wf = workflow(
        "Broken",
        [
            step(
                "broken",
                task="orbit.http.request",
                with_=obj(url="http://127.0.0.1:7999/"),
                retry=Retry(attempts=3, backoff="exponential", initial_delay_ms=100),
            )
        ],
        [http],
    )
    engine = simulated_engine(builtins=RefusingAdapter())
    engine.deploy(wf)
    engine.start("Broken", execution_id="broken-1")
    _settle(engine)
    for delay in (100, 200):
        engine.clock.advance(delay)  # type: ignore[attr-defined]
        _settle(engine)
    lines = timeline(engine, "broken-1")
    assert lines[2:14] == parse_book(
        """
+   106ms   #9  StepScheduled             step=broken attempt=1
+   201ms  #10  StepDispatched            step=broken attempt=1 worker_id=orbit-runtime
+   203ms  #11  StepAttemptFailed         step=broken attempt=1 error=HTTP_ERROR request failed: io: Connection refused (os error 111)
+   205ms  #12  RetryScheduled            step=broken delay_ms=100
+   401ms  #13  StepScheduled             step=broken attempt=2
+   403ms  #14  StepDispatched            step=broken attempt=2 worker_id=orbit-runtime
+   406ms  #15  StepAttemptFailed         step=broken attempt=2 error=HTTP_ERROR request failed: io: Connection refused (os error 111)
+   407ms  #16  RetryScheduled            step=broken delay_ms=200
+   701ms  #17  StepScheduled             step=broken attempt=3
+   702ms  #18  StepDispatched            step=broken attempt=3 worker_id=orbit-runtime
+   704ms  #19  StepAttemptFailed         step=broken attempt=3 error=HTTP_ERROR request failed: io: Connection refused (os error 111)
+   705ms  #20  StepFailed                step=broken error=HTTP_ERROR request failed: io: Connection refused (os error 111) (gave up after 3 attempts)
"""
    )
    assert engine.get("broken-1")["units"]["broken"]["worker_session"].startswith("builtin:")
    engine.close()


def _settle(engine: Engine) -> None:
    """Lets built-in tasks, which report from their own threads, finish."""
    import time

    for _ in range(200):
        state = engine.get(engine.list_executions()["executions"][0]["execution_id"])
        if all(u.get("status") != "DISPATCHED" for u in state["units"].values()):
            return
        time.sleep(0.005)


def test_adapter_disabled_fails_without_retry(engine: Engine) -> None:
    """Chapter 62: with the adapter off, the step fails at once."""
    http = task("orbit.http.request", rec(url=Str), rec(status=Int))
    wf = workflow(
        "HttpPing",
        [
            step(
                "probe",
                task="orbit.http.request",
                with_=obj(url=inp("url")),
                retry=Retry(attempts=3),
            )
        ],
        [http],
        input=rec(url=Str),
    )
    engine.deploy(wf)
    engine.start("HttpPing", input={"url": "http://example.invalid"}, execution_id="ping-1")
    doc = engine.get("ping-1")
    assert doc["status"] == "FAILED"
    assert doc["error"]["code"] == "ADAPTER_DISABLED"
    assert doc["error"]["message"] == (
        "step `probe` failed: the HTTP adapter is disabled; start the server with "
        "--enable-http-adapter"
    )
    assert doc["units"]["probe"]["worker_id"] == "orbit-runtime"


def test_silent_worker_is_redelivered_and_its_late_success_accepted(engine: Engine) -> None:
    """Chapter 42's u-1: --session-timeout 5, flaky-1 goes silent."""
    engine.deploy(plain())
    flaky1 = Worker(engine, "flaky-1", ["demo.work"])
    engine.start("Plain", input={"n": 1}, execution_id="u-1")
    first = flaky1.take()
    flaky2 = Worker(engine, "flaky-2", ["demo.work"])
    for _ in range(51):
        engine.clock.advance(100)  # type: ignore[attr-defined]
        flaky2.heartbeat()
    second = flaky2.take()
    assert {k: v for k, v in second.items() if k != "token"} == {
        "execution_id": "u-1",
        "workflow": "Plain",
        "workflow_version": "1.0.0",
        "step_id": "work",
        "task_name": "demo.work",
        "contract_version": "1.0.0",
        "input": {"n": 1},
        "idempotency_key": "u-1/work",
        "attempt": 1,
        "redelivery": True,
    }
    assert flaky1.ok(first, {"ok": True}) == {"accepted": True}
    assert flaky2.heartbeat() == [second["token"]]
    assert flaky2.heartbeat() == []
    assert timeline(engine, "u-1") == parse_book(
        """
+     0ms   #1  WorkflowCreated
+     0ms   #2  WorkflowStarted
+     1ms   #3  StepScheduled             step=work attempt=1
+    39ms   #4  StepDispatched            step=work attempt=1 worker_id=flaky-1
+    5.1s   #5  StepAttemptUncertain      step=work attempt=1 reason=worker `flaky-1` stopped responding
+    5.1s   #6  StepScheduled             step=work attempt=1 redelivery=true
+    6.6s   #7  StepDispatched            step=work attempt=1 worker_id=flaky-2
+    6.7s   #8  StepSucceeded             step=work attempt=1
+    6.7s   #9  WorkflowCompleted
"""
    )
    assert flaky2.ok(second, {"ok": True}) == {
        "accepted": False,
        "reason": "unknown token (execution finished or token invalid)",
    }


def greet(**retry: Any) -> Any:
    return workflow(
        "Greet",
        [
            step(
                "compose",
                task="greeting.compose",
                using="ruby",
                with_=obj(name=inp("name")),
                timeout_ms=30_000,
                retry=Retry(attempts=3, non_retryable=("INVALID_NAME",), **retry),
            )
        ],
        [task("greeting.compose", rec(name=Str), rec(message=Str))],
        input=rec(name=Str),
        output=rec(message=Str),
        result=obj(message=ref("compose", "message")),
    )


def test_worker_protocol_transcript(engine: Engine) -> None:
    """Chapter 68's curl session: stale failures, contract violations,
    non-retryable codes, cancellation and unregistering."""
    engine.deploy(greet())
    ruby = Worker(engine, "ruby-1", ["greeting.compose"], runtime="ruby")
    python = Worker(engine, "py-1", ["greeting.compose"], runtime="python")
    engine.start("Greet", input={"name": "Ada"}, execution_id="greet-ada")
    assert engine.workers.poll(python.session, 0) is None  # `using ruby`
    first = ruby.take()
    assert first["deadline_ms"] == engine.clock.now_ms() + 30_000
    assert ruby.heartbeat() == []
    assert ruby.err(first, "GREETER_BUSY", "try again later", True, {"queue_depth": 42}) == {
        "accepted": True
    }
    engine.clock.advance(1000)  # type: ignore[attr-defined]
    second = ruby.take()
    assert (second["attempt"], second["idempotency_key"]) == (2, "greet-ada/compose")
    assert second["token"] != first["token"]
    assert ruby.err(first, "X") == {"accepted": False, "reason": "stale attempt"}
    assert ruby.ok(second, {"message": "Hello, Ada"}) == {"accepted": True}
    assert engine.wait("greet-ada", 0)["output"] == {"message": "Hello, Ada"}
    assert timeline(engine, "greet-ada")[-3] == "StaleResultIgnored step=compose outcome=failure"

    engine.start("Greet", input={"name": ""}, execution_id="greet-blank")
    ruby.err(ruby.take(), "INVALID_NAME", "name is blank")
    doc = engine.get("greet-blank")
    assert (doc["status"], doc["error"]["code"]) == ("FAILED", "INVALID_NAME")
    assert doc["error"]["message"] == "step `compose` failed: name is blank"
    assert doc["units"]["compose"]["attempt"] == 1

    engine.start("Greet", input={"name": "Bo"}, execution_id="greet-bad")
    assert ruby.ok(ruby.take(), {"msg": 1}) == {
        "accepted": False,
        "reason": "output violates the task contract",
    }
    doc = engine.get("greet-bad")
    assert doc["error"]["code"] == "OUTPUT_CONTRACT_VIOLATION"
    assert doc["error"]["message"] == (
        "step `compose` failed: worker output for `greeting.compose` does not match its "
        "contract at $.message: missing required field `message` of type String"
    )

    engine.start("Greet", input={"name": "Cy"}, execution_id="greet-cancel")
    held = ruby.take()
    assert engine.cancel("greet-cancel", "customer withdrew")["status"] == "RUNNING"
    assert ruby.heartbeat() == [held["token"]]
    assert ruby.heartbeat() == []

    engine.start("Greet", input={"name": "Di"}, execution_id="greet-redeliver")
    lost = ruby.take()
    assert engine.workers.unregister(ruby.session) == {"accepted": True}
    again = Worker(engine, "ruby-1", ["greeting.compose"], runtime="ruby")
    redelivered = again.take()
    assert (redelivered["attempt"], redelivered["redelivery"]) == (1, True)
    assert engine.workers.complete(lost["token"], {"message": "Hello, Di"}) == {"accepted": True}
    assert engine.get("greet-redeliver")["status"] == "COMPLETED"
    assert "StepAttemptUncertain step=compose attempt=1 reason=worker unregistered" in timeline(
        engine, "greet-redeliver"
    )
    from orbit_core.errors import NotFoundError

    with pytest.raises(NotFoundError) as info:
        engine.workers.heartbeat(ruby.session)
    assert info.value.code == "UNKNOWN_SESSION"


def test_cancel_while_charging_compensates_newest_first(engine: Engine) -> None:
    """Chapter 59: cancel during a 3 s charge; the late success is compensated."""
    engine.deploy(order_processing(charge_compensated=True))
    ts = Worker(
        engine, "orders-typescript", ["orders.validate", "inventory.reserve", "inventory.release"]
    )
    py = Worker(engine, "orders-python", ["risk.analyze", "payments.charge", "payments.refund"])
    engine.start("OrderProcessing", input=ORDER_INPUT, execution_id="order-2001")
    ts.run({"valid": True})
    py.run({"score": 0.1})
    ts.run({"reservation_id": "res-1"})
    charge = py.take()
    engine.clock.advance(1000)  # type: ignore[attr-defined]
    doc = engine.cancel("order-2001")
    assert doc["status"] == "RUNNING"
    assert engine.cancel("order-2001")["last_seq"] == doc["last_seq"]  # idempotent
    engine.clock.advance(2000)  # type: ignore[attr-defined]
    assert py.ok(charge, {"transaction_id": "tx-9"}) == {"accepted": True}
    refund = py.take()
    assert refund["input"] == {"transaction_id": "tx-9", "amount": 99.5}
    assert refund["idempotency_key"] == "order-2001/compensate:process_payment"
    py.ok(refund, {"refunded": True})
    ts.run({"released": True})
    assert timeline(engine, "order-2001")[11:] == parse_book(
        """
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
"""
    )
    doc = engine.get("order-2001")
    assert (doc["status"], doc["compensation"]) == ("CANCELLED", "completed")
    assert doc["abort"] == {"kind": "cancelled", "reason": "requested via API"}
    with pytest.raises(ConflictError) as info:
        engine.cancel("order-2001")
    assert (info.value.code, info.value.message) == (
        "EXECUTION_FINISHED",
        "execution is already CANCELLED",
    )


def test_step_timeout_then_late_success_is_accepted() -> None:
    """Chapter 15: a timed-out attempt's late success counts while unresolved."""
    engine = simulated_engine(session_timeout_ms=60_000)
    engine.deploy(greet(initial_delay_ms=1000))
    ruby = Worker(engine, "ruby-1", ["greeting.compose"], runtime="ruby")
    engine.start("Greet", input={"name": "Ada"}, execution_id="slow-1")
    first = ruby.take()
    engine.clock.advance(30_000)  # type: ignore[attr-defined]
    assert ruby.heartbeat() == [first["token"]]
    lines = timeline(engine, "slow-1")
    assert lines[-2:] == [
        "StepAttemptFailed step=compose attempt=1 error=TIMEOUT attempt timed out after 30000ms",
        "RetryScheduled step=compose delay_ms=1000",
    ]
    assert ruby.ok(first, {"message": "late"}) == {"accepted": True}
    assert engine.get("slow-1")["output"] == {"message": "late"}


def test_queue_timeout_fails_without_retry(engine: Engine) -> None:
    wf = workflow(
        "Queue",
        [
            step(
                "compose",
                task="greeting.compose",
                queue_timeout_ms=120_000,
                retry=Retry(attempts=3),
                with_=obj(name="x"),
            )
        ],
        [task("greeting.compose", rec(name=Str), rec(message=Str))],
    )
    engine.deploy(wf)
    engine.start("Queue", execution_id="q-1")
    engine.clock.advance(120_000)  # type: ignore[attr-defined]
    doc = engine.get("q-1")
    assert doc["error"]["code"] == "QUEUE_TIMEOUT"
    assert doc["error"]["message"] == (
        "step `compose` failed: no worker picked up the task before queue_timeout"
    )


def test_fold_of_history_equals_live_state(engine: Engine) -> None:
    engine.deploy(order_processing())
    ts = Worker(engine, "ts-1", ["orders.validate", "inventory.reserve", "inventory.release"])
    engine.start("OrderProcessing", input=ORDER_INPUT, execution_id="o-1")
    ts.run({"valid": True})
    live = engine.state("o-1")
    assert fold(engine.events("o-1"), "o-1").to_json() == live.to_json()
    clock = engine.clock
    assert isinstance(clock, SimulatedClock)
