"""`orbit diff OLD NEW`: what a process does differently between two
versions, with the `orbit compat` verdict (chapter 57).

The comparison is `orbit_cli.processdiff`; this command loads the two sides
(`orbit_cli.versions`, exit 2 for a side that cannot be loaded) and prints
text (coloured on a terminal), Markdown for a pull request, or JSON.
"""

from __future__ import annotations

import sys

import click

from orbit_cli.output import colour_enabled, out, pretty_json
from orbit_cli.processdiff import diff as compute_diff
from orbit_cli.processdiff import render_markdown, render_text
from orbit_cli.versions import BadInput, load_side


@click.command(
    "diff",
    short_help="Show what changed in a process between two versions, with the compatibility verdict",
)
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@click.option("--workflow", metavar="WORKFLOW", help="Only this workflow.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="text: one line per change and a summary line; markdown: a section for a "
    "pull request; json: one object.",
)
@click.option(
    "--exit-code", is_flag=True, help="Exit with status 1 when there are changes (0 when none)."
)
def diff(old: str, new: str, workflow: str | None, output_format: str, exit_code: bool) -> None:
    """Show what changed in a process between two versions, with the compatibility verdict.

    OLD and NEW are each a .orbit file (imports are followed) or a compiled IR
    .json file. An incompatible change does not change the exit status; use
    `orbit compat` for that.
    """
    before, after = load_side(old), load_side(new)
    if workflow is not None and not any(
        d.name == workflow for d in (*before.definitions, *after.definitions)
    ):
        raise BadInput(f"no workflow `{workflow}` in either version")
    result = compute_diff(before, after, workflow=workflow)
    if output_format == "json":
        out(pretty_json(result.to_json()))
    elif output_format == "markdown":
        click.echo(render_markdown(result), nl=False)
    else:
        paint = click.style if colour_enabled(sys.stdout) else None
        click.echo(render_text(result, paint), nl=False)
    sys.exit(1 if exit_code and result.changed else 0)


cli = diff
