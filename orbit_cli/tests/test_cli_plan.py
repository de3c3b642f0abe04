"""`orbit plan` (issue 44): per workflow the envelope's figures, as text and
JSON, W1340/W1341 against the server's limits, usage and compile errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from orbit_cli.main import cli

FIXTURES = Path(__file__).parent / "fixtures" / "plan"
ORDERS = str(FIXTURES / "orders.orbit")


def orbit(*args: str) -> Result:
    return CliRunner(env={"NO_COLOR": "1"}).invoke(cli, list(args), catch_exceptions=False)


def test_json_gives_the_worst_case_events_per_run_as_a_number() -> None:
    result = orbit("plan", ORDERS, "--json")
    assert result.exit_code == 0, result.output
    (orders,) = json.loads(result.stdout)["workflows"]
    assert orders["workflow"] == "Orders"
    # Created, Started, the step's Scheduled, Dispatched, AttemptFailed and
    # StepFailed, the abort's cause, WorkflowFailed.
    assert orders["worst_case"]["events"] == 8
    assert orders["typical"]["events"] == 6
    assert orders["typical"]["dispatches"] == 1
    assert orders["unbounded"] == []
    assert orders["worst_case"]["history_bytes"] is None  # `customer: String`
    assert any("`customer`" in c["reason"] for c in orders["unbounded_bytes"])
    assert orders["executions_per_s"] > 0


def test_the_issue_example_prints_its_worst_case_events_as_a_number() -> None:
    # The interface check of issue 44 on the example every check uses.
    example = Path(__file__).resolve().parents[2] / "examples" / "visibility.orbit"
    result = orbit("plan", str(example), "--json")
    assert result.exit_code == 0, result.output
    (orders,) = json.loads(result.stdout)["workflows"]
    assert (orders["workflow"], orders["version"]) == ("Orders", "1.0.0")
    worst = orders["worst_case"]["events"]
    assert type(worst) is int
    assert worst >= orders["typical"]["events"] > 0


def test_text_with_a_start_rate_and_retention() -> None:
    result = orbit("plan", ORDERS, "--starts-per-s", "100", "--retention", "30d")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Orders@1.0.0  (per execution: typical path / worst case)"
    assert lines[1].split() == ["events", "6", "/", "8"]
    assert any(
        line.strip().startswith("storage") and "kept with --retention 30d" in line for line in lines
    )
    data = json.loads(
        orbit("plan", ORDERS, "--json", "--starts-per-s", "100", "--retention", "30d").stdout
    )
    (orders,) = data["workflows"]
    assert orders["storage_per_day_bytes"] == round(orders["stored_bytes"] * 100 * 86400)
    assert orders["storage_kept_bytes"] == orders["storage_per_day_bytes"] * 30


def test_the_server_limits_bound_a_fan_out_and_warn(tmp_path: Path) -> None:
    source = tmp_path / "batch.orbit"
    source.write_text(
        (FIXTURES / "orders.orbit").read_text().split("workflow Orders")[0]
        + """workflow Batch {
    version "1.0.0"
    input { items: List<String> }

    step each {
        for item in input.items
        worker "orders.work"
        with { customer: item }
    }
}
"""
    )
    unbounded = json.loads(orbit("plan", str(source), "--json").stdout)["workflows"][0]
    assert unbounded["worst_case"]["events"] is None
    assert unbounded["unbounded"][0]["reason"] == "`for` over `input.items` with no `max_fan_out`"
    result = orbit("plan", str(source), "--json", "--max-fan-out", "10")
    assert json.loads(result.stdout)["workflows"][0]["worst_case"]["events"] == 2 + (2 + 40) + 2
    result = orbit("plan", str(source), "--max-fan-out", "10", "--max-history-events", "20")
    assert result.exit_code == 0
    assert "warning[W1341]: a run of `Batch` can record up to 46 history events" in result.stderr
    assert "the server's --max-history-events 20" in result.stderr


def test_usage_and_compile_errors_exit_2(tmp_path: Path) -> None:
    assert orbit("plan", ORDERS, "--store", "oracle").exit_code == 2
    assert orbit("plan", ORDERS, "--retention", "soon").exit_code == 2
    broken = tmp_path / "broken.orbit"
    broken.write_text("workflow {")
    result = orbit("plan", str(broken))
    assert result.exit_code == 2
    assert "error[" in result.stderr


def test_docs_show_the_envelope_only_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "ref"
    assert orbit("docs", ORDERS, "-o", str(out)).exit_code == 0
    assert "Resource envelope" not in (out / "Orders.md").read_text()
    assert orbit("docs", ORDERS, "-o", str(out), "--envelope").exit_code == 0
    page = (out / "Orders.md").read_text()
    assert "## Resource envelope" in page
    assert "| History events | 6 | 8 |" in page
    assert "| `work` | 3 | 4 |" in page
    assert orbit("docs", ORDERS, "-o", str(out), "--envelope", "--format", "html").exit_code == 0
    assert "Resource envelope" in (out / "Orders.html").read_text()
