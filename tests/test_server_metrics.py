"""`/v1/metrics` after a known scenario on a real engine: the text parses with
prometheus-client's parser (and `promtool check metrics` when installed), and
every counter of chapter 46 equals the count of its event in the histories."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from typing import Any

import falcon.testing
import pytest
from prometheus_client.parser import text_string_to_metric_families

from orbit_core.engine import Engine, TaskError
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import run_until_idle, simulated_engine
from orbit_lang import compile_source
from orbit_server.app import create_app
from orbit_server.config import ServerConfig
from orbit_server.resources.health import HELP
from orbit_server.storage import LoggedStore
from orbit_server.telemetry import COUNTED, Telemetry

SOURCE = """
task "t.work" {
    version "1.0.0"
    input { n: Int }
    output { v: Int }
}

task "t.undo" {
    version "1.0.0"
    input { v: Int }
    output { ok: Bool }
}

workflow Child {
    version "1.0.0"
    input { n: Int }
    output { v: Int }
    step work {
        worker "t.work"
        with { n: input.n }
    }
    return { v: work.v }
}

workflow Flow {
    version "1.0.0"
    input { n: Int }
    step first {
        worker "t.work"
        with { n: input.n }
        retry { attempts: 3, initial_delay: 1s }
        compensate {
            worker "t.undo"
            with { v: first.v }
        }
    }
    step maybe {
        worker "t.work"
        when input.n > 100
        with { n: input.n }
    }
    step pause {
        sleep 1s
        after first
    }
    step kid {
        workflow "Child"
        after pause
        with { n: input.n }
    }
    step last {
        worker "t.work"
        after kid
        with { n: input.n + 1000 }
    }
}
"""


def work(payload: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    n = payload["n"]
    if n % 2 == 0 and task["attempt"] == 1 and n < 1000:
        raise TaskError("FLAKY", "first attempts of even numbers fail", True)
    if n == 1003:
        raise TaskError("BAD", "flow-3 fails at its last step", False)
    return {"v": n}


def undo(payload: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


@pytest.fixture
def served() -> Iterator[tuple[Engine, falcon.testing.TestClient]]:
    telemetry = Telemetry()
    engine = simulated_engine(LoggedStore(MemoryStore(), "memory", telemetry))
    result = compile_source(SOURCE, "metrics.orbit")
    assert [d.message for d in result.diagnostics] == []
    for definition in result.definitions:
        engine.deploy(definition)
    engine.register_handler("t.work", "1.0.0", work)
    engine.register_handler("t.undo", "1.0.0", undo)
    yield engine, falcon.testing.TestClient(create_app(engine, ServerConfig()))
    engine.close()


def scrape(client: falcon.testing.TestClient) -> tuple[str, dict[str, float]]:
    reply = client.simulate_get("/v1/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "text/plain; version=0.0.4"
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return reply.text, samples


def history_counts(engine: Engine) -> Counter[str]:
    counts: Counter[str] = Counter()
    for row in engine.store.list_executions(None, None, 1000):
        events = engine.store.history(row.execution_id) or []
        counts.update(event.TYPE for event in events)
        counts["every event"] += len(events)
    return counts


def test_every_counter_equals_the_events_of_the_histories(
    served: tuple[Engine, falcon.testing.TestClient],
) -> None:
    engine, client = served
    for n in (1, 2, 3, 200):
        engine.start("Flow", input={"n": n}, execution_id=f"flow-{n}")
    engine.start("Child", input={"n": 5}, execution_id="alone")
    engine.start("Flow", input={"n": 7}, execution_id="cancelled")
    engine.cancel("cancelled")
    run_until_idle(engine)
    statuses = {
        row.execution_id: row.status for row in engine.store.list_executions(None, None, 50)
    }
    assert statuses["flow-1"] == "COMPLETED"
    assert statuses["flow-3"] == "FAILED"
    assert statuses["cancelled"] == "CANCELLED"

    text, samples = scrape(client)
    events = history_counts(engine)
    assert events["RetryScheduled"] and events["StepSkipped"] and events["CompensationStarted"]
    for family, event_type in COUNTED.items():
        assert samples[f"{family}_total"] == events[event_type], family
    assert samples["orbit_events_committed_total"] == events["every event"]
    assert samples["orbit_schedules_fired_total"] == 0
    assert samples['orbit_schedules_skipped_total{reason="overlap"}'] == 0
    assert samples['orbit_schedules_skipped_total{reason="missed"}'] == 0
    assert samples["orbit_engine_faults_total"] == 0
    assert samples["orbit_active_executions"] == 0
    assert samples["orbit_worker_sessions"] == 1  # the in-process handlers
    assert f"# HELP orbit_executions_started_total {HELP['orbit_executions_started']}\n" in text
    assert "# TYPE orbit_executions_started_total counter\n" in text
    assert "# TYPE orbit_active_executions gauge\n" in text


def test_the_families_are_the_chapters(served: tuple[Engine, falcon.testing.TestClient]) -> None:
    _, samples = scrape(served[1])
    names = {name.split("{")[0] for name in samples}
    assert names == {
        *(f"{family}_total" for family in HELP),
        "orbit_schedules_fired_total",
        "orbit_schedules_skipped_total",
        "orbit_engine_faults_total",
        "orbit_active_executions",
        "orbit_worker_sessions",
    }
    # The book's 20 families, the engine's faults, restarts and forks (issue 38)
    # and flow control's two (issue 39).
    assert len(names) == 20 + 1 + 2 + 2


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_text(served: tuple[Engine, falcon.testing.TestClient]) -> None:
    text, _ = scrape(served[1])
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr


# Every family's HELP and TYPE lines, in the order they are served. Where
# chapters 46 and 67 print a family, its HELP is the book's text.
HELP_LINES = """\
# HELP orbit_executions_started_total Executions started
# TYPE orbit_executions_started_total counter
# HELP orbit_executions_completed_total Executions completed
# TYPE orbit_executions_completed_total counter
# HELP orbit_executions_failed_total Executions failed
# TYPE orbit_executions_failed_total counter
# HELP orbit_executions_cancelled_total Executions cancelled
# TYPE orbit_executions_cancelled_total counter
# HELP orbit_executions_timed_out_total Executions timed out
# TYPE orbit_executions_timed_out_total counter
# HELP orbit_tasks_dispatched_total Task attempts dispatched, redeliveries included
# TYPE orbit_tasks_dispatched_total counter
# HELP orbit_tasks_succeeded_total Units that succeeded, compensations included
# TYPE orbit_tasks_succeeded_total counter
# HELP orbit_task_attempts_failed_total Task attempts that failed, retried or not
# TYPE orbit_task_attempts_failed_total counter
# HELP orbit_task_attempts_uncertain_total Task attempts whose outcome is unknown
# TYPE orbit_task_attempts_uncertain_total counter
# HELP orbit_retries_scheduled_total Retries scheduled
# TYPE orbit_retries_scheduled_total counter
# HELP orbit_steps_skipped_total Steps skipped by their when condition
# TYPE orbit_steps_skipped_total counter
# HELP orbit_stale_results_total Late or duplicate task results ignored
# TYPE orbit_stale_results_total counter
# HELP orbit_compensations_started_total Executions that started compensating
# TYPE orbit_compensations_started_total counter
# HELP orbit_compensations_failed_total Compensations that failed for good
# TYPE orbit_compensations_failed_total counter
# HELP orbit_events_committed_total History events committed
# TYPE orbit_events_committed_total counter
# HELP orbit_executions_continued_as_new_total Runs ended by continue_as_new
# TYPE orbit_executions_continued_as_new_total counter
# HELP orbit_executions_restarted_total Runs ended by an operator's restart
# TYPE orbit_executions_restarted_total counter
# HELP orbit_executions_forked_total Executions started by an operator's fork
# TYPE orbit_executions_forked_total counter
# HELP orbit_executions_delayed_total Executions a concurrency limit held back
# TYPE orbit_executions_delayed_total counter
# HELP orbit_executions_admitted_total Held-back executions let in by a freed slot
# TYPE orbit_executions_admitted_total counter
# HELP orbit_schedules_fired_total Schedule occurrences that started an execution
# TYPE orbit_schedules_fired_total counter
# HELP orbit_schedules_skipped_total Schedule occurrences that started nothing
# TYPE orbit_schedules_skipped_total counter
# HELP orbit_engine_faults_total Failures the engine handled itself, all components together
# TYPE orbit_engine_faults_total counter
# HELP orbit_active_executions Executions not yet finished
# TYPE orbit_active_executions gauge
# HELP orbit_worker_sessions Registered worker sessions
# TYPE orbit_worker_sessions gauge
"""


def test_the_help_lines_are_the_books(served: tuple[Engine, falcon.testing.TestClient]) -> None:
    text, _ = scrape(served[1])
    comments = "".join(f"{line}\n" for line in text.splitlines() if line.startswith("#"))
    assert comments == HELP_LINES


def test_only_schedules_skipped_has_a_label(
    served: tuple[Engine, falcon.testing.TestClient],
) -> None:
    # Chapter 46: no labels, except `reason` on orbit_schedules_skipped_total.
    _, samples = scrape(served[1])
    labelled = sorted(name for name in samples if "{" in name)
    assert labelled == [
        'orbit_schedules_skipped_total{reason="missed"}',
        'orbit_schedules_skipped_total{reason="overlap"}',
    ]
