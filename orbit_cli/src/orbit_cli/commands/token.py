"""`orbit token`: a new bearer token and the workers-file entry that admits it."""

from __future__ import annotations

import hashlib
import json
import sys
import uuid

import click

from orbit_cli.output import CliError, err, out

ACTIONS = ("start", "signal", "query", "read", "cancel", "schedule")
DEFAULT_ACTIONS = ("start", "signal", "query", "read")


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def new_token() -> str:
    """64 hex characters: two random UUIDs, 244 random bits from the OS generator."""
    return uuid.uuid4().hex + uuid.uuid4().hex


def _toml_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def worker_entry(worker_id: str, digest: str, tasks: tuple[str, ...]) -> str:
    return (
        f"[[worker]]\nid = {json.dumps(worker_id)}\n"
        f'token_sha256 = "{digest}"\ntasks = {_toml_list(tasks)}'
    )


def client_entry(
    client_id: str, digest: str, workflows: tuple[str, ...], actions: tuple[str, ...]
) -> str:
    return (
        f"[[client]]\nid = {json.dumps(client_id)}\n"
        f'token_sha256 = "{digest}"\nworkflows = {_toml_list(workflows)}\n'
        f"actions = {_toml_list(actions)}"
    )


@click.command(
    "token", short_help="Generate a random bearer token and the workers-file entry for it"
)
@click.option(
    "--worker", metavar="ID", help="Worker id of the [[worker]] entry [default: my-worker]."
)
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="PATTERN",
    help="Task pattern the worker may serve (repeatable) [default: *].",
)
@click.option(
    "--client", metavar="ID", help="Write a [[client]] entry for this application instead."
)
@click.option(
    "--workflow",
    "workflows",
    multiple=True,
    metavar="PATTERN",
    help="With --client: workflow pattern the client may use (repeatable) [default: *].",
)
@click.option(
    "--action",
    "actions",
    multiple=True,
    metavar="ACTION",
    help="With --client: an action to grant, one of start, signal, query, read, cancel, "
    "schedule (repeatable) [default: start, signal, query, read].",
)
def cli(
    worker: str | None,
    tasks: tuple[str, ...],
    client: str | None,
    workflows: tuple[str, ...],
    actions: tuple[str, ...],
) -> None:
    """Generate a random token. The token goes to stdout; the entry for the
    workers file, which holds only the token's SHA-256, goes to stderr, so the
    two can be redirected to different places. No runtime is contacted.
    """
    if client is not None and (worker is not None or tasks):
        raise click.UsageError("--client cannot be combined with --worker or --task")
    if client is None and (workflows or actions):
        raise click.UsageError("--workflow and --action need --client")
    for action in actions:
        if action not in ACTIONS:
            raise CliError(f"unknown action `{action}` (allowed: {', '.join(ACTIONS)})")

    token = new_token()
    digest = hashlib.sha256(token.encode()).hexdigest()
    if client is not None:
        granted = tuple(dict.fromkeys(actions)) or DEFAULT_ACTIONS
        entry = client_entry(client, digest, workflows or ("*",), granted)
        holder = "the application (ORBIT_TOKEN)"
    else:
        entry = worker_entry(worker or "my-worker", digest, tasks or ("*",))
        holder = "the worker (ORBIT_WORKER_TOKEN)"
    out(token)
    # The sentence is for a person; when stderr is redirected into a workers
    # file, only the TOML entry must land there.
    if stderr_is_terminal():
        err()
        err(f"Give the token above to {holder}. Add this to the workers file:")
    err()
    err(entry)
