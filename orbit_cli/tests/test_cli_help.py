"""Every command answers --help, exits 0, and lists the flags the book names."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import Orbit

from orbit_cli.main import cli

CONNECTION = ["--server", "--token", "--ca-cert", "--client-cert", "--client-key"]
FLAGS = {
    "init": [],
    "check": ["--strict", "--format", "--policy"],
    "compile": ["--strict", "-o, --out-dir", "--stdout", "--policy"],
    "validate": [],
    "fmt": ["--check"],
    "lsp": [],
    "test": ["--format", "--filter"],
    "replay": ["--history", "--definition", "--workflow", "--at", "--run", "--json", *CONNECTION],
    "deploy": ["--policy", *CONNECTION],
    "run": [
        "--workflow",
        "--version",
        "--input",
        "--input-file",
        "--id",
        "--no-wait",
        "--retention",
        *CONNECTION,
    ],
    "status": CONNECTION,
    "inspect": CONNECTION,
    "logs": ["--json", "--run", *CONNECTION],
    "cancel": ["--reason", *CONNECTION],
    "signal": ["--data", *CONNECTION],
    "query": CONNECTION,
    "ps": ["--status", "--workflow", "--limit", *CONNECTION],
    "token": ["--worker", "--task", "--client", "--workflow", "--action"],
    "workers list": CONNECTION,
    "schedule create": [
        "--workflow",
        "--version",
        "--cron",
        "--every",
        "--timezone",
        "-i, --input",
        "--input-file",
        "--overlap",
        "--catchup",
        "--start-at",
        "--end-at",
        "--jitter",
        "--description",
        "--paused",
        *CONNECTION,
    ],
    "schedule update": [
        "--cron",
        "--every",
        "--timezone",
        "-i, --input",
        "--version",
        "--overlap",
        "--catchup",
        "--jitter",
        *CONNECTION,
    ],
    "schedule list": CONNECTION,
    "schedule get": ["--json", *CONNECTION],
    "schedule pause": CONNECTION,
    "schedule resume": CONNECTION,
    "schedule trigger": CONNECTION,
    "schedule delete": CONNECTION,
}


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_help(command: str) -> None:
    result = CliRunner().invoke(cli, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    for flag in FLAGS[command]:
        assert flag in result.stdout
    assert "-h, --help" in result.stdout


def test_top_level_help_lists_the_commands() -> None:
    result = CliRunner().invoke(cli, ["-h"])
    assert result.exit_code == 0
    for command in (
        "init",
        "check",
        "validate",
        "compile",
        "deploy",
        "run",
        "status",
        "inspect",
        "logs",
        "cancel",
        "signal",
    ):
        assert f"  {command} " in result.stdout


def test_environment_variables_are_documented() -> None:
    text = CliRunner().invoke(cli, ["status", "--help"]).stdout
    for variable in (
        "ORBIT_SERVER",
        "ORBIT_TOKEN",
        "ORBIT_CA_CERT",
        "ORBIT_CLIENT_CERT",
        "ORBIT_CLIENT_KEY",
    ):
        assert variable in text
    assert "http://127.0.0.1:7233" in text


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["frobnicate"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no such command 'frobnicate'.\n")


def test_a_mistyped_command_gets_did_you_mean() -> None:
    result = CliRunner().invoke(cli, ["statsu", "x"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no such command 'statsu'. Did you mean 'status'?\n")


@pytest.mark.parametrize("command", ["check", "compile", "deploy"])
def test_a_bad_policy_stops_the_command_before_anything_else(
    orbit: Orbit, tmp_path: Path, command: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[workflow]\n")
    source = tmp_path / "a.orbit"
    source.write_text("schema A { x: Int }\n")
    result = orbit(command, "--policy", str(policy), str(source))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: policy {policy}: unknown key `workflow`")


def test_cancel_help_is_the_books() -> None:
    """Chapter 66's `orbit cancel`: EXECUTION_ID in the usage, the book's
    description and --reason; the batch flags (beyond the book) are
    accepted but named only in the epilog."""
    result = CliRunner().invoke(cli, ["cancel", "--help"], prog_name="orbit")
    assert result.exit_code == 0
    text = result.stdout
    assert text.startswith("Usage: orbit cancel [OPTIONS] EXECUTION_ID\n")
    words = " ".join(text.split())
    assert (
        "Request cancellation of an execution. Work that has not started is withdrawn, "
        "in-flight attempts are awaited, and succeeded steps are compensated."
    ) in words
    assert (
        "--reason REASON Reason recorded in the CancelRequested event. [default: requested via API]"
    ) in words
    options = text.split("Options:")[1].split("\n\n")[0]
    for flag in ("--workflow", "--status", "--where", "--dry-run", "--json"):
        assert flag not in options
        assert flag in words  # in the epilog
    summary = CliRunner().invoke(cli, ["-h"]).stdout
    assert "  cancel    Request cancellation of an execution (runs compensations)\n" in summary
    missing = CliRunner().invoke(cli, ["cancel"])
    assert missing.exit_code == 2
