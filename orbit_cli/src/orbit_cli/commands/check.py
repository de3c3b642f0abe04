"""`orbit check FILES...`: compile the files and report, writing nothing.

A folder among FILES stands for the `.orbit` files below it.

Human format: diagnostics on stderr, then one `ok Name@version (N steps)` line
per workflow on stdout (children first, then load order), or `ok no workflows
(contracts only)`. JSON format: `{"diagnostics": [...]}` on stdout only.
Exit 1 on an error, on a warning with --strict, or with no files.
"""

from __future__ import annotations

import sys

import click

from orbit_cli.sources import expand_folders, policy_option, print_notices, stderr_colour
from orbit_lang import CompileResult, check_paths
from orbit_lang.policy import Policy, apply_policies
from orbit_lang.render import error_line, render_json, render_report


@click.command("check", short_help="Type-check workflow files without producing output")
@click.argument("files", nargs=-1)
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["human", "json"]),
    default="human",
    show_default=True,
    help="human: diagnostics on stderr, one ok line per workflow on stdout; "
    'json: {"diagnostics": [...]} on stdout.',
)
@policy_option("Also check the workflows against an organisation policy (TOML). Repeatable.")
def check(
    files: tuple[str, ...], strict: bool, output_format: str, policies: tuple[Policy, ...]
) -> None:
    """Type-check workflow files without producing output.

    A folder stands for every .orbit file below it.
    """
    color = stderr_colour(files)
    result, notices = apply_policies(check_paths(expand_folders(files), strict=strict), policies)
    if output_format == "json":
        click.echo(render_json(result.diagnostics), nl=False)
    else:
        print_notices(notices)
        report(result, color=color)
    sys.exit(0 if result.ok else 1)


def report(result: CompileResult, *, color: bool) -> None:
    """Diagnostics and the closing line on stderr, ok lines on stdout."""
    click.echo(render_report(result.diagnostics, result.sources, color=color), nl=False, err=True)
    if result.errors:
        return
    if result.strict and result.warnings:
        message = f"{result.warnings} warning(s) treated as errors (--strict)"
        click.echo(error_line(message, color=color), nl=False, err=True)
        return
    for line in ok_lines(result):
        click.echo(line)


def ok_lines(result: CompileResult) -> list[str]:
    """`ok Name@version (N steps)` per workflow, children first (N counts main
    steps; the plural is literal), or the contracts-only line."""
    if not result.workflows:
        return ["ok no workflows (contracts only)"]
    return [
        f"ok {w.definition.name}@{w.definition.version} ({len(w.node.steps)} steps)"
        for w in result.workflows
    ]


# The lazy command table imports each command module as `cli`.
cli = check
