"""`orbit ps`: recent executions, newest first."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli import output
from orbit_cli.client import ApiError, RuntimeClient, connection_options
from orbit_cli.output import CliError, duration, out
from orbit_core.visibility.filter import FilterError, parse_filter

STATUSES = ("RUNNING", "COMPENSATING", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")


# Where the PAUSED column starts (an AGE of up to eight characters).
_WIDTH = 38 + 1 + 24 + 1 + 10 + 1 + 13 + 1 + 8


def _row(execution_id: Any, workflow: Any, version: Any, status: Any, age: str) -> str:
    return f"{execution_id!s:<38} {workflow!s:<24} {version!s:<10} {status!s:<13} {age}"


@click.command("ps", short_help="List recent executions")
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
    "--where",
    metavar="FILTER",
    help="Only executions passing this filter over search fields and status, workflow, "
    "version, started, ended, e.g. 'customer == \"c-1\" and amount > 500'.",
)
@click.option("--cursor", metavar="CURSOR", help="Continue after the page that printed it.")
@click.option(
    "--archived",
    is_flag=True,
    help="List executions retention moved to the archive (a server with --retention).",
)
@connection_options
def cli(
    *,
    client: RuntimeClient,
    status: str | None,
    workflow: str | None,
    limit: int,
    where: str | None,
    cursor: str | None,
    archived: bool,
) -> None:
    """List executions, newest first, with their workflow, status and age."""
    url = "/v1/archive/executions" if archived else "/v1/executions"
    if where is None and cursor is None:
        answer = client.get(url, status=status, workflow=workflow, limit=limit)
    else:
        answer = _search(
            client,
            url,
            status=status,
            workflow=workflow,
            limit=limit,
            where=where,
            cursor=cursor,
        )
    now = output.now_ms()
    rows = answer.get("executions", [])
    # A PAUSED column (beyond the book) only when some row is paused, so a
    # listing without one prints exactly as before.
    marked = any(e.get("paused") for e in rows)
    header = _row("EXECUTION", "WORKFLOW", "VERSION", "STATUS", "AGE")
    out(f"{header:<{_WIDTH}} PAUSED" if marked else header)
    for e in rows:
        age = duration(now - e.get("created_at_ms", now))
        line = _row(
            e.get("execution_id"), e.get("workflow"), e.get("version"), e.get("status"), age
        )
        if marked and e.get("paused"):
            reason = e.get("pause_reason")
            line = f"{line:<{_WIDTH}} yes" + (f" ({reason})" if reason else "")
        out(line)
    if answer.get("next_cursor"):
        out(f"more: --cursor {answer['next_cursor']}")


class FilterRefused(CliError):
    """A filter that does not parse or fit the declared fields: an input error."""

    exit_code = 2


def check_filter_text(where: str) -> None:
    """Parses a filter locally, so that a typo is shown under the filter
    without a round trip (exit 2); the runtime types it against the fields."""
    try:
        parse_filter(where)
    except FilterError as exc:
        raise FilterRefused(_pointed(exc, where)) from None


def _search(
    client: RuntimeClient,
    url: str,
    *,
    status: str | None,
    workflow: str | None,
    limit: int,
    where: str | None,
    cursor: str | None,
) -> Any:
    """`GET /v1/executions?where=...` (docs/language/visibility.md). The
    filter is parsed here first, so a typo is shown under the filter
    without a round trip; the runtime checks it against the fields."""
    if where is not None:
        check_filter_text(where)
    try:
        return client.get(
            url, status=status, workflow=workflow, limit=limit, where=where, cursor=cursor
        )
    except ApiError as exc:
        if exc.code == "INVALID_FILTER":
            raise FilterRefused(exc.text) from None
        raise


def _pointed(exc: FilterError, text: str) -> str:
    if exc.column is None:
        return exc.message
    return f"{exc.message}\n  {text}\n  {' ' * (exc.column - 1)}^"
