"""`orbit fork`: a new execution with an execution's outcomes before a step
(issue 38), optionally on another version of its workflow. The effect
preview comes first, as for `orbit restart`."""

from __future__ import annotations

import json

import click

from orbit_cli import preview
from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import out


@click.command("fork", short_help="Start a new execution from an execution's step")
@click.argument("execution_id")
@click.option("--from", "step", required=True, metavar="STEP", help="The first step to run.")
@click.option("--id", "new_id", metavar="ID", help="The new execution's id [default: generated].")
@click.option("--version", "version", metavar="V", help="Run on this version of the workflow.")
@click.option("--dry-run", is_flag=True, help="Print the effect preview and change nothing.")
@click.option("--force", is_flag=True, help="Repeat `once` and `unknown` effects anyway.")
@click.option("--json", "as_json", is_flag=True, help="Print the runtime's answer as JSON.")
@connection_options
def cli(
    client: RuntimeClient,
    execution_id: str,
    *,
    step: str,
    new_id: str | None,
    version: str | None,
    dry_run: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Start a new execution with EXECUTION_ID's input and the outcomes of
    its steps that do not depend on STEP; STEP and everything after it run.

    With --version, the new execution runs that version of the workflow,
    which the runtime accepts only when the kept steps mean the same in it.
    """
    url = path("v1", "executions", execution_id, "fork")
    body: dict[str, object] = {"from": step, "dry_run": True}
    if new_id is not None:
        body["execution_id"] = new_id
    if version is not None:
        body["version"] = version
    answer = client.post(url, body)
    if not as_json:
        preview.show(answer)
    if dry_run:
        if as_json:
            out(json.dumps(answer, indent=2))
        else:
            out("dry run: nothing changed")
        return
    body.pop("dry_run")
    # The preview named the id the fork gets when none was given.
    body["execution_id"] = answer["execution_id"]
    body["force"] = force
    done = client.post(url, body)
    if as_json:
        out(json.dumps(done, indent=2))
        return
    out(f"forked {execution_id} into {done['execution_id']}")
