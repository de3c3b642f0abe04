"""The shape of the engine façade (`EngineApi`) and `Wrapped`, the base of
the engines that are an `Engine` plus a few calls answered differently:
a shared-mode server's (orbit_core/engine/shared.py) and a standby's
(orbit_server/cluster.py). They wrap an `Engine` rather than subclass it,
so every call they do not answer themselves reaches the `Engine`'s own
method, with its checks on arrival, and an override cannot skip them.
The server's resources take any `EngineApi`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from orbit_core import events as ev
from orbit_core import ir
from orbit_core.api import (
    Deployed,
    ExecutionDoc,
    ExecutionList,
    ExecutionPage,
    HistoryPage,
    QueryAnswer,
    SignalAccepted,
    Started,
    StartRequest,
    WorkflowList,
)
from orbit_core.engine.handlers import Handler
from orbit_core.engine.migrations import MigrationDesk
from orbit_core.engine.operations import OperatorApi
from orbit_core.engine.reads import DEFAULT_WAIT_MS
from orbit_core.engine.scheduler import Scheduler
from orbit_core.engine.service import Engine
from orbit_core.engine.worker_desk import WorkerApi
from orbit_core.errors import OrbitError
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.ports import Clock, Faults, Store
from orbit_core.state import ExecutionState
from orbit_core.visibility.check import Filter as TypedFilter


class EngineApi(Protocol):
    """What `Engine` offers an embedding program or the server."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def faults(self) -> Faults: ...

    @property
    def schedules(self) -> Scheduler: ...

    @property
    def workers(self) -> WorkerApi: ...

    @property
    def operations(self) -> OperatorApi: ...

    @property
    def migrations(self) -> MigrationDesk: ...

    @property
    def recovered_executions(self) -> int: ...

    @property
    def recovered_in_flight(self) -> int: ...

    @property
    def draining(self) -> bool: ...

    def deploy(
        self, definition: ir.Definition | JsonObject, *, replace: bool = False
    ) -> Deployed: ...

    def list_workflows(self) -> WorkflowList: ...

    def get_workflow(self, name: str, version: str | None = None) -> JsonObject: ...

    def definition(self, name: str, version: str | None = None) -> ir.Definition: ...

    def start(
        self,
        workflow: str,
        version: str | None = None,
        input: JsonValue = None,
        execution_id: str | None = None,
        *,
        schedule_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Started: ...

    def start_many(self, requests: Sequence[StartRequest]) -> list[Started | OrbitError]: ...

    def get(self, execution_id: str) -> ExecutionDoc: ...

    def state(self, execution_id: str) -> ExecutionState: ...

    def history(self, execution_id: str, run: int | None = None) -> HistoryPage: ...

    def events(self, execution_id: str, run: int | None = None) -> list[ev.Event]: ...

    def list_executions(
        self, status: str | None = None, workflow: str | None = None, limit: int = 50
    ) -> ExecutionList: ...

    def search_executions(
        self,
        where: str | None = None,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ExecutionPage: ...

    def typed_filter(self, where: str, workflow: str | None = None) -> TypedFilter: ...

    def wait(self, execution_id: str, timeout_ms: int = DEFAULT_WAIT_MS) -> ExecutionDoc: ...

    def cancel(self, execution_id: str, reason: str | None = None) -> ExecutionDoc: ...

    def signal(self, execution_id: str, name: str, payload: JsonValue = None) -> SignalAccepted: ...

    def query(self, execution_id: str, name: str) -> QueryAnswer: ...

    def reload_definitions(self) -> int: ...

    def register_handler(
        self, task_name: str, version: str, fn: Handler, runtime: str | None = None
    ) -> None: ...

    def run_handlers(self) -> int: ...

    def tick(self) -> None: ...

    def next_due_ms(self) -> int | None: ...

    def health(self) -> dict[str, int]: ...

    def drain(self) -> None: ...

    def close(self) -> None: ...


class Wrapped:
    """An `EngineApi` that hands every call to `engine`; a subclass answers
    the few it routes elsewhere and calls `engine`'s for the rest."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def store(self) -> Store:
        return self.engine.store

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def faults(self) -> Faults:
        return self.engine.faults

    @property
    def schedules(self) -> Scheduler:
        return self.engine.schedules

    @property
    def migrations(self) -> MigrationDesk:
        return self.engine.migrations

    @property
    def workers(self) -> WorkerApi:
        return self.engine.workers

    @property
    def operations(self) -> OperatorApi:
        return self.engine.operations

    @property
    def recovered_executions(self) -> int:
        return self.engine.recovered_executions

    @property
    def recovered_in_flight(self) -> int:
        return self.engine.recovered_in_flight

    @property
    def draining(self) -> bool:
        return self.engine.draining

    def deploy(self, definition: ir.Definition | JsonObject, *, replace: bool = False) -> Deployed:
        return self.engine.deploy(definition, replace=replace)

    def list_workflows(self) -> WorkflowList:
        return self.engine.list_workflows()

    def get_workflow(self, name: str, version: str | None = None) -> JsonObject:
        return self.engine.get_workflow(name, version)

    def definition(self, name: str, version: str | None = None) -> ir.Definition:
        return self.engine.definition(name, version)

    def start(
        self,
        workflow: str,
        version: str | None = None,
        input: JsonValue = None,
        execution_id: str | None = None,
        *,
        schedule_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Started:
        return self.engine.start(
            workflow,
            version,
            input,
            execution_id,
            schedule_id=schedule_id,
            idempotency_key=idempotency_key,
        )

    def start_many(self, requests: Sequence[StartRequest]) -> list[Started | OrbitError]:
        return self.engine.start_many(requests)

    def get(self, execution_id: str) -> ExecutionDoc:
        return self.engine.get(execution_id)

    def state(self, execution_id: str) -> ExecutionState:
        return self.engine.state(execution_id)

    def history(self, execution_id: str, run: int | None = None) -> HistoryPage:
        return self.engine.history(execution_id, run)

    def events(self, execution_id: str, run: int | None = None) -> list[ev.Event]:
        return self.engine.events(execution_id, run)

    def list_executions(
        self, status: str | None = None, workflow: str | None = None, limit: int = 50
    ) -> ExecutionList:
        return self.engine.list_executions(status, workflow, limit)

    def search_executions(
        self,
        where: str | None = None,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ExecutionPage:
        return self.engine.search_executions(where, status, workflow, limit, cursor)

    def typed_filter(self, where: str, workflow: str | None = None) -> TypedFilter:
        return self.engine.typed_filter(where, workflow)

    def wait(self, execution_id: str, timeout_ms: int = DEFAULT_WAIT_MS) -> ExecutionDoc:
        return self.engine.wait(execution_id, timeout_ms)

    def cancel(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        return self.engine.cancel(execution_id, reason)

    def signal(self, execution_id: str, name: str, payload: JsonValue = None) -> SignalAccepted:
        return self.engine.signal(execution_id, name, payload)

    def query(self, execution_id: str, name: str) -> QueryAnswer:
        return self.engine.query(execution_id, name)

    def reload_definitions(self) -> int:
        return self.engine.reload_definitions()

    def register_handler(
        self, task_name: str, version: str, fn: Handler, runtime: str | None = None
    ) -> None:
        self.engine.register_handler(task_name, version, fn, runtime)

    def run_handlers(self) -> int:
        return self.engine.run_handlers()

    def tick(self) -> None:
        self.engine.tick()

    def next_due_ms(self) -> int | None:
        return self.engine.next_due_ms()

    def health(self) -> dict[str, int]:
        return self.engine.health()

    def drain(self) -> None:
        self.engine.drain()

    def close(self) -> None:
        self.engine.close()
