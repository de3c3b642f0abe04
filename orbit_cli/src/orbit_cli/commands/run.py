"""`orbit run`: deploy a file (or pick a registered workflow), start it, follow it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from orbit_cli import execution
from orbit_cli.client import ApiError, RuntimeClient, Unreachable, connection_options, path
from orbit_cli.commands.deploy import register
from orbit_cli.output import CliError, err, out, paint, parse_json_option, pretty_json, read_text

# How long each /wait call may hold while following. Transitions are printed
# when a call returns, so this is also the longest a line can lag behind.
POLL_MS = 500
# While the runtime cannot be reached mid-run: the first pause, doubling up to the last.
RECONNECT_FIRST_S = 0.2
RECONNECT_MAX_S = 5.0
# Workflow names are identifiers, so a target with one of these suffixes is a file.
SOURCE_SUFFIXES = (".orbit", ".json")


def _paint(text: str, colour: str | None) -> str:
    return paint(text, err=True, fg=colour) if colour else text


def _input(text: str | None, file: str | None) -> Any:
    if text is not None:
        return parse_json_option("--input", text)
    if file is not None:
        return parse_json_option("--input-file", read_text(file))
    return None


@click.command(
    "run", short_help="Deploy (if given a file) and start a workflow, then follow it to completion"
)
@click.argument("target")
@click.option(
    "--workflow", metavar="NAME", help="The workflow to start when the file defines several."
)
@click.option(
    "--version",
    metavar="VERSION",
    help="With a workflow name: the version to start [default: the highest registered].",
)
@click.option("-i", "--input", "input_text", metavar="JSON", help="The workflow input as JSON.")
@click.option(
    "--input-file",
    metavar="PATH",
    help="Read the workflow input from this JSON file (--input wins when both are given).",
)
@click.option(
    "--id",
    "execution_id",
    metavar="ID",
    help=(
        "Choose the execution id; starting an id that exists attaches to that execution"
        " (by workflow name: at the version it runs)."
    ),
)
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help=(
        "Start at most once per KEY: repeating the start with the same key, workflow and"
        " input attaches to the execution the first made (for the server's retention window)."
    ),
)
@click.option(
    "--no-wait", is_flag=True, help="Print the execution id on stdout and return at once."
)
@click.option(
    "--retention",
    metavar="DURATION",
    callback=lambda ctx, param, value: _retention(value),
    help=(
        "How long this execution stays in the database once finished, instead of its"
        " workflow's or the server's (read by a server started with --retention)."
    ),
)
@connection_options
def cli(
    *,
    client: RuntimeClient,
    target: str,
    workflow: str | None,
    version: str | None,
    input_text: str | None,
    input_file: str | None,
    execution_id: str | None,
    idempotency_key: str | None,
    no_wait: bool,
    retention: str | None,
) -> None:
    """Start TARGET and watch it finish.

    TARGET is an .orbit file or a compiled IR (.json) file, whose workflows
    are deployed first, or the name of a workflow the runtime already has.
    While the execution runs, each unit that succeeds, fails, waits for a
    retry, is skipped or is cancelled is reported on stderr; at the end a
    summary follows, and a completed execution's output is printed on stdout.
    The input is checked against the workflow's input type before anything
    is deployed, and every problem is reported. The exit status is 0 only
    when the execution ends COMPLETED (or with --no-wait). Ctrl-C stops only the watching (exit status 130): the
    execution keeps running, and `orbit run WORKFLOW --id ID` follows it again.
    """
    payload = _input(input_text, input_file)
    request: dict[str, Any] = {}
    file = Path(target)
    if file.suffix in SOURCE_SUFFIXES and not file.is_file():
        read_text(target)  # fails with the reason: a file was meant, not a workflow name
    # Starting an id that exists attaches to it, whatever input is given.
    existing = _existing(client, execution_id) if execution_id is not None else None
    if file.is_file():
        from orbit_cli.definitions import load_definitions, select_workflow
        from orbit_cli.input_check import check_input

        definitions = load_definitions([file])
        chosen = select_workflow(definitions, workflow, target, hint="; name one with --workflow")
        if existing is None:
            check_input(payload, chosen.input)  # every problem, and before deploying
        register(client, definitions)
        request.update(workflow=chosen.name, version=chosen.version)
    else:
        request["workflow"] = target
        if version is not None:
            request["version"] = version
        elif existing is not None and existing.get("workflow") == target:
            # Follow the execution at its own version, not the highest registered.
            request["version"] = existing.get("version")
    if payload is not None:
        request["input"] = payload
    optional = {
        "execution_id": execution_id,
        "retention": retention,
        "idempotency_key": idempotency_key,
    }
    request.update({name: value for name, value in optional.items() if value is not None})

    try:
        started = client.post("/v1/executions", request)
    except ApiError as exc:
        raise _explained(client, exc, request, existing) from None
    run_id = str(started.get("execution_id"))
    verb = "started execution" if started.get("created", True) else "attached to existing execution"
    if no_wait:
        err(f"{verb} {run_id}")
        out(run_id)
        return

    try:
        # Inside the try: a Ctrl-C that comes as soon as the line is out
        # still gets the hints below, not click's bare "Aborted!".
        err(f"{verb} {run_id}")
        state = follow(client, run_id)
    except KeyboardInterrupt:
        # Only the watching stops: the execution is the runtime's, not ours.
        err()
        err(f"stopped following; execution {run_id} keeps running on the server")
        err(f"  where it stands:  orbit status {run_id}   (its history: orbit logs {run_id})")
        err(f"  follow it again:  orbit run {request['workflow']} --id {run_id}")
        err(f"  stop it:          orbit cancel {run_id}")
        sys.exit(130)
    err()
    for line in execution.header(state, _paint):
        err(line)
    if state.get("status") == "COMPLETED":
        if "output" in state:
            out(pretty_json(state["output"]))
        return
    sys.exit(1)


def _retention(value: str | None) -> str | None:
    """`--retention` as given, once it reads as a duration (a usage error
    otherwise, before anything is deployed)."""
    from orbit_core.schedules.times import TimeFormatError, parse_duration

    if value is None:
        return None
    try:
        if parse_duration(value) <= 0:
            raise click.BadParameter(f"`{value}`: must be longer than 0s")
    except TimeFormatError as exc:
        raise click.BadParameter(f"`{value}`: {exc}") from None
    return value


def _existing(client: RuntimeClient, execution_id: str) -> dict[str, Any] | None:
    """The execution `execution_id` names, or None when there is none (or it cannot be read)."""
    try:
        state: dict[str, Any] = client.get(path("v1", "executions", execution_id))
    except ApiError:
        return None  # NOT_FOUND, or not ours to read: the start decides
    return state


def _explained(
    client: RuntimeClient,
    exc: ApiError,
    request: dict[str, Any],
    existing: dict[str, Any] | None,
) -> CliError:
    """The start's refusal, with what the runtime's one-line answer leaves out:
    every input problem, or how to follow an id that runs another version."""
    workflow = str(request["workflow"])
    if exc.code == "INVALID_INPUT":
        from orbit_cli.input_check import InvalidInput, input_problems
        from orbit_core.ir import from_json

        try:
            version = [str(request["version"])] if "version" in request else []
            definition = from_json(client.get(path("v1", "workflows", workflow, *version)))
        except (CliError, ValueError, TypeError, KeyError):
            return exc
        problems = input_problems(request.get("input"), definition.input)
        return InvalidInput(problems) if problems else exc
    if (
        exc.code == "EXECUTION_EXISTS"
        and existing is not None
        and existing.get("workflow") == workflow
    ):
        run_id, runs = request["execution_id"], existing.get("version")
        return CliError(
            f"{exc.format_message()}\n"
            f"  hint: it runs {workflow}@{runs}; follow it with "
            f"`orbit run {workflow} --id {run_id}` (or add --version {runs})"
        )
    return exc


def follow(
    client: RuntimeClient, execution_id: str, sleep: Callable[[float], None] = time.sleep
) -> dict[str, Any]:
    """Reports unit transitions until the execution is terminal; returns the final state.

    The runtime answered the start, so losing it later is an outage or a
    restart, not a missing server: the follower says so once and keeps
    asking (the execution is durable and goes on when the runtime is back),
    rather than failing with the hint to start `orbit server`."""
    follower = execution.Follower(_paint)
    state: dict[str, Any] = client.get(path("v1", "executions", execution_id))
    delay = None
    while True:
        for line in follower.observe(state):
            err(line)
        if state.get("status") in execution.TERMINAL:
            return state
        try:
            state = client.get(path("v1", "executions", execution_id, "wait"), timeout_ms=POLL_MS)
        except Unreachable as exc:
            if delay is None:
                reason = str(exc).splitlines()[0]
                err(f"lost the ORBIT runtime while following ({reason}); retrying until it is back")
                delay = RECONNECT_FIRST_S
            sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)
            continue
        if delay is not None:
            err("reconnected to the ORBIT runtime")
            delay = None
