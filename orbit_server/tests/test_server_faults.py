"""Faults the engine handles itself are visible: logged at `error` with the
traceback, counted in `/v1/metrics`, and `/v1/health` says `degraded` while
the store fails."""

from __future__ import annotations

from collections.abc import Iterator

import falcon.testing
import pytest

from orbit_core.engine import Engine
from orbit_core.errors import StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch
from orbit_server import logs
from orbit_server.app import create_app
from orbit_server.config import ServerConfig
from orbit_server.faults import LoggedFaults


class SwitchableStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def commit(self, batch: CommitBatch) -> None:
        if self.failing:
            raise OSError("disk I/O error (test)")
        super().commit(batch)

    def write_problem(self) -> str | None:
        return "disk I/O error (test)" if self.failing else None


@pytest.fixture
def store() -> SwitchableStore:
    return SwitchableStore()


@pytest.fixture
def engine(store: SwitchableStore) -> Iterator[Engine]:
    engine = Engine(store, auto_tick=False, handler_threads=0, faults=LoggedFaults())
    yield engine
    engine.close()


@pytest.fixture
def client(engine: Engine) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(engine, ServerConfig()))


def register(engine: Engine) -> None:
    engine.workers.register("w", "python", [("t", "1.0.0")])


def test_health_is_degraded_while_the_store_fails(
    store: SwitchableStore,
    engine: Engine,
    client: falcon.testing.TestClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("text")
    assert client.simulate_get("/v1/health").json["status"] == "ok"
    assert "degraded" not in client.simulate_get("/v1/health").json
    store.failing = True
    with pytest.raises(StorageError):
        register(engine)
    reply = client.simulate_get("/v1/health")
    assert reply.status_code == 200
    assert reply.json["status"] == "degraded"
    assert reply.json["degraded"] == {
        "store": "sqlite: STORAGE_ERROR (details in the server's log)"
    }
    err = capsys.readouterr().err
    assert " ERROR orbit: storage failed component=store" in err
    assert "Traceback (most recent call last)" in err
    assert "OSError: disk I/O error (test)" in err
    metrics = client.simulate_get("/v1/metrics").text
    assert "\norbit_engine_faults_total 1.0\n" in metrics
    store.failing = False
    register(engine)
    reply = client.simulate_get("/v1/health")
    assert reply.json["status"] == "ok"
    assert "degraded" not in reply.json
    assert "WARN orbit: storage works again" in capsys.readouterr().err


def test_an_idle_server_is_healthy_again_once_the_store_writes(
    store: SwitchableStore, engine: Engine, client: falcon.testing.TestClient
) -> None:
    store.failing = True
    with pytest.raises(StorageError):
        register(engine)
    assert client.simulate_get("/v1/health").json["status"] == "degraded"
    store.failing = False
    # No commit happens in between: the server is idle.
    reply = client.simulate_get("/v1/health")
    assert reply.json["status"] == "ok"
    assert "degraded" not in reply.json


def test_json_logs_carry_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json")
    faults = LoggedFaults()
    try:
        raise RuntimeError("tick bug")
    except RuntimeError as exc:
        faults.report("tick", exc)
    import json

    record = json.loads(capsys.readouterr().err)
    assert record["level"] == "ERROR"
    assert record["fields"]["message"] == "tick failed"
    assert record["fields"]["component"] == "tick"
    assert record["fields"]["error"] == "RuntimeError: tick bug"
    assert "Traceback" in record["fields"]["exception"]
    assert faults.counts() == {"tick": 1}


def test_quiet_components_are_counted_not_logged(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("text")
    faults = LoggedFaults(quiet=frozenset({"store"}))
    faults.report("store", OSError("disk full"))
    assert capsys.readouterr().err == ""
    assert faults.counts() == {"store": 1}
    assert faults.failing() == {"store": "OSError: disk full"}


class UnreachableStore(SwitchableStore):
    """A PostgreSQL database gone away, as the store words it."""

    MESSAGE = (
        "cannot connect to PostgreSQL at postgres://alice:***@db.internal.example:5432/orders: "
        'connection to server at "db.internal.example" (10.1.2.3), port 5432 failed: '
        'FATAL: password authentication failed for user "alice"'
    )

    def commit(self, batch: CommitBatch) -> None:
        if self.failing:
            raise StorageError(self.MESSAGE)
        super().commit(batch)

    def write_problem(self) -> str | None:
        return self.MESSAGE if self.failing else None


@pytest.mark.parametrize("noticed_by", ["commit", "probe"])
def test_the_open_health_shows_nothing_of_the_database_it_cannot_reach(noticed_by: str) -> None:
    """Issue 36: during an outage the unauthenticated /v1/health carried the
    store's error, which names the database's user, host and name. It says
    the kind of database and the error code; the log keeps the message."""
    store = UnreachableStore()
    engine = Engine(store, auto_tick=False, handler_threads=0, faults=LoggedFaults())
    try:
        config = ServerConfig(db="postgres://alice:pw@db.internal.example:5432/orders")
        client = falcon.testing.TestClient(create_app(engine, config))
        store.failing = True
        if noticed_by == "commit":
            with pytest.raises(StorageError):
                register(engine)
        reply = client.simulate_get("/v1/health")
        assert reply.json["status"] == "degraded"
        assert reply.json["degraded"] == {
            "store": "postgres: STORAGE_ERROR (details in the server's log)"
        }
        for secret in ("alice", "db.internal", "10.1.2.3", "5432", "orders", "postgres://"):
            assert secret not in reply.text
    finally:
        engine.close()


def test_the_open_health_names_only_the_kind_of_a_components_failure(
    engine: Engine, client: falcon.testing.TestClient
) -> None:
    engine.faults.report("tick", RuntimeError("execution `payroll-2024` of alice failed"))
    reply = client.simulate_get("/v1/health")
    assert reply.json["degraded"] == {"tick": "RuntimeError (details in the server's log)"}
