"""Chapter 46's log lines, derived from committed events: each message at
its level with its fields, in both formats, filtered by ORBIT_LOG, and with
the trace and span ids when tracing is on."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_server_metrics import SOURCE, undo, work

from orbit_core.engine import Engine
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import run_until_idle, simulated_engine
from orbit_lang import compile_source
from orbit_server import logs
from orbit_server.storage import LoggedStore
from orbit_server.telemetry import Telemetry
from orbit_server.tracing import Tracer, TracingSettings, span_id_of, trace_id_of

MORE = """
task "t.remote" {
    version "1.0.0"
    input { n: Int }
    output { v: Int }
}

workflow Slow {
    version "1.0.0"
    timeout 2s
    input { n: Int }
    step wait {
        worker "t.remote"
        with { n: input.n }
    }
}

workflow Remote {
    version "1.0.0"
    input { n: Int }
    step wait {
        worker "t.remote"
        with { n: input.n }
    }
}

workflow Holder {
    version "1.0.0"
    input { n: Int }
    step kid {
        workflow "Remote"
        with { n: input.n }
    }
}
"""


def scenario(tracer: Tracer | None = None) -> Iterator[Engine]:
    telemetry = Telemetry(tracer)
    engine = simulated_engine(LoggedStore(MemoryStore(), "memory", telemetry))
    if tracer is not None:
        tracer.attach(engine.store)
    result = compile_source(SOURCE + MORE, "logs.orbit")
    assert [d.message for d in result.diagnostics] == []
    for definition in result.definitions:
        engine.deploy(definition)
    engine.register_handler("t.work", "1.0.0", work)
    engine.register_handler("t.undo", "1.0.0", undo)
    for n in (1, 3, 200):
        engine.start("Flow", input={"n": n}, execution_id=f"flow-{n}")
    engine.start("Flow", input={"n": 7}, execution_id="cancelled")
    engine.cancel("cancelled")
    engine.start("Slow", input={"n": 1}, execution_id="slow")
    engine.start("Holder", input={"n": 1}, execution_id="holder")
    run_until_idle(engine, max_ms=5_000)
    engine.cancel("holder")  # its child is no longer needed
    # A remote worker takes a task and goes silent: the attempt is uncertain.
    session = engine.workers.register("r-1", "python", [("t.remote", "1.0.0")])
    engine.start("Remote", input={"n": 2}, execution_id="lost")
    assert engine.workers.poll(session["worker_session_id"], 0) is not None
    engine.clock.advance(engine.session_timeout_ms * 2)  # type: ignore[attr-defined]
    yield engine
    engine.close()


def json_lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def find(records: list[dict[str, Any]], message: str, **fields: Any) -> dict[str, Any]:
    for record in records:
        body = record["fields"]
        if body["message"] == message and all(body.get(k) == v for k, v in fields.items()):
            return record
    seen = [(r["level"], r["fields"]["message"]) for r in records]
    raise AssertionError(f"no line {message!r} {fields} in {seen}")


# (message, level, fields that identify the line, every field it carries)
EXPECTED: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "execution started",
        "INFO",
        {"execution_id": "flow-1"},
        {"workflow": "Flow", "version": "1.0.0"},
    ),
    ("execution completed", "INFO", {"execution_id": "flow-1"}, {}),
    ("execution cancelled", "INFO", {"execution_id": "cancelled"}, {}),
    (
        "execution failed",
        "WARN",
        {"execution_id": "flow-3"},
        {"code": "BAD", "compensation": "completed"},
    ),
    ("execution timed out", "WARN", {"execution_id": "slow"}, {}),
    ("step failed", "WARN", {"execution_id": "flow-3", "step": "last"}, {"code": "BAD"}),
    (
        "retry scheduled",
        "INFO",
        {"execution_id": "flow-200", "step": "first"},
        {"attempt": 2, "delay_ms": 1000},
    ),
    (
        "attempt outcome uncertain; redelivering",
        "WARN",
        {"execution_id": "lost", "step": "wait"},
        {"attempt": 1},
    ),
    (
        "cancelling child workflow because its parent no longer needs it",
        "INFO",
        {"execution_id": "holder.kid"},
        {},
    ),
    ("event", "DEBUG", {"execution_id": "flow-1", "seq": 1}, {"event": "WorkflowCreated"}),
]


def test_every_message_at_its_level_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json", logs.parse_filter("info,orbit_runtime=debug"))
    capsys.readouterr()
    try:
        for _ in scenario():
            records = json_lines(capsys.readouterr().err)
    finally:
        logs.configure("text")
    for message, level, key, fields in EXPECTED:
        record = find(records, message, **key)
        assert record["level"] == level, message
        assert record["target"] == "orbit"
        for name, value in fields.items():
            assert record["fields"][name] == value, (message, name)
    failed = find(records, "execution failed", execution_id="flow-3")["fields"]
    assert set(failed) == {"message", "execution_id", "code", "error", "compensation"}
    uncertain = find(records, "attempt outcome uncertain; redelivering")["fields"]
    assert set(uncertain) == {"message", "execution_id", "step", "attempt", "reason"}
    # Never an input, an output or error details.
    assert not any({"input", "output", "details"} & set(r["fields"]) for r in records)


def test_text_lines(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("text", logs.parse_filter("debug"))
    capsys.readouterr()
    try:
        for _ in scenario():
            err = capsys.readouterr().err
    finally:
        logs.configure("text")
    lines = err.splitlines()

    def line(text: str) -> str:
        return next(item for item in lines if text in item)

    assert line(" INFO orbit: execution started execution_id=flow-1 ").endswith(
        "workflow=Flow version=1.0.0"
    )
    assert line(" WARN orbit: execution failed execution_id=flow-3 ").endswith(
        'code=BAD error="step `last` failed: flow-3 fails at its last step" compensation=completed'
    )
    assert line(" INFO orbit: retry scheduled execution_id=flow-200 ").endswith(
        "step=first attempt=2 delay_ms=1000"
    )
    assert 'DEBUG orbit: event execution_id=flow-1 seq=3 event="StepScheduled" step="first"' in err
    assert " WARN orbit: execution timed out execution_id=slow" in err


def test_the_filter_keeps_lines_below_its_level_out(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json", logs.parse_filter("warn"))
    capsys.readouterr()
    try:
        for _ in scenario():
            records = json_lines(capsys.readouterr().err)
    finally:
        logs.configure("text")
    assert {r["level"] for r in records} == {"WARN"}
    find(records, "execution failed", execution_id="flow-3")


def test_filter_directives() -> None:
    assert logs.parse_filter(None) == logs.LogFilter(logging.INFO)
    both = logs.parse_filter("warn,orbit_runtime::engine=debug,gunicorn=error")
    assert both.level_for("orbit") == logging.DEBUG
    assert both.level_for("gunicorn") == logging.ERROR
    assert both.level_for("other") == logging.WARNING
    assert logs.parse_filter("nonsense,=,trace").default == logging.DEBUG


def test_lines_carry_the_trace_when_tracing_is_on(capsys: pytest.CaptureFixture[str]) -> None:
    exporter = InMemorySpanExporter()
    tracer = Tracer(TracingSettings("http://127.0.0.1:9"), exporter=exporter)
    logs.configure("json")
    capsys.readouterr()
    try:
        for _ in scenario(tracer):
            records = json_lines(capsys.readouterr().err)
            tracer.flush()
    finally:
        logs.configure("text")
        tracer.close()
    started = find(records, "execution started", execution_id="flow-1")["fields"]
    assert started["trace_id"] == f"{trace_id_of('flow-1'):032x}"
    assert started["span_id"] == f"{span_id_of('flow-1'):016x}"
    child = find(records, "execution started", execution_id="flow-1.kid")["fields"]
    assert child["trace_id"] == started["trace_id"]
    names = {span.name for span in exporter.get_finished_spans()}
    assert {"workflow Flow", "step first", "step pause", "workflow Child"} <= names


def test_worker_registered_counts_the_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    # Chapter 46: `worker registered worker_id=py-1 runtime=python tasks=1`.
    from orbit_server.auth import SHARED_WORKER
    from orbit_server.worker_calls import WorkerCalls

    engine = simulated_engine(MemoryStore())
    contracts = [
        {"task_name": "t.one", "contract_version": "1.0.0"},
        {"task_name": "t.two", "contract_version": "1.0.0"},
    ]
    logs.configure("text")
    capsys.readouterr()
    try:
        calls = WorkerCalls(engine)
        calls.register(SHARED_WORKER, "py-1", "Python", contracts[:1], None)
        calls.register(SHARED_WORKER, "py-2", "python", contracts, None)
        err = capsys.readouterr().err
        logs.configure("json")
        calls.register(SHARED_WORKER, "py-3", "python", contracts, None)
        records = json_lines(capsys.readouterr().err)
    finally:
        logs.configure("text")
        engine.close()
    assert " INFO orbit: worker registered worker_id=py-1 runtime=python tasks=1\n" in err
    assert " INFO orbit: worker registered worker_id=py-2 runtime=python tasks=2\n" in err
    assert find(records, "worker registered", worker_id="py-3")["fields"]["tasks"] == 2
