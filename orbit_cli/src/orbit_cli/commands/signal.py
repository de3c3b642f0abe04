"""`orbit signal`: send a typed signal to an execution."""

from __future__ import annotations

import click

from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import err, out, parse_json_option, read_text


@click.command("signal", short_help="Send a typed signal to a running execution")
@click.argument("execution_id")
@click.argument("name")
@click.option(
    "--data",
    default="{}",
    show_default=True,
    metavar="JSON|@FILE",
    help="The payload as JSON, or @path to read it from a file.",
)
@connection_options
def cli(client: RuntimeClient, execution_id: str, name: str, data: str) -> None:
    """Send the signal NAME with its payload to EXECUTION_ID.

    The runtime checks the payload against the workflow's declaration and
    buffers it until an `await NAME` step takes it. On success the sequence
    number of the recorded SignalReceived event is printed alone on stdout,
    so scripts can capture it; the explanation goes to stderr.
    """
    text = read_text(data[1:]) if data.startswith("@") else data
    payload = parse_json_option("--data", text)
    answer = client.post(path("v1", "executions", execution_id, "signals", name), payload)
    seq = answer.get("seq")
    where = f" (history #{seq})" if seq is not None else ""
    err(
        f"signal `{name}` recorded for {execution_id}{where}; the next `await {name}` step takes it"
    )
    if seq is not None:
        out(str(seq))
