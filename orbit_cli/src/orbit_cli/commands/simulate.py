"""`orbit simulate FILE [--workflow W] [-i JSON | --input-file F] [--mocks F]
[--fail TASK=CODE]... [--signal NAME=JSON]... [--json]` (chapter 52).

Compiles FILE (or reads compiled IR), runs one execution of the chosen
workflow on the simulator shared with `orbit test` (orbit_cli.simulator:
the real engine, in memory, on a clock that jumps to the next due time)
with the answers of orbit_cli.simulate, and prints the timeline, child
timelines and final state like `orbit logs` and `orbit status` would, or
one JSON object with --json.

Everything the user names is checked before anything runs: the workflow,
the tasks of --mocks and --fail (against every task the compilation can
call), the signal names (against the workflow's signals) and the JSON of
every value. Results on stdout; the generated-results note and warnings
(a run that could not finish, a signal never sent) on stderr.

Exit status: 0 for a COMPLETED execution; 1 for any other end, a run
stopped before the end, or wrong input (compile errors, unknown names, bad
JSON, a value the runtime refuses); 2 for usage errors (a malformed
--fail or --signal, --input with --input-file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from orbit_cli import execution
from orbit_cli.definitions import load_definitions, select_workflow
from orbit_cli.output import (
    CliError,
    duration,
    err,
    json_error,
    out,
    parse_json_option,
    pretty_json,
    read_text,
)
from orbit_cli.simulate import Generated, report_json, task_contracts, unknown_tasks
from orbit_cli.simulator import Deployment, Outcome, SignalSend, Simulation
from orbit_cli.timeline import timeline
from orbit_core.errors import OrbitError
from orbit_core.ir import Definition


def _pair(
    option: str, value: str, shape: str, *, optional_value: bool = False
) -> tuple[str, str | None]:
    name, sep, rest = value.partition("=")
    if not name or (not optional_value and not rest):
        raise click.BadParameter(f"expected {shape}, got `{value}`", param_hint=option)
    return name, (rest if sep else None)


@click.command(
    "simulate", short_help="Run a workflow locally with mocked or generated task results"
)
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--workflow", help="The workflow to run when FILE defines several.")
@click.option(
    "-i", "--input", "input_text", metavar="JSON", help="The execution input (default {})."
)
@click.option(
    "--input-file",
    type=click.Path(path_type=Path),
    help="Read the execution input from this JSON file.",
)
@click.option(
    "--mocks",
    type=click.Path(path_type=Path),
    help="A JSON file whose object maps task names to the result each returns.",
)
@click.option(
    "--fail",
    "fails",
    multiple=True,
    metavar="TASK=CODE",
    help="Fail every attempt of TASK with error CODE, not retryable (repeatable).",
)
@click.option(
    "--signal",
    "signals",
    multiple=True,
    metavar="NAME=JSON",
    help="Send signal NAME as soon as a step awaits it; NAME=@file.json takes the payload from "
    "that file, a bare NAME sends {} (repeatable, in the order given).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the result, state, history and children as JSON."
)
def simulate(
    *,
    file: Path,
    workflow: str | None,
    input_text: str | None,
    input_file: Path | None,
    mocks: Path | None,
    fails: tuple[str, ...],
    signals: tuple[str, ...],
    as_json: bool,
) -> None:
    """Play one execution of a workflow in memory, without a server or
    workers: tasks return what --mocks says, fail as --fail says, or return
    a sample built from their contract; timers and timeouts pass at once."""
    if input_text is not None and input_file is not None:
        raise click.UsageError("give --input or --input-file, not both")
    failing = {name: code or "" for name, code in (_pair("--fail", f, "TASK=CODE") for f in fails)}
    sends = [_pair("--signal", s, "NAME=JSON or NAME", optional_value=True) for s in signals]

    definitions = load_definitions([file])
    definition = select_workflow(
        definitions, workflow, str(file), hint="; choose one with --workflow"
    )
    payload: Any = {}
    if input_text is not None:
        payload = parse_json_option("--input", input_text)
    elif input_file is not None:
        payload = _json_file("--input-file", input_file)
    mocked = _mocks(mocks)
    contracts = task_contracts(definitions)
    unknown = unknown_tasks([*mocked, *failing], contracts)
    if unknown:
        names = ", ".join(f"`{n}`" for n in unknown)
        callable_ = ", ".join(sorted(contracts)) or "none"
        raise CliError(
            f"{names} {'is not a task' if len(unknown) == 1 else 'are not tasks'} the workflow "
            f"can call; its tasks: {callable_}"
        )
    to_send = [_signal(definition, name, value) for name, value in sends]

    answers = Generated(contracts, mocked, failing)
    try:
        deployment = Deployment(definitions)
        outcome = Simulation(deployment, answers.answer).run(
            definition.name, definition.version, payload, to_send
        )
    except OrbitError as error:
        raise CliError(f"{error.code}: {error.message}") from None
    sampled = sorted(answers.sampled)
    if as_json:
        out(pretty_json(report_json(outcome, definition, sampled)))
    else:
        _human(outcome, definition, sampled)
    for problem in outcome.problems:
        err(f"warning: the simulation stopped: {problem}")
    for name in outcome.unsent_signals:
        err(f"warning: signal `{name}` was not sent: the execution never waited for it")
    sys.exit(0 if outcome.status == "COMPLETED" else 1)


def _human(outcome: Outcome, definition: Definition, sampled: list[str]) -> None:
    label = f"{definition.name}@{definition.version}"
    out(f"simulated {label} ({duration(outcome.simulated_ms)} simulated, no server or workers)")
    if sampled:
        err(f"note: generated sample results for: {', '.join(sampled)}")
    out()
    for line in timeline(outcome.main.history):
        out(line.rstrip())
    for child in outcome.children:
        out()
        out(
            f"child execution {child.id} ({child.state.get('workflow')}@{child.state.get('version')}):"
        )
        for line in timeline(child.history):
            out(line.rstrip())
    state = outcome.main.state
    out()
    # The clock of a run that stopped is the simulated one, not the wall's.
    created = state.get("created_at_ms")
    now = (created if isinstance(created, int) else 0) + outcome.simulated_ms
    for line in execution.header(state, now_ms=now):
        out(line)
    units = execution.touched_units(state)
    if units:
        out()
        out(execution.TABLE_HEADER)
        for key, unit in units:
            out(execution.table_row(key, unit).rstrip())
    output = execution.output_line(state)
    if output is not None:
        out()
        out(output)


def _json_file(option: str, path: Path) -> Any:
    try:
        return json.loads(read_text(str(path)))
    except json.JSONDecodeError as exc:
        raise CliError(f"{option} {path}: not valid JSON: {json_error(exc)}") from None


def _mocks(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    document = _json_file("--mocks", path)
    if not isinstance(document, dict):
        raise CliError(f"--mocks {path}: expected a JSON object mapping task names to results")
    return document


def _signal(definition: Definition, name: str, value: str | None) -> SignalSend:
    if definition.signal(name) is None:
        declared = ", ".join(s.name for s in definition.signals) or "none"
        raise CliError(
            f"--signal {name}: {definition.name} declares no signal `{name}`; its signals: {declared}"
        )
    if value is None:
        return SignalSend(name, {})
    if value.startswith("@"):
        return SignalSend(name, _json_file(f"--signal {name}", Path(value[1:])))
    return SignalSend(name, parse_json_option(f"--signal {name}", value))


# The lazy command table imports each command module as `cli`.
cli = simulate
