"""`orbit logs`: an execution's history, as a timeline or as raw events."""

from __future__ import annotations

import click

from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import compact_json, out
from orbit_cli.redact import redact_event
from orbit_cli.timeline import timeline


@click.command("logs", short_help="Show an execution's event history as a timeline")
@click.argument("execution_id")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON event per line, sensitive values masked."
)
@click.option(
    "--run",
    type=click.IntRange(min=1),
    metavar="N",
    help="Show run N of an execution that continued as new (default: the latest run).",
)
@click.option(
    "--archived",
    is_flag=True,
    help="Read the execution from the archive (swept by a server with --retention).",
)
@connection_options
def cli(
    client: RuntimeClient, execution_id: str, as_json: bool, run: int | None, archived: bool
) -> None:
    """Print the recorded events of EXECUTION_ID, oldest first, each with the
    time since the first event, its sequence number, its type and the fields
    that matter for reading the story.
    """
    where = ("v1", "archive", "executions") if archived else ("v1", "executions")
    history = client.get(path(*where, execution_id, "history"), run=run)
    events = history.get("events", []) if isinstance(history, dict) else []
    if as_json:
        for event in events:
            out(compact_json(redact_event(event)))
        return
    for line in timeline(events):
        out(line)
