"""`orbit --help` lists chapter 66's commands, in its order and with its
one-line summaries; the commands beyond the book follow them, before `help`."""

from __future__ import annotations

from click.testing import CliRunner

from orbit_cli.main import cli

# Chapter 66's `Commands:` listing (the program's output, so it is the contract).
BOOK = [
    ("init", "Create a new ORBIT project with an example workflow and workers"),
    ("check", "Type-check workflow files without producing output"),
    ("validate", "Check workflow files, and validate compiled IR (.json) files"),
    ("compile", "Compile workflow files to orbit-ir JSON"),
    ("fmt", "Format .orbit files in place (comments and line breaks are preserved)"),
    ("lsp", "Run the language server (LSP over stdio), used by editor extensions"),
    ("graph", "Render a workflow as a diagram (Mermaid, Graphviz DOT or SVG)"),
    ("docs", "Generate reference documentation for workflows and task contracts"),
    (
        "schema",
        "Export JSON Schema (draft 2020-12) for workflow inputs, outputs, signals,"
        " queries and task contracts",
    ),
    ("diff", "Show what changed in a process between two versions, with the compatibility verdict"),
    ("compat", "Check that new workflow and contract versions are compatible with old ones"),
    ("server", "Run the ORBIT runtime server"),
    ("deploy", "Compile and register workflow definitions with the runtime"),
    ("run", "Deploy (if given a file) and start a workflow, then follow it to completion"),
    ("status", "Show an execution's status and steps"),
    ("inspect", "Inspect a compiled IR file, or an execution's full state"),
    ("logs", "Show an execution's event history as a timeline"),
    ("cancel", "Request cancellation of an execution (runs compensations)"),
    ("signal", "Send a typed signal to a running execution"),
    ("query", "Evaluate a query declared in the workflow against an execution"),
    ("ps", "List recent executions"),
    ("token", "Generate a random bearer token and the workers-file entry for it"),
    ("workers", "Worker commands"),
    ("schedule", "Start workflows on a cron expression or a fixed interval"),
    ("test", "Run the `test` declarations in .orbit files, without a server or workers"),
    ("simulate", "Run a workflow locally with mocked or generated task results"),
    ("replay", "Re-run a recorded history through the current decider and report divergences"),
]


def _listed() -> list[tuple[str, str]]:
    ctx = cli.make_context("orbit", [], resilient_parsing=True)
    group = ctx.command
    assert isinstance(group, type(cli))
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        out.append((name, command.get_short_help_str(limit=1000)))
    return out


def test_the_books_commands_come_first_with_its_summaries() -> None:
    listed = _listed()
    assert listed[: len(BOOK)] == BOOK


def test_help_comes_last_and_the_extensions_between() -> None:
    listed = [name for name, _ in _listed()]
    assert listed[-1] == "help"
    extensions = listed[len(BOOK) : -1]
    assert extensions and not set(extensions) & {name for name, _ in BOOK}


def test_the_listing_prints_each_summary() -> None:
    out = CliRunner().invoke(cli, ["--help"]).output
    assert "  init      Create a new ORBIT project with an example workflow and workers\n" in out
    assert "  status    Show an execution's status and steps\n" in out
