"""The Engine's public API: the answers and errors the HTTP server relays
(chapters 39, 67 and 68), checked through the Python API."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from engine_kit import Bool, Int, Str, Worker, inp, obj, rec, ref, step, task, workflow

from orbit_core import ir
from orbit_core.decide import Limits
from orbit_core.engine import Engine
from orbit_core.errors import ConflictError, InvalidError, LimitError, NotFoundError
from orbit_core.ir import Signal
from orbit_core.testing import simulated_engine


def review(version: str = "1.0.0", steps: int = 1) -> ir.Definition:
    return workflow(
        "Review",
        [
            step(f"s{i}", task="review.do", with_=obj(order_id=inp("order_id")))
            for i in range(steps)
        ],
        [task("review.do", rec(order_id=Str), rec(ok=Bool))],
        input=rec(order_id=Str),
        output=rec(ok=Bool),
        result=obj(ok=ref("s0", "ok")),
        version=version,
        signals=(Signal("decision", rec(approved=Bool, note=(Str, ""))),),
    )


@pytest.fixture
def engine() -> Any:
    eng = simulated_engine()
    yield eng
    eng.close()


def test_deploy_answers_and_errors(engine: Engine) -> None:
    defn = review()
    assert engine.deploy(defn) == {
        "name": "Review",
        "version": "1.0.0",
        "definition_hash": defn.definition_hash,
        "created": True,
    }
    assert engine.deploy(ir.to_json(defn))["created"] is False
    changed = review(steps=2)
    with pytest.raises(ConflictError) as conflict:
        engine.deploy(changed)
    assert (conflict.value.code, conflict.value.message) == (
        "DEFINITION_CONFLICT",
        f"Review@1.0.0 is already registered with a different definition "
        f"({defn.definition_hash}); workflow definitions are immutable, bump the version",
    )
    document = ir.to_json(review("2.0.0"))
    document["description"] = "edited by hand"
    with pytest.raises(InvalidError) as tampered:
        engine.deploy(document)
    assert (tampered.value.code, tampered.value.message) == (
        "INVALID_IR",
        "definition_hash does not match the IR content (was the file modified?)",
    )
    with pytest.raises(InvalidError) as bad:
        engine.deploy({"ir_version": "orbit-ir/9"})
    assert bad.value.code == "INVALID_IR"
    v1_with_signals = attrs.evolve(review("3.0.0"), ir_version=ir.IR_V1)
    v1_with_signals = attrs.evolve(
        v1_with_signals, definition_hash=ir.definition_hash(v1_with_signals)
    )
    with pytest.raises(InvalidError) as v2:
        engine.deploy(v1_with_signals)
    assert v2.value.code == "INVALID_IR"


def test_workflows_are_listed_and_resolved_by_semantic_version(engine: Engine) -> None:
    for version in ("1.10.0", "1.2.0", "1.9.0"):
        engine.deploy(review(version))
    listed = engine.list_workflows()["workflows"]
    assert [w["version"] for w in listed] == ["1.2.0", "1.9.0", "1.10.0"]
    assert listed[0]["tasks"] == ["review.do"]
    assert listed[0]["steps"] == ["s0"]
    assert listed[0]["description"] is None
    assert engine.get_workflow("Review")["version"] == "1.10.0"
    assert engine.get_workflow("Review", "1.2.0")["version"] == "1.2.0"
    with pytest.raises(NotFoundError) as missing:
        engine.get_workflow("Review", "9.9.9")
    assert (missing.value.code, missing.value.message) == (
        "WORKFLOW_NOT_FOUND",
        "workflow Review@9.9.9 is not registered",
    )
    assert engine.start("Review", input={"order_id": "1"})["created"] is True
    assert engine.list_executions()["executions"][0]["version"] == "1.10.0"


def test_start_checks_in_order() -> None:
    engine = simulated_engine(limits=Limits(max_payload_bytes=40), max_active_executions=1)
    engine.deploy(review())
    with pytest.raises(InvalidError) as bad_id:
        engine.start("Review", input={"order_id": "1"}, execution_id="no spaces")
    assert bad_id.value.code == "INVALID_EXECUTION_ID"
    with pytest.raises(InvalidError) as checked_first:
        engine.start("Nope", execution_id="no spaces")
    assert checked_first.value.code == "INVALID_EXECUTION_ID"
    with pytest.raises(NotFoundError) as unknown:
        engine.start("Nope")
    assert unknown.value.message == "workflow Nope is not registered"
    assert engine.start("Review", input={"order_id": "1"}, execution_id="r-1") == {
        "execution_id": "r-1",
        "created": True,
    }
    assert engine.start("Review", input={"order_id": "2"}, execution_id="r-1") == {
        "execution_id": "r-1",
        "created": False,
    }
    with pytest.raises(LimitError) as big:
        engine.start("Review", input={"order_id": "x" * 40}, execution_id="r-2")
    assert (big.value.code, big.value.message) == (
        "PAYLOAD_TOO_LARGE",
        "execution input is 55 bytes; the limit is 40 "
        "(--max-payload-bytes or the workflow's `limits`)",
    )
    with pytest.raises(InvalidError) as invalid:
        engine.start("Review", input={"order_id": 1}, execution_id="r-2")
    assert (invalid.value.code, invalid.value.message) == (
        "INVALID_INPUT",
        "workflow input is invalid at $.order_id: expected String, found an integer",
    )
    with pytest.raises(InvalidError) as extra:
        engine.start("Review", input={"order_id": "1", "x": 1}, execution_id="r-2")
    assert extra.value.code == "INVALID_INPUT"
    with pytest.raises(LimitError) as busy:
        engine.start("Review", input={"order_id": "2"}, execution_id="r-2")
    assert (busy.value.code, busy.value.message) == (
        "RESOURCE_EXHAUSTED",
        "1 executions are already running (--max-active-executions)",
    )
    other = review("2.0.0")
    engine.deploy(other)
    with pytest.raises(ConflictError) as exists:
        engine.start("Review", "2.0.0", {"order_id": "1"}, "r-1")
    assert (exists.value.code, exists.value.message) == (
        "EXECUTION_EXISTS",
        "execution `r-1` already exists for Review@1.0.0, a different version",
    )
    engine.close()


def test_signals_queries_and_payload_limits() -> None:
    engine = simulated_engine(limits=Limits(max_payload_bytes=30))
    engine.deploy(review())
    engine.start("Review", input={"order_id": "1"}, execution_id="r-1")
    with pytest.raises(NotFoundError) as missing:
        engine.signal("nope", "decision", {})
    assert (missing.value.code, missing.value.message) == (
        "NOT_FOUND",
        "execution `nope` not found",
    )
    with pytest.raises(LimitError) as big:
        engine.signal("r-1", "decision", {"approved": True, "note": "x" * 30})
    assert big.value.message.startswith("signal payload is 57 bytes; the limit is 30")
    reply = engine.signal("r-1", "decision", {"approved": True, "extra": 1})
    assert reply["seq"] == 4
    assert engine.get("r-1")["signals"][0]["payload"] == {"approved": True, "extra": 1, "note": ""}
    with pytest.raises(NotFoundError) as noquery:
        engine.query("r-1", "status")
    assert noquery.value.message == "Review@1.0.0 declares no queries"
    w = Worker(engine, "w", ["review.do"])
    held = w.take()
    with pytest.raises(LimitError) as result:
        w.ok(held, {"ok": True, "blob": "y" * 40})
    assert result.value.message.startswith("task result is 61 bytes")
    assert engine.get("r-1")["units"]["s0"]["status"] == "DISPATCHED"  # still in flight
    assert w.ok(held, {"ok": True}) == {"accepted": True}
    assert engine.wait("r-1", 0)["output"] == {"ok": True}
    engine.close()


def test_workers_register_list_and_errors(engine: Engine) -> None:
    engine.deploy(review())
    reply = engine.workers.register(
        "py-1",
        "Python",
        [
            {"task_name": "review.do", "contract_version": "1.0.0"},
            {"task_name": "review.do", "contract_version": "0.9.0"},
        ],
        sdk="orbit-python/0.1.0",
    )
    assert reply["accepted"] is True
    assert (reply["heartbeat_interval_ms"], reply["session_timeout_ms"]) == (5000, 30000)
    assert reply["warnings"] == [
        "`review.do` is announced at version 0.9.0 but registered workflows use 1.0.0; "
        "this worker will not receive those tasks"
    ]
    for contracts, code in (
        ([("orbit.http.request", "1.0.0")], "RESERVED_TASK"),
        ([("workflow:Review", "1.0.0")], "RESERVED_TASK"),
        ([], "INVALID_REQUEST"),
    ):
        with pytest.raises(InvalidError) as refused:
            engine.workers.register("x", "python", contracts)
        assert refused.value.code == code
    with pytest.raises(InvalidError):
        engine.workers.register(" ", "python", [("review.do", "1.0.0")])
    engine.start("Review", input={"order_id": "1"}, execution_id="r-1")
    assert engine.workers.poll(reply["worker_session_id"], 0) is not None
    workers = engine.workers.list()["workers"]
    assert workers == [
        {
            "worker_id": "py-1",
            "runtime": "python",
            "sdk": "orbit-python/0.1.0",
            "contracts": [
                {"task_name": "review.do", "contract_version": "1.0.0"},
                {"task_name": "review.do", "contract_version": "0.9.0"},
            ],
            "last_seen_ms": engine.clock.now_ms(),
            "registered_at_ms": engine.clock.now_ms(),
            "online": True,
            "sessions": 1,
            "inflight": 1,
        }
    ]
    with pytest.raises(NotFoundError) as gone:
        engine.workers.poll("nope", 0)
    assert gone.value.code == "UNKNOWN_SESSION"
    with pytest.raises(NotFoundError) as unknown:
        engine.workers.unregister("nope")
    assert unknown.value.message == "unknown worker session"
    assert engine.workers.complete("nope", {}) == {
        "accepted": False,
        "reason": "unknown token (execution finished or token invalid)",
    }
    with pytest.raises(InvalidError):
        engine.workers.complete("", {})
    with pytest.raises(InvalidError):
        engine.workers.fail("tok", "")
    health = engine.health()
    assert (health["active_executions"], health["worker_sessions"]) == (1, 1)


def test_wait_returns_at_the_timeout_with_the_current_state(engine: Engine) -> None:
    engine.deploy(review())
    engine.start("Review", input={"order_id": "1"}, execution_id="r-1")
    assert engine.wait("r-1", 10)["status"] == "RUNNING"
    with pytest.raises(NotFoundError):
        engine.wait("nope", 10)
    with pytest.raises(NotFoundError):
        engine.history("nope")
    history = engine.history("r-1")
    assert list(history) == ["execution_id", "events"]  # no `run` for run 1 unless asked
    assert [e["seq"] for e in history["events"]] == [1, 2, 3]
    assert engine.history("r-1", 1)["run"] == 1


def test_history_limit_counts_each_run(engine: Engine) -> None:
    del engine
    eng = simulated_engine(limits=Limits(max_history_events=2))
    eng.deploy(review())
    eng.start("Review", input={"order_id": "1"}, execution_id="r-1")
    doc = eng.get("r-1")
    assert (doc["status"], doc["error"]["code"]) == ("FAILED", "LIMIT_EXCEEDED")
    assert doc["units"]["s0"]["status"] == "CANCELLED"
    eng.close()


def test_input_int_field(engine: Engine) -> None:
    wf = workflow(
        "Count",
        [step("c", "compute", compute=inp("n"))],
        [],
        input=rec(n=(Int, 3)),
        output=Int,
        result=ref("c"),
    )
    engine.deploy(wf)
    engine.start("Count", execution_id="c-1")
    assert engine.get("c-1")["output"] == 3


def test_waiting_for_says_whether_any_connected_worker_serves_the_task(engine: Engine) -> None:
    defn = workflow(
        "Greet",
        [step("compose", task="greeting.compose", using="typescript")],
        [task("greeting.compose")],
    )
    engine.deploy(defn)
    engine.start("Greet", execution_id="g-1")
    waiting = engine.get("g-1")["waiting_for"]
    assert waiting == [
        {
            "task": "greeting.compose",
            "contract_version": "1.0.0",
            "runtime": "typescript",
            "units": ["compose"],
            "queued": 1,
            "since_ms": waiting[0]["since_ms"],
            "serving": 0,
            "workers": [],
        }
    ]
    # A Python worker for the task is connected, but the step asks for TypeScript.
    engine.workers.register("py-1", "python", [("greeting.compose", "1.0.0")])
    engine.workers.register("ts-old", "typescript", [("greeting.compose", "0.9.0")])
    (entry,) = engine.get("g-1")["waiting_for"]
    assert entry["serving"] == 0
    assert entry["workers"] == [
        {"worker_id": "py-1", "runtime": "python", "contract_version": "1.0.0"},
        {"worker_id": "ts-old", "runtime": "typescript", "contract_version": "0.9.0"},
    ]
    engine.workers.register("ts-1", "TypeScript", [("greeting.compose", "1.0.0")])
    assert engine.get("g-1")["waiting_for"][0]["serving"] == 1
    # Once dispatched, nothing waits.
    session = engine.workers.register("ts-2", "typescript", [("greeting.compose", "1.0.0")])
    assert engine.workers.poll(session["worker_session_id"], 0) is not None
    assert "waiting_for" not in engine.get("g-1")
