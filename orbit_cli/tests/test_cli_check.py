"""`orbit check`: ok lines, exit codes, human and JSON output (chapters 06, 07, 66)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")


def _check(*args: str) -> Result:
    return CliRunner().invoke(cli, ["check", *args])


def test_hello_example_checks(project: Path) -> None:
    result = _check(str(EXAMPLES / "hello.orbit"))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "ok Hello@1.0.0 (2 steps)\n", "")


def test_one_ok_line_per_workflow_in_load_order(project: Path) -> None:
    _write(
        project,
        {
            "main.orbit": 'import "lib.orbit"\nworkflow Main {\n version "1.0.0"\n'
            " step a { sleep 1s }\n}\n",
            "lib.orbit": 'workflow Lib { version "1.0.0" }\n',
        },
    )
    result = _check("main.orbit")
    assert result.exit_code == 0
    assert result.stdout == "ok Lib@1.0.0 (0 steps)\nok Main@1.0.0 (1 steps)\n"


def test_steps_of_handlers_are_not_counted(project: Path) -> None:
    _write(
        project,
        {
            "h.orbit": 'workflow H {\n version "2.0.0"\n step a { sleep 1s }\n'
            " on failure { step b { sleep 1s } }\n}\n"
        },
    )
    assert _check("h.orbit").stdout == "ok H@2.0.0 (1 steps)\n"


def test_contracts_only(project: Path) -> None:
    _write(project, {"contracts.orbit": 'task "a.run" { version "1.0.0" }\n'})
    result = _check("contracts.orbit")
    assert (result.exit_code, result.stdout) == (0, "ok no workflows (contracts only)\n")


def test_errors_exit_1_with_the_summary_on_stderr(project: Path) -> None:
    _write(project, {"bad.orbit": 'workflow Bad {\n version "1.0.0"\n}\n\nstep orphan { }\n'})
    result = _check("bad.orbit")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "error[E0104]: expected a declaration, found `step`\n"
        " --> bad.orbit:5:1\n"
        "  |\n"
        "5 | step orphan { }\n"
        "  | ^^^^\n"
        "  = note: top-level declarations are `workflow`, `schema`, `task`, `import` and `test`\n"
        "\n"
        "error: compilation failed: 1 error(s), 0 warning(s)\n"
    )


def test_every_file_is_checked_and_reported(project: Path) -> None:
    _write(project, {"a.orbit": "#\n", "b.orbit": "$\n"})
    result = _check("a.orbit", "b.orbit", "missing.orbit")
    assert result.exit_code == 1
    assert result.stderr.count("error[") == 3
    assert (
        "error[E0206]: cannot read `missing.orbit`: No such file or directory (os error 2)\n"
        in (result.stderr)
    )
    assert result.stderr.endswith("error: compilation failed: 3 error(s), 0 warning(s)\n")


def test_json_format(project: Path) -> None:
    _write(project, {"bad.orbit": "workflow W {\n  version 1\n}\n"})
    result = _check("--format", "json", "bad.orbit")
    assert result.exit_code == 1
    assert result.stderr == ""
    # The parser resumes at the token it stopped on, which is then an unknown
    # member: the same cascade as chapter 26's example; the workflow is then
    # left without a version.
    missing, diagnostic, cascade = json.loads(result.stdout)["diagnostics"]
    assert (cascade["code"], missing["code"]) == ("E0102", "E0500")
    assert diagnostic == {
        "severity": "error",
        "code": "E0100",
        "message": "expected a version string, found `1`",
        "location": {"file": "bad.orbit", "line": 2, "column": 11},
        "end_line": 2,
        "end_column": 12,
        "labels": [],
        "notes": [],
        "help": None,
    }


def test_json_format_without_diagnostics(project: Path) -> None:
    result = _check("--format", "json", str(EXAMPLES / "hello.orbit"))
    assert (result.exit_code, result.stdout) == (0, '{\n  "diagnostics": []\n}\n')


def test_no_files_is_an_error(project: Path) -> None:
    result = _check()
    assert (result.exit_code, result.stderr) == (1, "error: no input files\n")


def test_strict_turns_warnings_into_a_failure(project: Path) -> None:
    _write(project, {"v.orbit": 'workflow V {\n version "1.0"\n step a { sleep 1s }\n}\n'})
    relaxed = _check("v.orbit")
    assert (relaxed.exit_code, relaxed.stdout) == (0, "ok V@1.0 (1 steps)\n")
    assert relaxed.stderr.startswith(
        "warning[W0201]: version `1.0` is not semantic (MAJOR.MINOR.PATCH)\n"
    )
    strict = _check("--strict", "v.orbit")
    assert (strict.exit_code, strict.stdout) == (1, "")
    assert strict.stderr.endswith("error: 1 warning(s) treated as errors (--strict)\n")
    assert _check("--strict", "--format", "json", "v.orbit").exit_code == 1


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(cli, ["check", "--help"])
    assert result.exit_code == 0
    assert "--strict" in result.stdout and "--format [human|json]" in result.stdout


def test_a_folder_checks_the_orbit_files_below_it(project: Path) -> None:
    workflows = project / "workflows"
    (workflows / "more").mkdir(parents=True)
    (workflows / ".hidden").mkdir()
    (workflows / "hello.orbit").write_text(
        (EXAMPLES / "hello.orbit").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (workflows / "more" / "contracts.orbit").write_text(
        'task "a.b" { version "1.0.0" input { x: Int } output { y: Int } }\n', encoding="utf-8"
    )
    (workflows / ".hidden" / "broken.orbit").write_text("workflow {", encoding="utf-8")
    (workflows / "notes.txt").write_text("not orbit", encoding="utf-8")
    result = _check("workflows")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "ok Hello@1.0.0 (2 steps)\n", "")
    (project / "empty").mkdir()
    result = _check("empty")
    assert (result.exit_code, result.stdout, result.stderr) == (
        1,
        "",
        "error: no .orbit files in folder `empty`\n",
    )
