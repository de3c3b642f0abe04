"""`orbit diff` (chapter 57): the chapter's transcripts as golden files,
the JSON shape, renames, --workflow, --exit-code and bad input."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli

# The golden fixture of conftest.py: (name, actual text).
Golden = Callable[[str, str], None]
FIXTURES = Path(__file__).parent / "fixtures" / "diff"


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(FIXTURES, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def orbit(*args: str) -> Result:
    return CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["diff", *args])


@pytest.mark.parametrize(
    ("name", "args", "status"),
    [
        ("diff_approval_v2", ["approval.orbit", "v2/approval.orbit"], 0),
        (
            "diff_approval_v2_markdown",
            ["approval.orbit", "v2/approval.orbit", "--format", "markdown"],
            0,
        ),
        ("diff_approval_v3", ["approval.orbit", "v3/approval.orbit", "--exit-code"], 1),
        ("diff_subscription_v2", ["subscription.orbit", "v2/subscription.orbit"], 0),
    ],
)
def test_the_chapter_transcripts(
    book: Path, golden: Golden, name: str, args: list[str], status: int
) -> None:
    result = orbit(*args)
    assert result.exit_code == status, result.output
    assert result.stderr == ""
    golden(name, result.stdout)


def test_the_json_output_has_the_chapters_keys(book: Path) -> None:
    result = orbit("approval.orbit", "v2/approval.orbit", "--format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    picked = {
        "summary": document["summary"],
        "changes": document["changes"],
        "status": document["workflows"][0]["status"],
        "rename": document["workflows"][0]["changes"][1],
        "compatible": document["compatibility"]["compatible"],
    }
    # The chapter's `jq -c` line.
    assert json.dumps(picked, separators=(",", ":"), ensure_ascii=False) == (
        '{"summary":"workflows: 1 changed; 7 change(s): 2 added, 4 changed, 1 renamed; '
        'compatibility: compatible","changes":7,"status":"changed","rename":{"kind":"renamed",'
        '"area":"step","subject":"notify","old":"notify","new":"tell_customer"},"compatible":true}'
    )


def test_no_change_exits_0_even_with_exit_code(book: Path) -> None:
    result = orbit("approval.orbit", "approval.orbit", "--exit-code")
    assert result.exit_code == 0
    assert result.stdout.endswith("compatibility: compatible\n")


def test_formatting_and_comments_are_not_changes(book: Path) -> None:
    source = (book / "approval.orbit").read_text()
    reformatted = source.replace("    step decision {", "    // a comment\n\n    step   decision {")
    (book / "other.orbit").write_text(reformatted)
    assert orbit("approval.orbit", "other.orbit", "--exit-code").exit_code == 0


def test_two_removed_steps_calling_the_same_task_are_not_renames(book: Path) -> None:
    source = (book / "approval.orbit").read_text()
    twice = source.replace(
        "    query status",
        '    step ping { worker "notifications.send" after notify with { customer_id: "a", '
        'message: "b" } }\n\n    query status',
    )
    (book / "twice.orbit").write_text(twice)
    renamed = twice.replace("step ping", "step ping2").replace("step notify", "step tell")
    renamed = renamed.replace("after notify", "after tell")
    (book / "renamed.orbit").write_text(renamed)
    result = orbit("twice.orbit", "renamed.orbit")
    assert "> step" not in result.stdout
    assert "  - step: notify" in result.stdout
    assert "  + step: tell" in result.stdout


def test_a_single_renamed_step_keeps_dependencies_on_it_unchanged(book: Path) -> None:
    source = (book / "approval.orbit").read_text()
    renamed = source.replace("step charge {", "step pay {").replace("after charge", "after pay")
    renamed = renamed.replace("charge.transaction_id", "pay.transaction_id")
    renamed = renamed.replace("is_null(charge)", "is_null(pay)")
    (book / "renamed.orbit").write_text(renamed)
    result = orbit("approval.orbit", "renamed.orbit")
    assert "  > step: charge: charge → pay" in result.stdout
    assert "dependency" not in result.stdout
    # Expressions that name the old step do change.
    assert "~ step input: notify:" in result.stdout


def test_workflow_option_reports_one_workflow(book: Path) -> None:
    result = orbit("approval.orbit", "v2/approval.orbit", "--workflow", "OrderApproval")
    assert result.exit_code == 0
    assert result.stdout.startswith("workflow OrderApproval 1.0.0 → 1.1.0\n")


def test_an_unknown_workflow_is_a_usage_error(book: Path) -> None:
    result = orbit("approval.orbit", "v2/approval.orbit", "--workflow", "Nope")
    assert result.exit_code == 2
    assert result.stderr == "error: no workflow `Nope` in either version\n"


def test_a_missing_file_is_a_usage_error(book: Path) -> None:
    result = orbit("approval.orbit", "missing.orbit")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot read missing.orbit")


def test_compiled_ir_compares_like_source(book: Path) -> None:
    compiled = CliRunner().invoke(cli, ["compile", "approval.orbit", "-o", "build"])
    assert compiled.exit_code == 0, compiled.output
    from_ir = orbit("build/approval.orbit.json", "v2/approval.orbit")
    assert from_ir.stdout == orbit("approval.orbit", "v2/approval.orbit").stdout


def test_declared_contract_changes_are_reported(book: Path) -> None:
    contracts = (book / "contracts.orbit").read_text()
    (book / "v2" / "contracts.orbit").write_text(
        contracts.replace(
            "input { customer_id: String, message: String }",
            "input { customer_id: String, message: String, cc: String? }",
        )
    )
    result = orbit("approval.orbit", "v2/approval.orbit")
    assert "contracts\n  + contract: notifications.send input.cc: String?\n" in result.stdout
