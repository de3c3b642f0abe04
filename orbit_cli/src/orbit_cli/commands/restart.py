"""`orbit restart`: a new run of an execution from one of its steps (issue 38).

The effect preview comes first, from the runtime's dry run; then, unless
`--dry-run`, the restart itself, which the runtime refuses with
EFFECTS_REPEATED when it would repeat a `once` task, or an `unknown` one
with a new idempotency key, and `--force` is not given.

With `--workflow` instead of an id it restarts every execution the filter
selects as a batch job (`operate.run_batch`); each is refused or restarted
on its own, and `--dry-run` lists them."""

from __future__ import annotations

import json

import click

from orbit_cli import operate, preview
from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import out


@click.command("restart", short_help="Run an execution again from a step (or a batch of them)")
@click.argument("execution_id", required=False)
@click.option("--from", "step", required=True, metavar="STEP", help="The step to run again.")
@click.option("--dry-run", is_flag=True, help="Print the effect preview and change nothing.")
@click.option("--force", is_flag=True, help="Repeat `once` and `unknown` effects anyway.")
@click.option(
    "--reason",
    metavar="TEXT",
    help="Why, as recorded in the WorkflowRestarted event [default: requested via API].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the runtime's answer as JSON.")
@operate.filter_options
@connection_options
def cli(
    client: RuntimeClient,
    execution_id: str | None,
    *,
    step: str,
    dry_run: bool,
    force: bool,
    reason: str | None,
    as_json: bool,
    workflow: str | None,
    status: str | None,
    where: str | None,
) -> None:
    """Start a new run of EXECUTION_ID that keeps the outcomes of the steps
    not depending on STEP and runs STEP and everything after it again.

    A running execution's current run ends: its attempts in flight are
    abandoned. `orbit logs --run N` shows each run.

    With --workflow (and --status, --where) instead of an id, every
    matching execution is restarted by a batch job the runtime runs;
    --dry-run lists them without acting.
    """
    if execution_id is not None and workflow is not None:
        raise click.UsageError("give an EXECUTION_ID or --workflow, not both")
    if execution_id is None:
        if workflow is None:
            raise click.UsageError("give an EXECUTION_ID, or --workflow for a batch")
        body: dict[str, object] = {"from": step}
        if force:
            body["force"] = True
        if reason is not None:
            body["reason"] = reason
        batch = {
            "workflow": workflow,
            "status": status,
            "where": where,
            "dry_run": dry_run,
            "as_json": as_json,
        }
        operate.run_batch(client, "restart", body, batch)
        return
    if status is not None or where is not None:
        raise click.UsageError("--status and --where go with --workflow")
    url = path("v1", "executions", execution_id, "restart")
    body = {"from": step, "dry_run": True}
    answer = client.post(url, body)
    if not as_json:
        preview.show(answer)
    if dry_run:
        if as_json:
            out(json.dumps(answer, indent=2))
        else:
            out("dry run: nothing changed")
        return
    body = {"from": step, "force": force}
    if reason is not None:
        body["reason"] = reason
    done = client.post(url, body)
    if as_json:
        out(json.dumps(done, indent=2))
        return
    out(f"restarted {done['execution_id']}: run {done['run']} started")
