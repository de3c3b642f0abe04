"""`orbit workers list`: the workers the runtime knows."""

from __future__ import annotations

from typing import Any

import click

from orbit_cli.client import RuntimeClient, connection_options
from orbit_cli.output import out


def _row(worker: Any, runtime: Any, state: Any, inflight: Any, tasks: str) -> str:
    return f"{worker!s:<28} {runtime!s:<12} {state!s:<8} {inflight!s}  {tasks}"


@click.group("workers", short_help="Inspect the workers known to the runtime.")
def cli() -> None:
    """Commands about worker processes."""


@cli.command("list", short_help="List registered workers.")
@connection_options
def list_workers(client: RuntimeClient) -> None:
    """List every worker id that has registered, whether it is online (a
    session in contact within the session timeout), how many tasks its live
    sessions hold, and the contracts it announced.
    """
    answer = client.get("/v1/workers")
    out(_row("WORKER", "RUNTIME", "STATE", "INFLIGHT", "TASKS"))
    for w in answer.get("workers", []):
        tasks = ", ".join(
            f"{c.get('task_name')}@{c.get('contract_version')}" for c in w.get("contracts", [])
        )
        state = "online" if w.get("online") else "offline"
        out(_row(w.get("worker_id"), w.get("runtime"), state, w.get("inflight", 0), tasks))
