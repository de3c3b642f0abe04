"""`orbit schedule ...`: manage schedules through the /v1/schedules API.

`create`, `update` and `get` print a schedule as a short report (state, id
and timing, then the settings, counters and next fire times); `list` prints
one row per schedule. Option values use `-` where the API writes `_`
(`cancel-previous`, `skip-missed`); `--every` is the API's `interval`.
"""

from __future__ import annotations

from typing import Any

import click

from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import compact_json, out, parse_json_option, pretty_json, read_text

OVERLAP = click.Choice(["skip", "allow", "cancel-previous"])
CATCHUP = click.Choice(["skip-missed", "run-once"])
OVERLAP_HELP = (
    "What to do when an occurrence is due while the previous execution still runs: "
    "skip (start nothing; counted as skipped), allow (start anyway), cancel-previous "
    "(cancel the running one and start the new one)"
)
CATCHUP_HELP = (
    "What to do with occurrences missed while no server was running: skip-missed (start "
    "only one at most 60 s late) or run-once (start the most recent one, however late)"
)


def _api(value: str | None) -> str | None:
    return None if value is None else value.replace("-", "_")


def timing(doc: dict[str, Any]) -> str:
    if doc.get("cron") is not None:
        zone = doc.get("timezone")
        return f'cron "{doc["cron"]}"' + (f" {zone}" if zone else "")
    return f"every {doc.get('interval')}"


def state(doc: dict[str, Any]) -> str:
    if doc.get("paused"):
        return "paused"
    return "ended" if doc.get("next_fire_at") is None else "active"


def report(doc: dict[str, Any]) -> str:
    """A schedule as `orbit schedule get` prints it."""
    version = doc.get("version")
    workflow = doc["workflow"] + (f"@{version} (pinned)" if version else " (latest version)")
    lines = [
        f"{state(doc)} {doc['schedule_id']}  {timing(doc)}",
        f"  workflow:   {workflow}",
        f"  input:      {compact_json(doc.get('input', {}))}",
        f"  overlap:    {doc['overlap']}   catchup: {doc['catchup']}",
    ]
    for label, key in (("jitter:", "jitter"), ("start at:", "start_at"), ("end at:", "end_at")):
        if doc.get(key) is not None:
            lines.append(f"  {label:<11} {doc[key]}")
    if doc.get("description") is not None:
        lines.append(f"  description: {doc['description']}")
    lines += [
        f"  fired:      {doc['fired']}   skipped: {doc['skipped']}",
        f"  last fire:  {doc.get('last_fire_at') or '-'}",
        f"  last run:   {doc.get('last_execution_id') or '-'}",
    ]
    if doc.get("last_error"):
        lines.append(f"  last error: {doc['last_error']}")
    upcoming = doc.get("next_fire_times") or []
    if upcoming:
        lines.append("  next fires:")
        lines += [f"    {t}" for t in upcoming]
    else:
        lines.append("  next fires: -")
    return "\n".join(lines)


def _row(*cells: Any) -> str:
    """SCHEDULE, WORKFLOW, TIMING, STATE, NEXT FIRE and LAST EXECUTION in their columns."""
    sid, workflow, when, status, next_fire, last = (str(c) for c in cells)
    return f"{sid:<24} {workflow:<20} {when:<32} {status:<8} {next_fire:<22} {last}"


@click.group("schedule", short_help="Start workflows on a cron expression or a fixed interval")
def cli() -> None:
    """Start workflows on a cron expression or a fixed interval.

    Each subcommand talks to the runtime's /v1/schedules API and accepts the
    usual connection options. It exits with 1 when the runtime refuses the
    request (INVALID_SCHEDULE, SCHEDULE_EXISTS, SCHEDULE_NOT_FOUND, ...) or
    cannot be reached, or when --input is not JSON, and with 2 when the
    arguments are wrong.
    """


