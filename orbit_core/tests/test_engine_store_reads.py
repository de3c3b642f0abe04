"""Reads that only the store can answer (a finished execution's document,
its history, a listing, a wait on an execution no longer in memory) run on
the caller's thread, not as commands of a group: a slow database read made
for one caller must not hold up every other caller's commands."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from engine_kit import plain, workflow

from orbit_core.engine import Engine
from orbit_core.errors import NotFoundError, StorageError
from orbit_core.memory_store import MemoryStore


class GatedStore(MemoryStore):
    """A store whose reads of histories and listings wait at a gate while
    `gated` is set (as a slow database would)."""

    def __init__(self) -> None:
        super().__init__()
        self.gated = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def _pass(self) -> None:
        if self.gated:
            self.entered.set()
            self.gate.wait(10)

    def history(self, execution_id: str, run: int | None = None) -> Any:
        self._pass()
        return super().history(execution_id, run)

    def list_executions(self, *args: Any, **kwargs: Any) -> Any:
        self._pass()
        return super().list_executions(*args, **kwargs)


READS: dict[str, Callable[[Engine], Any]] = {
    "get": lambda engine: engine.get("done-1")["status"],
    "state": lambda engine: engine.state("done-1").status,
    "wait": lambda engine: engine.wait("done-1", timeout_ms=5000)["status"],
    "history": lambda engine: engine.history("done-1")["events"][-1]["type"],
    "events": lambda engine: type(engine.events("done-1")[-1]).__name__,
    "list_executions": lambda engine: next(
        e["status"] for e in engine.list_executions()["executions"] if e["execution_id"] == "done-1"
    ),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("pipeline", [False, True], ids=["inline", "committer-thread"])
@pytest.mark.parametrize("name", list(READS))
def test_a_slow_store_read_does_not_hold_up_other_commands(name: str, pipeline: bool) -> None:
    store = GatedStore()
    engine = Engine(store, handler_threads=0, auto_tick=False, pipeline=pipeline)
    engine.deploy(workflow("Empty", [], []))
    engine.deploy(plain())
    assert engine.start("Empty", execution_id="done-1")["created"]
    assert engine.health()["active_executions"] == 0  # finished: only the store has it
    store.gated = True
    answer: list[Any] = []
    reader = threading.Thread(target=lambda: answer.append(READS[name](engine)))
    reader.start()
    assert store.entered.wait(5), "the read never reached the store"
    # While that read waits on the database, other callers' commands go on.
    writer = threading.Thread(
        target=lambda: engine.start("Plain", input={"n": 1}, execution_id="p")
    )
    writer.start()
    writer.join(5)
    held_up = writer.is_alive()
    store.gate.set()
    reader.join(5)
    writer.join(5)
    assert not held_up, f"a start waited for the store read of {name}"
    assert answer and answer[0] in ("COMPLETED", "WorkflowCompleted")
    assert engine.get("p")["status"] == "RUNNING"
    engine.close()


def test_store_reads_of_a_closed_engine_are_refused_as_commands_are() -> None:
    engine = Engine(MemoryStore(), handler_threads=0, auto_tick=False)
    engine.deploy(workflow("Empty", [], []))
    engine.start("Empty", execution_id="done-1")
    engine.close()
    for read in (engine.history, engine.events):
        with pytest.raises(StorageError, match="closed"):
            read("done-1")
    with pytest.raises(StorageError, match="closed"):
        engine.list_executions()
    with pytest.raises(StorageError, match="closed"):
        engine.get("done-1")


def test_an_unknown_execution_is_still_not_found() -> None:
    engine = Engine(MemoryStore(), handler_threads=0, auto_tick=False)
    for read in (engine.get, engine.state, engine.wait):
        with pytest.raises(NotFoundError):
            read("nobody")
    engine.close()
