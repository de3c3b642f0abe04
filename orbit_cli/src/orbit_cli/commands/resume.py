"""`orbit resume`: let a paused execution go on (beyond the book; see
docs/operating-executions.md), or every paused execution a filter selects."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli import operate
from orbit_cli.client import RuntimeClient, connection_options


@click.command("resume", short_help="Resume a paused execution (or a batch of them)")
@click.argument("execution_id", required=False)
@operate.batch_options
@connection_options
def cli(client: RuntimeClient, execution_id: str | None, **batch: Any) -> None:
    """Resume EXECUTION_ID: its queued tasks are offered again and what
    fell due while it was paused (timers, retries, timeouts) happens now.

    With --workflow (and --status, --where) instead of an id, every matching
    execution is resumed by a batch job the runtime runs; --dry-run lists
    them without acting.
    """
    operate.run(client, "resume", execution_id, {}, batch)
