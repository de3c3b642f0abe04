"""What a per-worker identity may do (chapter 45), through the HTTP app: it
registers only under its own id, for tasks its patterns allow, with its
runtime; it uses only its own sessions and reports only tokens issued to it.
Every refusal is 403 FORBIDDEN with the book's message and changes nothing:
no history event, no registration, no session lost."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import falcon.testing
import pytest

from orbit_core import ir
from orbit_core.engine import Engine
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_server import identities
from orbit_server.app import create_app
from orbit_server.config import ServerConfig
from orbit_store.sqlite import SqliteStore

ADMIN, SHARED = "admin-token-0123456789", "shared-worker-token-0123456789"
PAYMENTS = "p" * 64


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


FILE = {
    "worker": [
        {
            "id": "payments-1",
            "token_sha256": _digest(PAYMENTS).upper(),  # the case does not matter
            "tasks": ["payments.*", "audit.log"],
            "runtime": "Python",
        }
    ]
}


def _definition() -> ir.Definition:
    empty = t.RecordType(())
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="Charge",
        version="1.0.0",
        input=empty,
        output=empty,
        steps=(ir.Step("charge", "task", task="payments.charge", with_=e.Object(())),),
        result=e.Object(()),
        contracts={"payments.charge": ir.TaskContract("payments.charge", "1.0.0", empty, empty)},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


class Api:
    def __init__(self, engine: Engine) -> None:
        config = ServerConfig(token=ADMIN, worker_token=SHARED, identities=identities.parse(FILE))
        self.client = falcon.testing.TestClient(create_app(engine, config))

    def post(self, path: str, token: str, body: Any) -> falcon.testing.Result:
        return self.client.simulate_post(
            path, json=body, headers={"authorization": f"Bearer {token}"}
        )

    def register(self, token: str, worker_id: str, *tasks: str, runtime: str = "python") -> Any:
        contracts = [{"task_name": task, "contract_version": "1.0.0"} for task in tasks]
        body = {"worker_id": worker_id, "runtime": runtime, "contracts": contracts}
        return self.post("/v1/workers/register", token, body)

    def state(self) -> Any:
        headers = {"authorization": f"Bearer {ADMIN}"}
        return (
            self.client.simulate_get("/v1/executions/c-1/history", headers=headers).json,
            self.client.simulate_get("/v1/workers", headers=headers).json,
        )


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine(auto_tick=False)
    engine.deploy(_definition())
    yield engine
    engine.close()


def _forbidden(reply: falcon.testing.Result, message: str) -> None:
    assert reply.status_code == 403, reply.text
    assert reply.json == {"error": {"code": "FORBIDDEN", "message": message}}


def test_registration_is_limited_to_the_identity_s_id_tasks_and_runtime(engine: Engine) -> None:
    api = Api(engine)
    before = api.client.simulate_get(
        "/v1/workers", headers={"authorization": f"Bearer {ADMIN}"}
    ).json
    _forbidden(
        api.register(PAYMENTS, "other", "payments.charge"),
        "this credential belongs to worker `payments-1`, not `other`",
    )
    _forbidden(
        api.register(PAYMENTS, "payments-1", "payments.charge", "inventory.reserve", "x.y"),
        "worker `payments-1` may not serve: inventory.reserve, x.y "
        "(allowed: payments.*, audit.log)",
    )
    _forbidden(
        api.register(PAYMENTS, "payments-1", "audit.log", runtime="node"),
        "worker `payments-1` must announce runtime `python`",
    )
    after = api.client.simulate_get(
        "/v1/workers", headers={"authorization": f"Bearer {ADMIN}"}
    ).json
    assert before == after == {"workers": []}
    # Its own id, allowed tasks, its runtime in any case.
    reply = api.register(PAYMENTS, "payments-1", "payments.charge", "audit.log", runtime="PYTHON")
    assert reply.status_code == 200
    # The shared token may register under any id, for any task.
    assert api.register(SHARED, "payments-1", "inventory.reserve").status_code == 200


def test_another_worker_s_sessions_and_tokens_are_refused_and_change_nothing(
    engine: Engine,
) -> None:
    api = Api(engine)
    mine = api.register(PAYMENTS, "payments-1", "payments.charge").json["worker_session_id"]
    other = api.register(SHARED, "other", "payments.charge").json["worker_session_id"]
    engine.start("Charge", input={}, execution_id="c-1")
    task = api.post("/v1/workers/poll", SHARED, {"worker_session_id": other, "wait_ms": 0}).json
    token = task["token"]
    before = api.state()

    for action in ("heartbeat", "poll", "unregister"):
        _forbidden(
            api.post(f"/v1/workers/{action}", PAYMENTS, {"worker_session_id": other}),
            "session belongs to worker `other`, not `payments-1`",
        )
    _forbidden(
        api.post("/v1/tasks/complete", PAYMENTS, {"token": token, "output": {}}),
        "task token was issued to worker `other`, not `payments-1`",
    )
    _forbidden(
        api.post("/v1/tasks/fail", PAYMENTS, {"token": token, "error_code": "NOPE"}),
        "task token was issued to worker `other`, not `payments-1`",
    )
    assert api.state() == before
    # Its own session works, and the other worker's session and token too.
    ok = api.post("/v1/workers/heartbeat", PAYMENTS, {"worker_session_id": mine})
    assert ok.status_code == 200
    beat = api.post("/v1/workers/heartbeat", SHARED, {"worker_session_id": other})
    assert beat.json == {"accepted": True, "cancel": []}
    done = api.post("/v1/tasks/complete", SHARED, {"token": token, "output": {}})
    assert done.json == {"accepted": True}


def test_a_worker_identity_reports_its_own_tokens(engine: Engine) -> None:
    api = Api(engine)
    mine = api.register(PAYMENTS, "payments-1", "payments.charge").json["worker_session_id"]
    engine.start("Charge", input={}, execution_id="c-1")
    task = api.post("/v1/workers/poll", PAYMENTS, {"worker_session_id": mine, "wait_ms": 0}).json
    # An unknown token is no one's: the usual answer, not a refusal.
    unknown = api.post("/v1/tasks/complete", PAYMENTS, {"token": "nope", "output": {}})
    assert unknown.json["accepted"] is False
    done = api.post("/v1/tasks/complete", PAYMENTS, {"token": task["token"], "output": {}})
    assert done.json == {"accepted": True}


def test_who_holds_a_token_survives_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "orbit.db")
    engine = Engine(SqliteStore(db), auto_tick=False)
    try:
        engine.deploy(_definition())
        session = engine.workers.register("other", "python", [("payments.charge", "1.0.0")])
        engine.start("Charge", input={}, execution_id="c-1")
        task = engine.workers.poll(session["worker_session_id"], 0)
        assert task is not None
    finally:
        engine.close()
    engine = Engine(SqliteStore(db), auto_tick=False)
    try:
        api = Api(engine)
        before = api.state()
        _forbidden(
            api.post("/v1/tasks/complete", PAYMENTS, {"token": task["token"], "output": {}}),
            "task token was issued to worker `other`, not `payments-1`",
        )
        assert api.state() == before
    finally:
        engine.close()
