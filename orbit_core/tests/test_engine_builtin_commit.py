"""A built-in task's effect happens only once its dispatch is durable
(issue 36): the HTTP adapter's request is not sent for a group whose commit
fails, since that caller is told STORAGE_ERROR and the history stays empty."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest
from engine_kit import Int, Str, obj, rec, step, task, workflow

from orbit_core import events as ev
from orbit_core.engine import executions as executions_module
from orbit_core.errors import StorageError
from orbit_core.jsontypes import JsonValue
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch
from orbit_core.testing import simulated_engine

HTTP = task("orbit.http.request", rec(method=(Str, "GET"), url=Str), rec(status=Int))
FETCH = workflow(
    "Fetch", [step("get", task="orbit.http.request", with_=obj(url="http://example.test/"))], [HTTP]
)


class CountingStore(MemoryStore):
    """Commits fail while `failing` is set; counts the built-in dispatches
    that were committed."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.builtin_dispatches = 0

    def commit(self, batch: CommitBatch) -> None:
        if self.failing:
            raise OSError("disk I/O error (test)")
        super().commit(batch)
        self.builtin_dispatches += sum(
            1
            for change in batch.executions
            for event in [*change.archived, *change.events]
            if isinstance(event, ev.StepDispatched) and event.worker_session.startswith("builtin:")
        )


class RecordingAdapter:
    """Records each run and how many built-in dispatches were durable then;
    the test reports the results (`finish`)."""

    def __init__(self, store: CountingStore) -> None:
        self.store = store
        self.runs: list[tuple[int, Callable[[JsonValue, Any], None]]] = []

    def supports(self, task_name: str) -> bool:
        return task_name == "orbit.http.request"

    def run(self, task_name: str, input: Any, timeout_ms: Any, done: Any) -> None:
        self.runs.append((self.store.builtin_dispatches, done))

    def finish(self, index: int, output: JsonValue) -> None:
        self.runs[index][1](output, None)


class InlineThread:
    """Runs its target on `start`, so when the effect happens is deterministic."""

    def __init__(self, target: Callable[[], None], daemon: bool = False) -> None:
        self._target = target

    def start(self) -> None:
        self._target()


def test_a_builtin_task_runs_only_after_its_dispatch_is_committed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(executions_module, "threading", types.SimpleNamespace(Thread=InlineThread))
    store = CountingStore()
    adapter = RecordingAdapter(store)
    engine = simulated_engine(store, builtins=adapter)
    engine.deploy(FETCH)
    store.failing = True
    with pytest.raises(StorageError):
        engine.start("Fetch", execution_id="f-1")
    assert not store.history("f-1")
    assert adapter.runs == []  # no request for a dispatch that was never stored
    store.failing = False
    engine.start("Fetch", execution_id="f-2")
    assert [durable for durable, _ in adapter.runs] == [1]  # after its commit
    adapter.finish(0, {"status": 200})
    assert engine.get("f-2")["status"] == "COMPLETED"
    engine.close()
