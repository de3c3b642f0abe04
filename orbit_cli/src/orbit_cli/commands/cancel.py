"""`orbit cancel`: ask the runtime to abort an execution.

Its help is chapter 66's: the usage names EXECUTION_ID as the book does and
the option list is the book's. The batch flags (beyond the book; see
docs/operating-executions.md) work as on `orbit pause` but are left out of
that list and named in the epilog instead, so the book's part reads the
same."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli import operate
from orbit_cli.client import RuntimeClient, connection_options


@click.command(
    "cancel",
    short_help="Request cancellation of an execution (runs compensations)",
    epilog=operate.BATCH_EPILOG.format(command="orbit cancel", acts="cancels"),
)
# Required by the book's usage line; None only with --workflow (a batch).
@click.argument("execution_id", required=False, metavar="EXECUTION_ID")
@click.option(
    "--reason",
    metavar="REASON",
    help="Reason recorded in the CancelRequested event.  [default: requested via API]",
)
@operate.hidden_batch_options
@connection_options
def cli(client: RuntimeClient, execution_id: str | None, reason: str | None, **batch: Any) -> None:
    """Request cancellation of an execution. Work that has not started is
    withdrawn, in-flight attempts are awaited, and succeeded steps are
    compensated.

    The command prints the execution status right after the request.
    """
    body = {} if reason is None else {"reason": reason}
    operate.run(client, "cancel", execution_id, body, batch)
