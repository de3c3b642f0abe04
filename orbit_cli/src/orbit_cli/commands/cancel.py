"""`orbit cancel`: ask the runtime to abort an execution."""

from __future__ import annotations

import click

from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import out


@click.command("cancel", short_help="Ask the runtime to cancel an execution.")
@click.argument("execution_id")
@click.option(
    "--reason",
    metavar="TEXT",
    help="Why, as recorded in the CancelRequested event [default: requested via API].",
)
@connection_options
def cli(client: RuntimeClient, execution_id: str, reason: str | None) -> None:
    """Request cancellation of EXECUTION_ID.

    Work that has not started is withdrawn, attempts already running are
    awaited, and succeeded steps are compensated before the execution ends
    CANCELLED. The status printed is the one right after the request.
    """
    body = {} if reason is None else {"reason": reason}
    state = client.post(path("v1", "executions", execution_id, "cancel"), body)
    out(f"cancellation requested; execution is {state.get('status')}")
