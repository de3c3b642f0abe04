"""`orbit help` (chapter 66), the options chapter 66 lists for graph, docs and
schema, and "did you mean" for mistyped names of these commands."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orbit_cli.main import cli

FLAGS = {
    "graph": ["--workflow", "--format", "--sequence", "-o, --output"],
    "docs": ["-o, --output", "--format", "--json-schema"],
    "schema": ["--workflow", "-o, --output"],
}


def orbit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_the_options_chapter_66_lists(command: str) -> None:
    code, out, _ = orbit(command, "--help")
    assert code == 0
    for flag in FLAGS[command]:
        assert flag in out
    for choice in {"graph": ["mermaid", "dot", "svg"], "docs": ["markdown", "html"]}.get(
        command, []
    ):
        assert choice in out


def test_help_alone_is_the_top_level_help() -> None:
    code, out, _ = orbit("help")
    assert code == 0
    assert out == orbit("--help")[1]
    for command in ("graph", "docs", "schema", "help"):
        assert f"\n  {command} " in out


def test_help_is_listed_last() -> None:
    listing = orbit("--help")[1].split("Commands:")[1].splitlines()
    names = [line.split()[0] for line in listing if line.strip()]
    assert names[-1] == "help"


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["graph"], ["graph", "--help"]), (["schedule", "create"], ["schedule", "create", "--help"])],
)
def test_help_of_a_command_is_its_help_text(args: list[str], expected: list[str]) -> None:
    code, out, _ = orbit("help", *args)
    assert code == 0
    assert out == orbit(*expected)[1]


@pytest.mark.parametrize(
    ("typed", "meant"), [("grpah", "graph"), ("doc", "docs"), ("schma", "schema")]
)
def test_mistyped_commands_get_did_you_mean(typed: str, meant: str) -> None:
    code, _, err = orbit(typed)
    assert code == 2
    assert f"error: no such command '{typed}'" in err and f"'{meant}'" in err
    code, _, err = orbit("help", typed)
    assert code == 2
    assert f"'{meant}'" in err


def test_help_of_a_subcommand_of_a_plain_command_is_a_usage_error() -> None:
    code, _, err = orbit("help", "check", "extra")
    assert code == 2
    assert "has no subcommands" in err


def test_the_listing_has_the_chapters_one_line_summaries() -> None:
    # Long summaries wrap at the terminal's width; compare the words.
    words = " ".join(orbit("--help")[1].split())
    for summary in (
        "graph Render a workflow as a diagram (Mermaid, Graphviz DOT or SVG)",
        "docs Generate reference documentation for workflows and task contracts",
        "schema Export JSON Schema (draft 2020-12) for workflow inputs, outputs, signals,"
        " queries and task contracts",
    ):
        assert summary in words
