"""Chapter 65's research agent (examples/agent.orbit) runs end to end: its
`orbit test` declarations pass, and the embedded engine runs it with the
fake-model workers of examples/workers/agent/ as in-process handlers, through
the published, the over-budget and the refused-plan paths."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner

from orbit_cli.main import cli
from orbit_core.engine import Engine
from orbit_core.memory_store import MemoryStore
from orbit_lang import compile_paths

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = pytest.mark.timeout(60)


def load_worker() -> ModuleType:
    path = EXAMPLES / "workers" / "agent" / "agent_worker.py"
    spec = importlib.util.spec_from_file_location("agent_worker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def worker() -> ModuleType:
    return load_worker()


@pytest.fixture
def engine(worker: ModuleType) -> Iterator[Engine]:
    result = compile_paths([EXAMPLES / "agent.orbit"])
    assert result.ok, [d.message for d in result.diagnostics]
    engine = Engine(MemoryStore())
    for definition in result.definitions:
        engine.deploy(definition)
    for name, handler in worker.HANDLERS.items():
        engine.register_handler(name, "1.0.0", handler)
    yield engine
    engine.close()


def run(engine: Engine, execution_id: str, **input: Any) -> dict[str, Any]:
    engine.start("ResearchAgent", input=input, execution_id=execution_id)
    state = dict(engine.wait(execution_id, timeout_ms=30_000))
    assert state["status"] != "RUNNING", state
    return state


def test_the_agents_tests_pass() -> None:
    result = CliRunner().invoke(cli, ["test", str(EXAMPLES / "agent.test.orbit")])
    assert result.exit_code == 0, result.output
    assert "test result: ok. 6 passed, 0 failed" in result.output


def test_a_question_is_researched_checked_and_published(engine: Engine, worker: ModuleType) -> None:
    state = run(engine, "agent-1", question="What is durable execution?", slug="durable")
    assert state["status"] == "COMPLETED", state
    assert state["output"] == {"url": "https://blog.example.org/durable"}
    units = state["units"]
    # Two key words, two searches in parallel, each a unit of its own.
    assert {k for k in units if k.startswith("search[")} == {"search[0]", "search[1]"}
    assert units["review"]["status"] == "SKIPPED"  # the guardrail was confident
    assert worker.PUBLISHED["durable"].startswith("What is durable execution? Durable is covered")
    assert worker.ALERTS[-1]["channel"] == "#articles"


def test_a_plan_over_budget_calls_no_tool(engine: Engine, worker: ModuleType) -> None:
    question = "How do retries timeouts compensation and signals work?"
    state = run(engine, "agent-2", question=question, slug="all", budget_usd=0.1)
    assert state["status"] == "COMPLETED", state
    assert state["output"] == {"url": None}
    assert state["units"]["budget"]["output"] == {"within": False}
    assert state["units"]["search"]["status"] == "SKIPPED"
    assert worker.PUBLISHED == {}


def test_a_refused_plan_fails_the_run_and_alerts_the_team(
    engine: Engine, worker: ModuleType
) -> None:
    state = run(engine, "agent-3", question="Why?", slug="nothing")
    assert state["status"] == "FAILED", state
    assert state["error"]["code"] == "EMPTY_PLAN"
    assert state["units"]["plan"]["attempt"] == 1  # not retried: the model refused
    (alert,) = worker.ALERTS
    assert alert["channel"] == "#agents"
    assert "the model found nothing to search for" in alert["text"]
