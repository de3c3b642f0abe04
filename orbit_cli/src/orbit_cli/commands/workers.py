"""`orbit workers list`: the workers the runtime knows.

The table is chapter 66's. A task no deployed workflow calls (the server
lists it in the worker's `unused_contracts`) is marked `(unused)` in the
TASKS column, and a note on stderr says why it matters; when every task is
called, the output is the book's, byte for byte.
"""

from __future__ import annotations

from typing import Any

import click

from orbit_cli.client import RuntimeClient, connection_options
from orbit_cli.output import err, out

UNUSED = " (unused)"


def _row(worker: Any, runtime: Any, state: Any, inflight: Any, tasks: str) -> str:
    return f"{worker!s:<28} {runtime!s:<12} {state!s:<8} {inflight!s}  {tasks}"


def _key(contract: Any) -> str:
    return f"{contract.get('task_name')}@{contract.get('contract_version')}"


def _unused_note(worker: Any, contract: Any) -> str:
    called = contract.get("deployed_versions") or []
    instead = f"; workflows call version {', '.join(called)}" if called else ""
    return f"note: no deployed workflow calls {_key(contract)} (worker {worker}){instead}"


@click.group("workers", short_help="Worker commands")
def cli() -> None:
    """Commands about worker processes."""


@cli.command("list", short_help="List registered workers.")
@connection_options
def list_workers(client: RuntimeClient) -> None:
    """List every worker id that has registered, whether it is online (a
    session in contact within the session timeout), how many tasks its live
    sessions hold, and the contracts it announced. A contract that no
    deployed workflow calls is marked (unused): its tasks would never come.
    """
    answer = client.get("/v1/workers")
    out(_row("WORKER", "RUNTIME", "STATE", "INFLIGHT", "TASKS"))
    notes = []
    for w in answer.get("workers", []):
        unused = {_key(c): c for c in w.get("unused_contracts", [])}
        tasks = ", ".join(
            _key(c) + (UNUSED if _key(c) in unused else "") for c in w.get("contracts", [])
        )
        state = "online" if w.get("online") else "offline"
        out(_row(w.get("worker_id"), w.get("runtime"), state, w.get("inflight", 0), tasks))
        notes += [_unused_note(w.get("worker_id"), c) for c in unused.values()]
    for note in notes:
        err(note)
