"""`orbit ps`: recent executions, newest first."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli import output
from orbit_cli.client import RuntimeClient, connection_options
from orbit_cli.output import duration, out

STATUSES = ("RUNNING", "COMPENSATING", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")


def _row(execution_id: Any, workflow: Any, version: Any, status: Any, age: str) -> str:
    return f"{execution_id!s:<38} {workflow!s:<24} {version!s:<10} {status!s:<13} {age}"


@click.command("ps", short_help="List recent executions.")
@click.option(
    "--status",
    type=click.Choice(STATUSES, case_sensitive=False),
    help="Only executions in this status.",
)
@click.option("--workflow", metavar="NAME", help="Only executions of this workflow.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="At most this many rows (the runtime allows up to 1000).",
)
@click.option(
    "--archived",
    is_flag=True,
    help="List executions retention moved to the archive (a server with --retention).",
)
@connection_options
def cli(
    client: RuntimeClient, status: str | None, workflow: str | None, limit: int, archived: bool
) -> None:
    """List executions, newest first, with their workflow, status and age."""
    where = "/v1/archive/executions" if archived else "/v1/executions"
    answer = client.get(where, status=status, workflow=workflow, limit=limit)
    now = output.now_ms()
    out(_row("EXECUTION", "WORKFLOW", "VERSION", "STATUS", "AGE"))
    for e in answer.get("executions", []):
        age = duration(now - e.get("created_at_ms", now))
        out(_row(e.get("execution_id"), e.get("workflow"), e.get("version"), e.get("status"), age))
