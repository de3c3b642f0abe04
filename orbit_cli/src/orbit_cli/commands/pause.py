"""`orbit pause`: hold a running execution (beyond the book; see
docs/operating-executions.md). With `--workflow` instead of an id it pauses
every execution the filter selects, as a batch job on the server."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli import operate
from orbit_cli.client import RuntimeClient, connection_options


@click.command("pause", short_help="Pause a running execution (or a batch of them)")
@click.argument("execution_id", required=False)
@click.option("--reason", metavar="TEXT", help="Why, as recorded in the WorkflowPaused event.")
@operate.batch_options
@connection_options
def cli(client: RuntimeClient, execution_id: str | None, reason: str | None, **batch: Any) -> None:
    """Pause EXECUTION_ID: no new task attempt is dispatched, no child is
    started and no timer fires until `orbit resume`. Attempts already
    running finish and their results are recorded; signals are buffered;
    queries answer; `orbit cancel` still works. The status stays RUNNING.

    With --workflow (and --status, --where) instead of an id, every matching
    execution is paused by a batch job the runtime runs; --dry-run lists
    them without acting.
    """
    operate.run(client, "pause", execution_id, {"reason": reason} if reason else {}, batch)
