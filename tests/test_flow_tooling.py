"""Flow control in the tools (issue 39): `orbit graph`, `orbit docs` and
`orbit diff` show the declarations; `orbit compat` classifies changes to
them (info, and a warning when a workflow concurrency key changes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fixtures_orbit import demo_source

from orbit_cli.main import cli

V1 = ("1.0.0", "concurrency { max: 2, key: input.customer_id }", "priority: input.rank")


def write(folder: Path, name: str, version: str, workflow: str, step: str) -> str:
    path = folder / name
    path.write_text(
        demo_source(
            "PerCustomer",
            version=version,
            input="customer_id: String, rank: Int = 0",
            header=workflow,
            step=step,
        )
    )
    return str(path)


def orbit(*args: str) -> Result:
    return CliRunner(env={"NO_COLOR": "1"}).invoke(cli, list(args))


@pytest.fixture
def v1(tmp_path: Path) -> str:
    return write(tmp_path, "v1.orbit", *V1)


def test_graph_shows_the_declarations(v1: str) -> None:
    result = orbit("graph", v1, "--format", "mermaid")
    assert result.exit_code == 0, result.output
    assert "concurrency { max: 2, key: input.customer_id }" in result.stdout
    assert "priority: input.rank" in result.stdout


def test_docs_show_the_declarations(v1: str, tmp_path: Path) -> None:
    out = tmp_path / "site"
    result = orbit("docs", v1, "-o", str(out))
    assert result.exit_code == 0, result.output
    page = next(p for p in out.rglob("PerCustomer*") if p.is_file()).read_text()
    assert "| Flow control | `concurrency { max: 2, key: input.customer_id }` |" in page
    assert "`priority: input.rank`" in page


def test_diff_shows_each_declaration_that_changed(v1: str, tmp_path: Path) -> None:
    v2 = write(
        tmp_path,
        "v2.orbit",
        "1.1.0",
        "concurrency { max: 5, key: input.customer_id }",
        "fairness { key: input.customer_id }",
    )
    result = orbit("diff", v1, v2, "--format", "json")
    assert result.exit_code == 0, result.output
    (workflow,) = json.loads(result.stdout)["workflows"]
    changes = [c for c in workflow["changes"] if c["area"] == "flow control"]
    assert [(c["kind"], c["subject"], c["old"], c["new"]) for c in changes] == [
        ("added", "work", None, "fairness { key: input.customer_id }"),
        ("removed", "work", "priority: input.rank", None),
        (
            "changed",
            "workflow",
            "concurrency { max: 2, key: input.customer_id }",
            "concurrency { max: 5, key: input.customer_id }",
        ),
    ]


def test_compat_calls_flow_changes_compatible(v1: str, tmp_path: Path) -> None:
    v2 = write(tmp_path, "v2.orbit", "1.1.0", "concurrency { max: 5, key: input.customer_id }", "")
    result = orbit("compat", v1, v2, "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["compatible"] is True and report["warnings"] == 0
    messages = [f["message"] for f in report["findings"] if f["kind"] == "workflow"]
    assert (
        "workflow: flow control `concurrency { max: 2, key: input.customer_id }` changed to "
        "`concurrency { max: 5, key: input.customer_id }`"
    ) in messages
    assert "step work: flow control `priority: input.rank` removed" in messages


def test_compat_warns_when_the_concurrency_key_changes(v1: str, tmp_path: Path) -> None:
    v2 = write(tmp_path, "v2.orbit", "1.1.0", "concurrency { max: 2, key: input.rank }", "")
    result = orbit("compat", v1, v2, "--format", "json")
    report = json.loads(result.stdout)
    assert report["warnings"] == 1, report
    (warning,) = [f for f in report["findings"] if f["severity"] == "warning"]
    assert warning["message"].startswith("workflow concurrency key changed")
