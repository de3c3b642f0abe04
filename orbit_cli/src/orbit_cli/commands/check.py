"""`orbit check FILES...`: load and parse the files, then report.

The steps are load -> parse (both in `load_program`) -> report; the type
checker adds its diagnostics between loading and reporting.
"""

from __future__ import annotations

import sys

import click

from orbit_lang.diagnostics import Diagnostic, count
from orbit_lang.loader import Program, load_program
from orbit_lang.render import error_line, render_json, render_report, should_color


@click.command("check")
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
def check(files: tuple[str, ...], strict: bool, output_format: str) -> None:
    """Check ORBIT files (and everything they import) without producing output."""
    color = should_color(sys.stderr)
    if not files:
        click.echo(error_line("no input files", color=color), nl=False, err=True)
        sys.exit(1)
    program, diagnostics = load_program(files)
    errors, warnings = count(diagnostics)
    failed = errors > 0 or (strict and warnings > 0)
    if output_format == "json":
        click.echo(render_json(diagnostics), nl=False)
    else:
        _report(program, diagnostics, strict=strict, color=color)
    sys.exit(1 if failed else 0)


def _report(program: Program, diagnostics: list[Diagnostic], *, strict: bool, color: bool) -> None:
    errors, warnings = count(diagnostics)
    click.echo(render_report(diagnostics, program.sources, color=color), nl=False, err=True)
    if errors:
        return
    if strict and warnings:
        message = f"{warnings} warning(s) treated as errors (--strict)"
        click.echo(error_line(message, color=color), nl=False, err=True)
        return
    for line in ok_lines(program):
        click.echo(line)


def ok_lines(program: Program) -> list[str]:
    """`ok Name@version (N steps)` per workflow in load order (N counts main
    steps; the plural is literal), or the contracts-only line."""
    workflows = program.workflows
    if not workflows:
        return ["ok no workflows (contracts only)"]
    return [
        f"ok {workflow.name.name}@{workflow.version or ''} ({len(workflow.steps)} steps)"
        for workflow in workflows
    ]


# The lazy command table imports each command module as `cli`.
cli = check
