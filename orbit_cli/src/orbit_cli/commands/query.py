"""`orbit query`: evaluate a declared query against an execution."""

from __future__ import annotations

import click

from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import out, pretty_json


@click.command("query", short_help="Evaluate a query declared in the workflow against an execution")
@click.argument("execution_id")
@click.argument("name")
@connection_options
def cli(client: RuntimeClient, execution_id: str, name: str) -> None:
    """Evaluate the query NAME of EXECUTION_ID's workflow and print its value
    as indented JSON (only the value, ready for jq). Works on running and
    finished executions; nothing is recorded.
    """
    answer = client.get(path("v1", "executions", execution_id, "queries", name))
    out(pretty_json(answer.get("value") if isinstance(answer, dict) else answer))
