"""`orbit migrate plan|run <Workflow> --from A --to B` (issue 41): what
moving the live executions of one version to another would do, and doing
it (docs/language/migration.md).

`run` is a loop of requests, each moving at most `--batch-size` executions
at a safe point, each execution in its own commit on the server; it stops
when a round moves none. Interrupted, it leaves every execution on one
version or the other, and running it again carries on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from orbit_cli.client import ApiError, RuntimeClient, connection_options, path
from orbit_cli.commands.ps import FilterRefused, check_filter_text
from orbit_cli.output import out, pretty_json

LIVE_STATUSES = ("RUNNING", "COMPENSATING")


def _versions(command: Any) -> Any:
    for option in reversed(
        [
            click.argument("workflow"),
            click.option(
                "--from",
                "from_version",
                required=True,
                metavar="VERSION",
                help="The version the executions run now.",
            ),
            click.option(
                "--to",
                "to_version",
                required=True,
                metavar="VERSION",
                help="The version to move them to.",
            ),
            click.option(
                "--status",
                type=click.Choice(LIVE_STATUSES, case_sensitive=False),
                help="Only executions in this status.",
            ),
            click.option(
                "--where",
                metavar="FILTER",
                help="Only executions passing this filter, as in `orbit ps --where`.",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON."),
        ]
    ):
        command = option(command)
    return command


@click.group("migrate", short_help="Move live executions to another version")
def cli() -> None:
    """Plan and run live migrations declared with `migrate from` in the
    target version's source."""


@contextlib.contextmanager
def _filter_refused() -> Iterator[None]:
    """A filter the runtime refuses (a field no workflow declares, a type
    that does not fit) is an input error, as for `orbit ps --where`."""
    try:
        yield
    except ApiError as exc:
        if exc.code == "INVALID_FILTER":
            raise FilterRefused(exc.text) from None
        raise


def _row(execution_id: str, verdict: str, reason: str) -> str:
    return f"{execution_id:<38} {verdict:<15} {reason}".rstrip()


@cli.command("plan", short_help="Show what a migration would do; change nothing")
@_versions
@connection_options
def plan(
    *,
    client: RuntimeClient,
    workflow: str,
    from_version: str,
    to_version: str,
    status: str | None,
    where: str | None,
    as_json: bool,
) -> None:
    """List each live execution of WORKFLOW on --from: migratable now, at
    its next safe point, or not migratable, and why."""
    if where is not None:
        check_filter_text(where)
    with _filter_refused():
        doc = client.get(
            path("v1", "workflows", workflow, "migrations"),
            **{"from": from_version, "to": to_version, "status": status, "where": where},
        )
    if as_json:
        out(pretty_json(doc))
        return
    out(f"{workflow} {from_version} -> {to_version} (migration {doc['migration_hash']})")
    out(_row("EXECUTION", "VERDICT", "REASON"))
    for e in doc["executions"]:
        out(_row(e["execution_id"], e["verdict"], e.get("reason", "")))


@cli.command("run", short_help="Move the migratable executions.")
@_versions
@click.option("--dry-run", is_flag=True, help="Say what would move; move nothing.")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="At most this many executions per request.",
)
@connection_options
def run(
    *,
    client: RuntimeClient,
    workflow: str,
    from_version: str,
    to_version: str,
    status: str | None,
    where: str | None,
    as_json: bool,
    dry_run: bool,
    batch_size: int,
) -> None:
    """Move every live execution of WORKFLOW on --from that is at a safe
    point to --to, each in one commit that records `WorkflowMigrated`.
    Executions that cannot move are left untouched."""
    route = path("v1", "workflows", workflow, "migrations")
    body: dict[str, Any] = {"from": from_version, "to": to_version, "limit": batch_size}
    if status is not None:
        body["status"] = status.upper()
    if where is not None:
        check_filter_text(where)
        body["where"] = where
    if dry_run:
        body["dry_run"] = True
    rounds: list[dict[str, Any]] = []
    while True:
        with _filter_refused():
            answer = client.post(route, body)
        rounds.append(answer)
        if not as_json:
            for e in answer["executions"]:
                if e["migrated"]:
                    out(f"migrated {e['execution_id']}")
                elif dry_run:
                    out(_row(e["execution_id"], e["verdict"], e.get("reason", "")))
        if dry_run or answer["migrated"] == 0:
            break
    moved = sum(r["migrated"] for r in rounds)
    left = rounds[-1]["remaining"]
    if as_json:
        out(pretty_json({**rounds[-1], "migrated": moved, "remaining": left}))
        return
    if not dry_run:
        out(
            f"{moved} execution(s) moved from {workflow}@{from_version} to "
            f"{workflow}@{to_version}; {left} left on {from_version}"
        )
