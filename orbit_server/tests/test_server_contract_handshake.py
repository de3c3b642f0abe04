"""The typed worker handshake over HTTP/JSON (in process): a registration that
presents a contract hash differing from the deployed contract of its
`task@version` is refused with 409 CONTRACT_MISMATCH naming the task and the
first differing field; a matching hash, no hash, or a contract no deployed
workflow uses is accepted."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs
import falcon.testing
import pytest

from orbit_core import ir
from orbit_core.engine import Engine
from orbit_core.ir import TaskContract, contract_document, contract_hash
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_server.app import create_app
from orbit_server.config import ServerConfig

WORKER = {"authorization": "Bearer worker"}


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine(auto_tick=False)
    yield engine
    engine.close()


@pytest.fixture
def client(engine: Engine) -> falcon.testing.TestClient:
    config = ServerConfig(token="admin", worker_token="worker")
    return falcon.testing.TestClient(create_app(engine, config))


def _deployed(engine: Engine) -> TaskContract:
    contract = TaskContract(
        "greeting.compose",
        "1.0.0",
        t.RecordType((t.Field("name", t.STRING), t.Field("times", t.INT, 1))),
        t.RecordType((t.Field("text", t.STRING),)),
    )
    defn = ir.Definition(
        ir_version=ir.IR_V1,
        name="Greet",
        version="1.0.0",
        input=t.RecordType(()),
        output=t.RecordType(()),
        steps=(ir.Step("compose", "task", task=contract.name, with_=e.Object(())),),
        result=e.Object(()),
        contracts={contract.name: contract},
    )
    engine.deploy(attrs.evolve(defn, definition_hash=ir.definition_hash(defn)))
    return contract


def _register(
    client: falcon.testing.TestClient, entry: Mapping[str, object]
) -> falcon.testing.Result:
    body = {"worker_id": "w", "runtime": "python", "contracts": [entry]}
    return client.simulate_post("/v1/workers/register", headers=WORKER, json=body)


def test_a_drifted_contract_is_refused_naming_the_task_and_field(
    engine: Engine, client: falcon.testing.TestClient
) -> None:
    deployed = _deployed(engine)
    fields = deployed.input.fields if isinstance(deployed.input, t.RecordType) else ()
    first = fields[0]
    drifted = TaskContract(
        deployed.name,
        deployed.version,
        t.RecordType((t.Field(first.name, t.INT), *fields[1:])),
        deployed.output,
    )
    entry: dict[str, object] = {
        "task_name": deployed.name,
        "contract_version": deployed.version,
        "contract_hash": contract_hash(drifted),
        "contract": contract_document(drifted),
    }
    reply = _register(client, entry)
    assert reply.status_code == 409
    error = reply.json["error"]
    assert error["code"] == "CONTRACT_MISMATCH"
    assert f"`{deployed.name}@{deployed.version}`" in error["message"]
    assert f"input.{first.name}" in error["message"]
    # Without the document the refusal still names the task.
    del entry["contract"]
    reply = _register(client, entry)
    assert reply.status_code == 409
    assert "sent no contract document" in reply.json["error"]["message"]


def test_a_matching_hash_no_hash_or_an_undeployed_contract_is_accepted(
    engine: Engine, client: falcon.testing.TestClient
) -> None:
    undeployed = {
        "task_name": "greeting.compose",
        "contract_version": "1.0.0",
        "contract_hash": "sha256:" + "0" * 64,
    }
    assert _register(client, undeployed).status_code == 200  # nothing deployed yet
    deployed = _deployed(engine)
    matching = {**undeployed, "contract_hash": contract_hash(deployed)}
    assert _register(client, matching).status_code == 200
    plain = {"task_name": "greeting.compose", "contract_version": "1.0.0"}
    assert _register(client, plain).status_code == 200
    other_version = {**undeployed, "contract_version": "2.0.0"}
    assert _register(client, other_version).status_code == 200


def test_a_malformed_hash_is_an_invalid_request(client: falcon.testing.TestClient) -> None:
    entry = {"task_name": "a.b", "contract_version": "1.0.0", "contract_hash": "md5:x"}
    reply = _register(client, entry)
    assert reply.status_code == 400
    assert reply.json["error"]["code"] == "INVALID_REQUEST"
