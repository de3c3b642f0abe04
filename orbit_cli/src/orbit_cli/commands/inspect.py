"""`orbit inspect`: a compiled definition summarised, or an execution's full state."""

from __future__ import annotations

from pathlib import Path

import click

from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import out, pretty_json, read_text
from orbit_cli.redact import redact_state


@click.command("inspect", short_help="Inspect a compiled IR file, or an execution's full state")
@click.argument("target")
@connection_options
def cli(client: RuntimeClient, target: str) -> None:
    """When TARGET is an existing file (.orbit source or compiled .json IR),
    describe its workflow: types (fields with a default show it), steps in
    execution order with their policies, and the contracts it uses. Otherwise TARGET is an execution id
    and its complete state is printed as JSON, sensitive values masked.
    """
    file = Path(target)
    if file.suffix == ".orbit" and not file.is_file():
        read_text(target)  # fails with the reason: a source file was meant
    if file.is_file():
        from orbit_cli.definitions import load_definitions, select_workflow
        from orbit_cli.ir_summary import summary

        definitions = load_definitions([file])
        chosen = select_workflow(definitions, None, target)
        out(summary(chosen))
        return
    state = client.get(path("v1", "executions", target))
    out(pretty_json(redact_state(state)))
