"""`orbit versions <Workflow>` (issue 41): per registered version, its live
and paused executions, where they wait, the task contracts they may still
call and whether it drains (`GET /v1/workflows/{name}/versions`)."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli import output
from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import out, pretty_json


def lines(doc: dict[str, Any], now_ms: int) -> list[str]:
    """The census as `orbit versions` prints it."""
    name = doc.get("workflow", "")
    rows: list[str] = []
    for v in doc.get("versions", []):
        head = f"{name}@{v['version']:<10} {v['drain']:<9} live {v['live']}  paused {v['paused']}"
        last = v.get("last_live_at_ms")
        if v["drain"] == "drained":
            head += (
                f"  last live {output.duration(now_ms - last)} ago"
                if isinstance(last, int)
                else "  never live"
            )
        rows.append(head)
        for wait in v.get("waiting", []):
            rows.append(f"  waiting  {wait['step']} ({wait['kind']}): {wait['count']}")
        if v.get("tasks"):
            rows.append(f"  tasks    {', '.join(v['tasks'])}")
    return rows


@click.command("versions", short_help="Show live executions and drain status per version")
@click.argument("workflow")
@click.option("--json", "as_json", is_flag=True, help="Print the census as JSON.")
@connection_options
def cli(client: RuntimeClient, workflow: str, as_json: bool) -> None:
    """Show, for each registered version of WORKFLOW, how many executions
    are live and paused, the step and kind (task, timer, signal, child)
    each waits in, the task contracts they may still call, and whether the
    version is current, draining or drained (no live execution left: its
    workers may go).
    """
    doc = client.get(path("v1", "workflows", workflow, "versions"))
    if as_json:
        out(pretty_json(doc))
        return
    for line in lines(doc, output.now_ms()):
        out(line)
