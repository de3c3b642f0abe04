"""Every failure of `orbit` starts with chapter 66's `error:` prefix on
stderr: API and file errors (exit 1) and click's own usage errors (exit 2),
which follow with the usage line and where to read more."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orbit_cli.main import cli


@pytest.mark.parametrize(
    ("args", "first_line", "usage"),
    [
        (
            ["run", "--nope", "x"],
            "error: no such option '--nope'",
            "Usage: orbit run [OPTIONS] TARGET",
        ),
        (["run"], "error: missing argument 'TARGET'.", "Usage: orbit run [OPTIONS] TARGET"),
        (
            ["frobnicate"],
            "error: no such command 'frobnicate'.",
            "Usage: orbit [OPTIONS] COMMAND [ARGS]...",
        ),
        (
            ["replay", "x", "--history", "h.json"],
            "error: give an execution id or --history, not both",
            "Usage: orbit replay [OPTIONS] [EXECUTION_ID]",
        ),
    ],
)
def test_usage_errors_say_error_first_then_the_usage(
    args: list[str], first_line: str, usage: str
) -> None:
    result = CliRunner(env={"NO_COLOR": "1"}).invoke(cli, args, prog_name="orbit")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith(first_line), result.stderr
    assert "Error:" not in result.stderr
    assert lines[1:3] == ["", usage]
    command = usage.split(" [", maxsplit=1)[0].removeprefix("Usage: ")
    assert lines[-1] == f"For more information, try '{command} --help'."


def test_a_failure_is_one_error_line() -> None:
    result = CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["run", "missing.orbit"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot read missing.orbit")


def test_a_clean_run_exits_0() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("orbit ")
