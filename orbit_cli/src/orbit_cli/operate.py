"""What `orbit pause`, `orbit resume`, `orbit cancel` and `orbit restart` share: acting on
one execution, or on every execution a filter selects through a batch job
on the runtime (`POST /v1/batches`), followed with a progress bar until it
ends (docs/operating-executions.md).

The filter options are `orbit ps`'s (`FILTER_OPTIONS`): `--status` and
the typed filter `--where`, checked as `orbit ps --where` checks it (parsed
here first, typed by the runtime; a bad one exits 2). A new filter of
`orbit ps` joins by adding its option there and its field in `_filter`,
which the runtime's `orbit_server.batches.Filter` reads.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from orbit_cli.client import ApiError, RuntimeClient, path
from orbit_cli.commands.ps import FilterRefused, check_filter_text
from orbit_cli.output import CliError, err, out, pretty_json

F = TypeVar("F", bound=Callable[..., Any])

STATUSES = ("RUNNING", "COMPENSATING", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")
# How often a followed batch is read.
POLL_S = 0.25
PAST = {
    "pause": "paused",
    "resume": "resumed",
    "cancel": "cancellation requested for",
    "restart": "restarted",
}

FILTER_OPTIONS = [
    click.option(
        "--workflow",
        metavar="NAME",
        help="Act on every execution of this workflow (a batch job) instead of one.",
    ),
    click.option(
        "--status",
        type=click.Choice(STATUSES, case_sensitive=False),
        help="With --workflow: only executions in this status.",
    ),
    click.option(
        "--where",
        metavar="FILTER",
        help="With --workflow: only executions passing this filter (as `orbit ps --where`).",
    ),
]


def filter_options(command: F) -> F:
    """Adds only the filter options, for a command that has its own
    `--dry-run` and `--json` (`orbit restart`)."""
    for option in reversed(FILTER_OPTIONS):
        command = option(command)
    return command


def batch_options(command: F) -> F:
    """Adds the batch options (`--workflow`, `--status`, `--where`,
    `--dry-run`, `--json`)."""
    for option in reversed(_batch_options(hidden=False)):
        command = option(command)
    return command


def hidden_batch_options(command: F) -> F:
    """The batch options, left out of the option list: for a command whose
    help is the book's (`orbit cancel`), which names them in its epilog
    (`BATCH_EPILOG`)."""
    for option in reversed(_batch_options(hidden=True)):
        command = option(command)
    return command


BATCH_EPILOG = (
    "Beyond the book: `{command} --workflow NAME [--status STATUS] [--where FILTER] "
    "[--dry-run] [--json]` {acts} every matching execution instead of one, through a "
    "batch job the runtime runs; --dry-run lists them without acting "
    "(docs/operating-executions.md)."
)


def _batch_options(*, hidden: bool) -> list[Callable[[F], F]]:
    filters = [
        click.option(
            "--workflow",
            metavar="NAME",
            hidden=hidden,
            help="Act on every execution of this workflow (a batch job) instead of one.",
        ),
        click.option(
            "--status",
            type=click.Choice(STATUSES, case_sensitive=False),
            hidden=hidden,
            help="With --workflow: only executions in this status.",
        ),
        click.option(
            "--where",
            metavar="FILTER",
            hidden=hidden,
            help="With --workflow: only executions passing this filter (as `orbit ps --where`).",
        ),
    ]
    return [
        *(filters if hidden else FILTER_OPTIONS),
        click.option(
            "--dry-run",
            is_flag=True,
            hidden=hidden,
            help="With --workflow: list the executions, act on none.",
        ),
        click.option(
            "--json",
            "as_json",
            is_flag=True,
            hidden=hidden,
            help="Print the runtime's JSON answer.",
        ),
    ]


def _filter(batch: dict[str, Any]) -> dict[str, Any]:
    chosen: dict[str, Any] = {"workflow": batch.get("workflow")}
    if batch.get("status"):
        chosen["status"] = str(batch["status"]).upper()
    if batch.get("where") is not None:
        chosen["where"] = batch["where"]
    return chosen


def _post(client: RuntimeClient, request: dict[str, Any]) -> Any:
    """POST /v1/batches; a filter the runtime refuses is an input error."""
    try:
        return client.post("/v1/batches", request)
    except ApiError as exc:
        if exc.code == "INVALID_FILTER":
            raise FilterRefused(exc.text) from None
        raise


def run(
    client: RuntimeClient,
    action: str,
    execution_id: str | None,
    body: dict[str, Any],
    batch: dict[str, Any],
) -> None:
    workflow = batch.get("workflow")
    as_json = bool(batch.get("as_json"))
    if execution_id is not None and workflow is not None:
        raise click.UsageError("give an EXECUTION_ID or --workflow, not both")
    if execution_id is None:
        if workflow is None:
            raise click.UsageError("give an EXECUTION_ID, or --workflow for a batch")
        run_batch(client, action, body, batch)
        return
    if batch.get("status") or batch.get("dry_run") or batch.get("where") is not None:
        raise click.UsageError("--status, --where and --dry-run go with --workflow")
    state = client.post(path("v1", "executions", execution_id, action), body)
    if as_json:
        out(pretty_json(state))
    elif action == "cancel":
        out(f"cancellation requested; execution is {state.get('status')}")
    else:
        out(f"execution {execution_id} {PAST[action]}; it is {state.get('status')}")


def run_batch(
    client: RuntimeClient, action: str, body: dict[str, Any], batch: dict[str, Any]
) -> None:
    """A batch job over `batch`'s filter (`workflow`, `status`, `where`), or
    with `dry_run` the executions it selects; `as_json` prints the answers."""
    as_json = bool(batch.get("as_json"))
    if batch.get("where") is not None:
        check_filter_text(str(batch["where"]))
    request = {"action": action, "filter": _filter(batch), **body}
    if batch.get("dry_run"):
        answer = _post(client, {**request, "dry_run": True})
        if as_json:
            out(pretty_json(answer))
            return
        ids = answer.get("executions", [])
        out(
            f"would {action} {len(ids)} execution{'s' if len(ids) != 1 else ''} ({_describe(request)})"
        )
        for eid in ids:
            out(f"  {eid}")
        return
    created = _post(client, request)
    batch_id = str(created.get("batch_id"))
    total = int(created.get("total", 0))
    if not as_json:
        err(
            f"batch {batch_id}: {action} {total} execution{'s' if total != 1 else ''} ({_describe(request)})"
        )
    _follow(client, batch_id, total, show=not as_json)
    doc = client.get(path("v1", "batches", batch_id), items="true")
    if as_json:
        out(pretty_json(doc))
    else:
        counts = doc.get("outcomes", {})
        out(
            f"{PAST[action] if action != 'cancel' else 'cancelled'} {counts.get('ok', 0)}, "
            f"skipped {counts.get('skipped', 0)}, failed {counts.get('failed', 0)}"
        )
        for item in doc.get("items", []):
            if item.get("outcome") == "failed":
                out(f"  {item.get('execution_id')}: {item.get('code')} {item.get('message')}")
    if doc.get("outcomes", {}).get("failed"):
        raise CliError(f"batch {batch_id}: some executions could not be acted on")


def _describe(request: dict[str, Any]) -> str:
    chosen = request["filter"]
    parts = [f"workflow {chosen['workflow']}"]
    if "status" in chosen:
        parts.append(f"status {chosen['status']}")
    if "where" in chosen:
        parts.append(f"where {chosen['where']}")
    return ", ".join(parts)


def _follow(client: RuntimeClient, batch_id: str, total: int, *, show: bool) -> dict[str, Any]:
    """Reads the batch until it is done, with a progress bar on stderr."""
    where = path("v1", "batches", batch_id)
    read: Callable[[], dict[str, Any]] = functools.partial(client.get, where)
    doc = read()
    if not show:
        while doc.get("state") != "done":
            time.sleep(POLL_S)
            doc = read()
        return doc
    progress: Any = click.progressbar
    with progress(length=max(total, 1), label="processed", file=sys.stderr) as bar:
        shown = 0
        while True:
            processed = int(doc.get("processed", 0))
            if processed > shown:
                bar.update(processed - shown)
                shown = processed
            if doc.get("state") == "done":
                if total == 0:
                    bar.update(1)
                return doc
            time.sleep(POLL_S)
            doc = read()
