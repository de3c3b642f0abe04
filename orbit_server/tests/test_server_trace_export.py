"""The engine's side of the exporting process (`trace_export`): whatever
that process does, committing goes on and costs no wait."""

from __future__ import annotations

import time

import pytest

from orbit_core import events as ev
from orbit_core.memory_store import MemoryStore
from orbit_server import logs
from orbit_server.trace_export import TraceForwarder
from orbit_server.tracing import TracingSettings, span_id_of, trace_id_of


def _run(execution_id: str) -> list[ev.Event]:
    return [
        ev.WorkflowCreated(1, 1000, "W", "1.0.0", "h", None),
        ev.StepDispatched(2, 1001, "s", 1, "tok", "w-1", "sess", None),
    ]


def test_a_gone_exporting_process_is_reported_once_and_costs_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("text")
    forwarder = TraceForwarder(TracingSettings("http://127.0.0.1:9"), "text")
    try:
        forwarder._child.kill()
        forwarder._child.wait()
        started = time.monotonic()
        for i in range(200):
            ids = forwarder.committed([(f"e{i}", "W", _run(f"e{i}"))])
            assert ids[f"e{i}"] == (f"{trace_id_of(f'e{i}'):032x}", f"{span_id_of(f'e{i}'):016x}")
        assert time.monotonic() - started < 2
        parent = forwarder.traceparent("e0", "s")
        assert parent == f"00-{trace_id_of('e0'):032x}-{span_id_of('e0', 's', 1):016x}-01"
        deadline = time.monotonic() + 10
        while "exporting process has gone" not in capsys.readouterr().err:
            assert time.monotonic() < deadline, "no warning"
            forwarder.committed([("late", "W", _run("late"))])
            time.sleep(0.02)
    finally:
        forwarder.close(timeout_s=0.5)
    forwarder.committed([("after", "W", _run("after"))])  # still never raises
    err = capsys.readouterr().err
    assert "exporting process has gone" not in err  # reported once


def test_close_is_bounded_with_an_unreachable_collector() -> None:
    forwarder = TraceForwarder(TracingSettings("http://127.0.0.1:9"), "text")
    for i in range(50):
        forwarder.committed([(f"e{i}", "W", [*_run(f"e{i}"), ev.WorkflowCompleted(3, 1002, {})])])
    started = time.monotonic()
    forwarder.close(timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert forwarder._child.returncode is not None


class Histories(MemoryStore):
    """A store whose histories are given (those the new engine would read)."""

    def __init__(self, histories: dict[str, list[ev.Event]]) -> None:
        super().__init__()
        self.histories = histories

    def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
        return self.histories.get(execution_id)


def test_a_new_engine_starts_the_model_again_from_the_histories() -> None:
    """A cluster node builds an engine per term: what the tracers knew of an
    execution another server moved on meanwhile is stale, so they forget it
    and read its history when it is next seen."""
    forwarder = TraceForwarder(TracingSettings("http://127.0.0.1:9"), "text")
    try:
        forwarder.committed([("x", "W", _run("x"))])  # dispatch 1 of s
        assert forwarder.traceparent("x", "s") is not None
        moved_on = [
            *_run("x"),
            ev.StepAttemptUncertain(3, 1002, "s", 1, "worker lost"),
            ev.StepDispatched(4, 1003, "s", 1, "tok2", "w-2", "sess2", None),
        ]
        forwarder.attach(Histories({"x": moved_on}))
        assert forwarder.traceparent("x", "s") is None
        forwarder.committed([("x", "W", [ev.StepSucceeded(5, 1004, "s", 1, {})])])
        forwarder.committed([("x", "W", [ev.StepDispatched(6, 1005, "t", 1, "k", "w", "s", None)])])
        expected = f"00-{trace_id_of('x'):032x}-{span_id_of('x', 't', 1):016x}-01"
        assert forwarder.traceparent("x", "t") == expected
        assert forwarder._model._executions["x"].dispatches == {"s": 2, "t": 1}
    finally:
        forwarder.close(timeout_s=0.5)