@cli.command(
    "create",
    short_help="Create a schedule that starts a workflow on a cron expression or an interval",
)
@click.argument("schedule_id", metavar="ID")
@click.option("--workflow", required=True, help="The workflow to start")
@click.option(
    "--version",
    help="Workflow version (default: the latest registered version at each fire)",
)
@click.option(
    "--cron",
    help='Cron expression: minute hour day-of-month month day-of-week, e.g. "0 2 * * *"',
)
@click.option(
    "--every",
    help="Fixed interval instead of cron, e.g. 15m or 1h30m "
    "(aligned to --start-at or the Unix epoch)",
)
@click.option("--timezone", help="IANA time zone for --cron, e.g. Europe/Berlin (default UTC)")
@click.option("-i", "--input", "input_text", help="Workflow input as JSON")
@click.option("--input-file", help="Read the workflow input from a JSON file")
@click.option("--overlap", type=OVERLAP, default="skip", show_default=True, help=OVERLAP_HELP)
@click.option(
    "--catchup", type=CATCHUP, default="skip-missed", show_default=True, help=CATCHUP_HELP
)
@click.option("--start-at", help="No occurrence before this RFC 3339 time")
@click.option("--end-at", help="No occurrence after this RFC 3339 time")
@click.option(
    "--jitter",
    help="Delay each fire by up to this long (deterministic per occurrence), e.g. 30s",
)
@click.option("--description", help="Free text shown by `orbit schedule get`")
@click.option("--paused", is_flag=True, help="Create the schedule paused")
@connection_options
def create(
    *,
    client: RuntimeClient,
    schedule_id: str,
    workflow: str,
    version: str | None,
    cron: str | None,
    every: str | None,
    timezone: str | None,
    input_text: str | None,
    input_file: str | None,
    overlap: str,
    catchup: str,
    start_at: str | None,
    end_at: str | None,
    jitter: str | None,
    description: str | None,
    paused: bool,
) -> None:
    """Create a schedule that starts a workflow on a cron expression or an interval.

    ID is the schedule id: letters, digits, `-`, `_` and `.`. Exactly one of
    --cron and --every is required. Prints the new schedule as `orbit
    schedule get` does.
    """
    if (cron is None) == (every is None):
        raise click.UsageError("exactly one of --cron and --every is required")
    body: dict[str, Any] = {"schedule_id": schedule_id, "workflow": workflow}
    if input_text is not None:
        body["input"] = parse_json_option("--input", input_text)
    elif input_file is not None:
        body["input"] = parse_json_option("--input-file", read_text(input_file))
    fields = {
        "version": version,
        "cron": cron,
        "interval": every,
        "timezone": timezone,
        "overlap": _api(overlap),
        "catchup": _api(catchup),
        "start_at": start_at,
        "end_at": end_at,
        "jitter": jitter,
        "description": description,
    }
    body.update({k: v for k, v in fields.items() if v is not None})
    if paused:
        body["paused"] = True
    out(report(client.post("/v1/schedules", body)))


@cli.command(
    "update", short_help="Change a schedule's timing, input or policies (other settings are kept)"
)
@click.argument("schedule_id", metavar="ID")
@click.option("--cron", help="New cron expression (replaces an interval)")
@click.option("--every", help="New interval (replaces a cron expression)")
@click.option("--timezone", help="IANA time zone for the cron expression")
@click.option("-i", "--input", "input_text", help="New workflow input as JSON")
@click.option("--version", help="Pin a workflow version")
@click.option("--overlap", type=OVERLAP, help="New overlap policy")
@click.option("--catchup", type=CATCHUP, help="New catch-up policy")
@click.option("--jitter", help="New maximum fire delay, e.g. 30s")
@connection_options
def update(
    *,
    client: RuntimeClient,
    schedule_id: str,
    cron: str | None,
    every: str | None,
    timezone: str | None,
    input_text: str | None,
    version: str | None,
    overlap: str | None,
    catchup: str | None,
    jitter: str | None,
) -> None:
    """Change a schedule's timing, input or policies (other settings are kept).

    Only the options given change (a PATCH of /v1/schedules/{id}); the next
    fire time is computed again from now and the fired and skipped counts
    stay. start_at, end_at and the description change through the API only.
    """
    if cron is not None and every is not None:
        raise click.UsageError("--cron and --every cannot be used together")
    body: dict[str, Any] = {}
    if cron is not None:
        body.update(cron=cron, interval=None)
    if every is not None:
        body.update(interval=every, cron=None, timezone=None)
    if input_text is not None:
        body["input"] = parse_json_option("--input", input_text)
    fields = {
        "timezone": timezone,
        "version": version,
        "overlap": _api(overlap),
        "catchup": _api(catchup),
        "jitter": jitter,
    }
    body.update({k: v for k, v in fields.items() if v is not None})
    if not body:
        raise click.UsageError("nothing to change: give at least one option")
    out(report(client.request("PATCH", path("v1", "schedules", schedule_id), body=body)))


