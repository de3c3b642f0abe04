"""`orbit compat OLD NEW`: are the new workflow and contract versions
compatible with the old ones (chapter 50)?

The rules live in `orbit_lang.compat`; this command loads the two sides
(`orbit_cli.versions`) and prints the findings: one line each on stdout, and
`error: compatibility check failed: ...` on stderr when any is an error; or
one JSON report. Exit 0 without errors, 1 with one, 2 for a side that cannot
be loaded.
"""

from __future__ import annotations

import sys

import click

from orbit_cli.output import out, pretty_json
from orbit_cli.versions import load_side
from orbit_lang.compat import compare


@click.command(
    "compat",
    short_help="Check that new workflow and contract versions are compatible with old ones",
)
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["human", "json"]),
    default="human",
    show_default=True,
    help="human: one line per finding on stdout; json: one report object on stdout.",
)
def compat(old: str, new: str, output_format: str) -> None:
    """Check that new workflow and contract versions are compatible with old ones.

    OLD and NEW are each a .orbit file (imports are followed) or a compiled IR
    .json file. Exit 0 without error findings, 1 with any, 2 when a file cannot
    be read or compiled.
    """
    report = compare(load_side(old), load_side(new))
    if output_format == "json":
        out(pretty_json(report.to_json()))
    else:
        for finding in report.findings:
            out(finding.line())
        if report.errors:
            from orbit_lang.render import error_line, should_color

            message = (
                f"compatibility check failed: {report.errors} error(s), "
                f"{report.warnings} warning(s)"
            )
            click.echo(error_line(message, color=should_color(sys.stderr)), nl=False, err=True)
    sys.exit(1 if report.errors else 0)


cli = compat
