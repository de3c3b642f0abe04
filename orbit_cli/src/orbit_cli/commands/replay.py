"""`orbit replay [EXECUTION_ID] [--history FILE] [--definition FILE] ...`
(chapter 53): check a recorded history against this version's decider.

The history comes from the runtime (`GET /v1/executions/{id}/history`,
`?run=N` with --run) or from a file; the definition from the runtime
(`GET /v1/workflows/{name}/{version}` of the workflow the history names)
or from --definition (IR `.json` or `.orbit` source, compiled first). A
history with live migrations (`WorkflowMigrated`) also needs each
definition it moved to: matched by hash in --definition's file, else
fetched from the runtime by version when the history came from it. The
replay itself is `orbit_cli.replay`. Read-only: nothing is sent to the
runtime but GETs.

Exit status: 0 if no recorded decision differs (up to --at); 1 for a
divergence, or a history or definition that cannot be read; 2 for usage
errors (an execution id together with --history, or neither).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from orbit_cli import execution
from orbit_cli.client import RuntimeClient, connection_options, path
from orbit_cli.output import CliError, compact_json, json_error, out, pretty_json, read_text
from orbit_cli.redact import redact
from orbit_cli.replay import (
    HistoryError,
    Report,
    decode_events,
    guess_execution_id,
    parse_history,
    replay,
)
from orbit_core import events as ev
from orbit_core.ir import Definition, IRError, from_json


@click.command(
    "replay",
    short_help="Re-run a recorded history through the current decider and report divergences",
)
@click.argument("execution_id", required=False)
@click.option(
    "--history",
    "history_file",
    type=click.Path(path_type=Path),
    help="Read the history from this file (what the history endpoint returns, or an array of "
    "events) instead of the runtime.",
)
@click.option(
    "--definition",
    "definition_file",
    type=click.Path(path_type=Path),
    help="Replay against this definition (IR `.json`, or `.orbit` source to compile); needed "
    "with --history, and used instead of the runtime's copy with an execution id.",
)
@click.option(
    "--workflow",
    help="Which workflow of --definition to use; by default the one named in the history.",
)
@click.option(
    "--at",
    "at",
    type=click.IntRange(min=1),
    metavar="SEQ",
    help="Stop after event SEQ and show the state the execution had at that point.",
)
@click.option(
    "--run",
    "run",
    type=click.IntRange(min=1),
    help="With an execution id: which run to replay after continue-as-new (default: the last).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report object.")
@connection_options
def replay_command(
    *,
    client: RuntimeClient,
    execution_id: str | None,
    history_file: Path | None,
    definition_file: Path | None,
    workflow: str | None,
    at: int | None,
    run: int | None,
    as_json: bool,
) -> None:
    """Walk a recorded history through this version's decider and list each
    recorded decision it would make differently; --at shows the state after
    any event."""
    if execution_id is not None and history_file is not None:
        raise click.UsageError("give an execution id or --history, not both")
    if execution_id is None and history_file is None:
        raise click.UsageError("give an execution id, or --history with --definition")
    if history_file is not None and definition_file is None:
        raise click.UsageError("--history requires --definition")
    if history_file is not None and run is not None:
        raise click.UsageError("--run cannot be combined with --history")

    if history_file is not None:
        named, raw = _history_file(history_file)
        source = str(history_file)
    else:
        assert execution_id is not None
        document = client.get(path("v1", "executions", execution_id, "history"), run=run)
        named, raw = _parse(document, f"the history of {execution_id}")
        source = f"the history of {execution_id}"
    try:
        events = decode_events(raw)
    except HistoryError as error:
        raise CliError(f"{source}: {error}") from None
    created = events[0]
    assert isinstance(created, ev.WorkflowCreated)
    eid = execution_id or named or guess_execution_id(events) or "replay"
    if definition_file is not None:
        definition = _local_definition(definition_file, workflow or created.workflow)
    else:
        definition = _runtime_definition(client, created.workflow, created.version)
    targets = _migration_targets(
        client if execution_id is not None else None, events, definition_file, definition.name
    )
    if at is not None and at > len(events):
        raise CliError(f"--at {at}: the history has {len(events)} events")
    try:
        report = replay(eid, events, definition, at=at, migrated_to=targets)
    except HistoryError as error:
        raise CliError(f"{source}: {error}") from None
    if as_json:
        out(pretty_json(report_json(report)))
    else:
        for line in human(report, at is not None):
            out(line.rstrip())
    sys.exit(1 if report.divergences else 0)


def _runtime_definition(client: RuntimeClient, name: str, version: str) -> Definition:
    document = client.get(path("v1", "workflows", name, version))
    try:
        return from_json(document)
    except IRError as error:
        raise CliError(
            f"the runtime's definition of {name}@{version} is not valid IR: {error}"
        ) from None


def _migration_targets(
    client: RuntimeClient | None,
    events: list[ev.Event],
    definition_file: Path | None,
    name: str,
) -> list[Definition]:
    """The definitions the history's live migrations (`WorkflowMigrated`)
    moved it to, found by hash: in --definition's file first, else from the
    runtime when the history came from it. One the replay cannot find is
    reported by the replay itself, naming the version and hash."""
    wanted = [e for e in events if isinstance(e, ev.WorkflowMigrated)]
    if not wanted:
        return []
    found: dict[str, Definition] = {}
    if definition_file is not None:
        from orbit_cli.definitions import load_definitions

        found = {d.definition_hash: d for d in load_definitions([definition_file])}
    for event in wanted:
        if event.to_hash in found or client is None:
            continue
        target = _runtime_definition(client, name, event.to_version)
        if target.definition_hash == event.to_hash:
            found[target.definition_hash] = target
    return list(found.values())


def _history_file(file: Path) -> tuple[str | None, list[Any]]:
    text = read_text(str(file))
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{file}: not valid JSON: {json_error(exc)}") from None
    return _parse(document, str(file))


def _parse(document: Any, source: str) -> tuple[str | None, list[Any]]:
    try:
        return parse_history(document)
    except HistoryError as error:
        raise CliError(f"{source}: {error}") from None


def _local_definition(file: Path, name: str) -> Definition:
    from orbit_cli.definitions import load_definitions

    if not file.exists():
        raise CliError(f"cannot read {file}: No such file or directory (os error 2)")
    definitions = load_definitions([file])
    for definition in definitions:
        if definition.name == name:
            return definition
    known = ", ".join(d.name for d in definitions) or "none"
    raise CliError(f"{file} does not define workflow `{name}` (it defines: {known})")


# ---- output


def human(report: Report, with_state: bool) -> list[str]:
    d = report.definition
    lines = [
        f"replayed {report.events} events of {report.execution_id} against "
        f"{d.name}@{d.version} with the current decider"
    ]
    counts = f"  {report.decided} decided, {report.external} external"
    if report.divergent:
        counts += f", {report.divergent} divergent"
    lines.append(counts)
    mismatch = report.mismatch
    if mismatch is not None:
        lines.append(
            f"  note: the history was recorded with definition {mismatch[0]}, not {mismatch[1]}"
        )
    for divergence in report.divergences:
        lines.append("")
        lines.append(f"divergence at #{divergence.seq}: the runtime recorded")
        lines.append(f"    {compact_json(redact(divergence.recorded))}")
        if divergence.decider:
            lines.append("  but the current decider would record")
            lines += [f"    {compact_json(redact(e))}" for e in divergence.decider]
        else:
            lines.append("  but the current decider would record nothing at that point")
    if with_state:
        lines += _state(report)
    elif not report.divergences:
        lines.append("consistent: every recorded decision is reproduced")
    return lines


def _state(report: Report) -> list[str]:
    last = report.last or {}
    since = int(last.get("timestamp_ms", report.first_ms)) - report.first_ms
    state: dict[str, Any] = dict(report.state.to_json())  # the renderers take plain dicts
    lines = ["", f"state after #{last.get('seq')} {last.get('type')} (+{since}ms):", ""]
    # The execution as it stood at that event: its elapsed time ends there too.
    lines += execution.header(state, now_ms=report.first_ms + since)
    units = execution.touched_units(state)
    if units:
        lines.append("")
        lines.append(execution.TABLE_HEADER)
        lines += [execution.table_row(key, unit) for key, unit in units]
    outputs = [(key, unit["output"]) for key, unit in units if "output" in unit]
    if outputs:
        lines.append("")
        lines.append("  step outputs:")
        lines += [f"    {key}: {compact_json(redact(value))}" for key, value in outputs]
    buffered = [s for s in state.get("signals", []) if "delivered_to" not in s]
    if buffered:
        lines.append("")
        lines.append("  signal buffer:")
        lines += [
            f"    #{s.get('seq')} {s.get('name')}: {compact_json(redact(s.get('payload')))}"
            for s in buffered
        ]
    if report.pending:
        lines.append("")
        lines.append("  next decisions:")
        lines += [f"    {compact_json(redact(e))}" for e in report.pending]
    return lines


def report_json(report: Report) -> dict[str, Any]:
    data: dict[str, Any] = {
        "execution_id": report.execution_id,
        "events": report.events,
        "external": report.external,
        "decided": report.decided,
        "divergences": [
            {"seq": d.seq, "recorded": redact(d.recorded), "decider": redact(d.decider)}
            for d in report.divergences
        ],
        "origins": [{"seq": seq, "origin": origin} for seq, origin in report.origins],
    }
    mismatch = report.mismatch
    if mismatch is not None:
        data["definition_mismatch"] = list(mismatch)
    data["pending"] = redact(report.pending)
    data["state"] = redact(report.state.to_json())
    return data


# The lazy command table imports each command module as `cli`.
cli = replay_command