@cli.command("list", short_help="List schedules with their next fire time")
@connection_options
def list_schedules(client: RuntimeClient) -> None:
    """List schedules with their next fire time.

    STATE: active, paused, or ended (end_at reached with no occurrence left).
    NEXT FIRE is when the next occurrence fires, its jitter included.
    """
    schedules = client.get("/v1/schedules").get("schedules", [])
    out(_row("SCHEDULE", "WORKFLOW", "TIMING", "STATE", "NEXT FIRE", "LAST EXECUTION"))
    for doc in schedules:
        out(
            _row(
                doc["schedule_id"],
                doc["workflow"],
                timing(doc),
                state(doc),
                doc.get("next_fire_at") or "-",
                doc.get("last_execution_id") or "-",
            )
        )


@cli.command("get", short_help="Show a schedule, its state and its next fire times")
@click.argument("schedule_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the schedule as JSON")
@connection_options
def get(client: RuntimeClient, schedule_id: str, as_json: bool) -> None:
    """Show a schedule, its state and its next fire times.

    --json prints the document of GET /v1/schedules/{id}.
    """
    doc = client.get(path("v1", "schedules", schedule_id))
    out(pretty_json(doc) if as_json else report(doc))


@cli.command("pause", short_help="Stop firing a schedule until it is resumed")
@click.argument("schedule_id", metavar="ID")
@connection_options
def pause(client: RuntimeClient, schedule_id: str) -> None:
    """Stop firing a schedule until it is resumed."""
    client.post(path("v1", "schedules", schedule_id, "pause"))
    out(f"schedule {schedule_id} paused")


@cli.command(
    "resume",
    short_help="Resume a paused schedule from its next occurrence (missed ones are skipped)",
)
@click.argument("schedule_id", metavar="ID")
@connection_options
def resume(client: RuntimeClient, schedule_id: str) -> None:
    """Resume a paused schedule from its next occurrence (missed ones are skipped)."""
    doc = client.post(path("v1", "schedules", schedule_id, "resume"))
    following = doc.get("next_fire_at")
    if following is None:
        out(f"schedule {schedule_id} resumed; no occurrence left (ended)")
    else:
        out(f"schedule {schedule_id} resumed; next fire {following}")


@cli.command(
    "trigger", short_help="Start an execution of the schedule now (the overlap policy applies)"
)
@click.argument("schedule_id", metavar="ID")
@connection_options
def trigger(client: RuntimeClient, schedule_id: str) -> None:
    """Start an execution of the schedule now (the overlap policy applies).

    A trigger that the overlap policy skips still exits 0.
    """
    answer = client.post(path("v1", "schedules", schedule_id, "trigger"))
    if answer.get("started"):
        out(f"started execution {answer['execution_id']}")
    else:
        # Only the `skip` policy declines a start.
        out(
            f"not started: the previous execution of {schedule_id} is still running (overlap: skip)"
        )


@cli.command("delete", short_help="Delete a schedule (executions it started keep running)")
@click.argument("schedule_id", metavar="ID")
@connection_options
def delete(client: RuntimeClient, schedule_id: str) -> None:
    """Delete a schedule (executions it started keep running)."""
    client.request("DELETE", path("v1", "schedules", schedule_id))
    out(f"schedule {schedule_id} deleted")
