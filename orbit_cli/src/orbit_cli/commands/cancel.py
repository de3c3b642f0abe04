"""`orbit cancel`: ask the runtime to abort an execution."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli import operate
from orbit_cli.client import RuntimeClient, connection_options


@click.command("cancel", short_help="Ask the runtime to cancel an execution.")
@click.argument("execution_id", required=False)
@click.option(
    "--reason",
    metavar="TEXT",
    help="Why, as recorded in the CancelRequested event [default: requested via API].",
)
@operate.batch_options
@connection_options
def cli(client: RuntimeClient, execution_id: str | None, reason: str | None, **batch: Any) -> None:
    """Request cancellation of EXECUTION_ID.

    Work that has not started is withdrawn, attempts already running are
    awaited, and succeeded steps are compensated before the execution ends
    CANCELLED. The status printed is the one right after the request.

    With --workflow (and --status) instead of an id, every matching
    execution is cancelled by a batch job the runtime runs (beyond the
    book; --dry-run lists them without acting).
    """
    body = {} if reason is None else {"reason": reason}
    operate.run(client, "cancel", execution_id, body, batch)
