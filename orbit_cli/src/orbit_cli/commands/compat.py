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
from orbit_lang.compat import Report, Side, compare


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
@click.option(
    "--server",
    metavar="URL",
    help="Also warn when live executions of an old version on this runtime wait "
    "in a step the new version changes.",
)
@click.option(
    "--token",
    envvar="ORBIT_TOKEN",
    metavar="TOKEN",
    help="Bearer token for --server.",
)
def compat(old: str, new: str, output_format: str, server: str | None, token: str | None) -> None:
    """Check that new workflow and contract versions are compatible with old ones.

    OLD and NEW are each a .orbit file (imports are followed) or a compiled IR
    .json file. Exit 0 without error findings, 1 with any, 2 when a file cannot
    be read or compiled. With --server, steps that live executions of the old
    version wait in and that the new version changes get a warning pointing
    to `orbit migrate plan`.
    """
    old_side, new_side = load_side(old), load_side(new)
    report = compare(old_side, new_side)
    if server is not None:
        report = _with_live_waits(report, old_side, new_side, server, token)
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


def _with_live_waits(
    report: Report, old: Side, new: Side, server: str, token: str | None
) -> Report:
    from orbit_cli.client import ClientConfig, RuntimeClient
    from orbit_cli.live_waits import findings

    with RuntimeClient(ClientConfig(server, token or None)) as client:
        extra = findings(client, old, new)
    return Report(report.findings + tuple(extra))


cli = compat
