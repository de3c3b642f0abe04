"""`orbit status`: an execution's outcome and one row per unit."""

from __future__ import annotations

import click

from orbit_cli import execution
from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import out, paint


def _paint(text: str, colour: str | None) -> str:
    return paint(text, err=False, fg=colour) if colour else text


@click.command("status", short_help="Show an execution's status and steps")
@click.argument("execution_id")
@click.option(
    "--archived",
    is_flag=True,
    help="Read the execution from the archive (swept by a server with --retention).",
)
@connection_options
def cli(client: RuntimeClient, execution_id: str, archived: bool) -> None:
    """Show how EXECUTION_ID stands: status, elapsed time, compensation and
    error, then every unit that has started, in the order it last changed,
    with its attempt, duration and the worker or error behind it.
    """
    where = ("v1", "archive", "executions") if archived else ("v1", "executions")
    state = client.get(path(*where, execution_id))
    for line in execution.header(state, _paint):
        out(line)
    units = execution.touched_units(state)
    if units:
        out()
        out(execution.TABLE_HEADER)
        waiting = execution.unserved(state)
        for key, unit in units:
            out(execution.table_row(key, unit, waiting.get(key)))
    output = execution.output_line(state)
    if output is not None:
        out()
        out(output)
