"""`orbit plan FILES [--starts-per-s R] [--store sqlite|postgres] [--retention D]
[--items N] [--max-history-events N] [--max-fan-out N] [--max-payload-bytes N]
[--json]` (beyond the book, issue 44): what one execution of each workflow
costs before it runs.

Compiles FILES like `orbit check` (errors: the diagnostics on stderr, exit
2), then prints per workflow its static envelope (orbit_core.envelope):
history events, commits and task dispatches per run on the typical path
and in the worst case, history bytes, what each signal beyond the awaited
ones adds, why a figure has no bound; and orbit_cli.planmodel's storage
growth per day at `--starts-per-s` (kept for `--retention`) and throughput
estimate for `--store`. The `--max-*` options are the server's limits
(defaults from ORBIT_MAX_*, as `orbit server` reads them): the envelope
is computed under them, and a worst case beyond `--max-history-events`
(or the workflow's own) is reported as W1340/W1341 on stderr. Exit 0.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from orbit_cli.output import pretty_json
from orbit_cli.planmodel import STORES, Figures, figures
from orbit_cli.sources import stderr_colour
from orbit_core.envelope import TYPICAL_ITEMS, Envelope, Limits, envelope


def _retention_days(text: str | None) -> float | None:
    if text is None:
        return None
    from orbit_lang.policy import parse_duration

    ms = parse_duration(text)
    if ms is None or ms == 0:
        raise click.BadParameter(f"expected a duration such as 30d or 12h, not {text!r}")
    return ms / 86_400_000


@click.command("plan", short_help="Show each workflow's worst-case history, storage and throughput")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--starts-per-s",
    type=click.FloatRange(min=0),
    help="Executions started per second, for the storage growth per day.",
)
@click.option(
    "--store",
    type=click.Choice(sorted(STORES)),
    default="sqlite",
    show_default=True,
    help="The store the throughput estimate and the bytes on disk are for.",
)
@click.option(
    "--retention",
    metavar="DURATION",
    help="How long finished executions are kept (as `orbit server --retention`), e.g. 30d.",
)
@click.option(
    "--items",
    type=click.IntRange(min=0),
    default=TYPICAL_ITEMS,
    show_default=True,
    help="Elements of a `for` step on the typical path (at most its fan-out limit).",
)
@click.option(
    "--max-history-events",
    type=click.IntRange(min=1),
    envvar="ORBIT_MAX_HISTORY_EVENTS",
    help="The server's --max-history-events.",
)
@click.option(
    "--max-fan-out",
    type=click.IntRange(min=1),
    envvar="ORBIT_MAX_FAN_OUT",
    help="The server's --max-fan-out.",
)
@click.option(
    "--max-payload-bytes",
    type=click.IntRange(min=1),
    envvar="ORBIT_MAX_PAYLOAD_BYTES",
    help="The server's --max-payload-bytes.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def plan(
    *,
    files: tuple[str, ...],
    starts_per_s: float | None,
    store: str,
    retention: str | None,
    items: int,
    max_history_events: int | None,
    max_fan_out: int | None,
    max_payload_bytes: int | None,
    as_json: bool,
) -> None:
    """Compile FILES and print, per workflow, the events, commits and task
    dispatches of one run (typical path and worst case), its history bytes,
    the storage it adds per day and an estimate of the throughput."""
    from orbit_lang import compile_paths
    from orbit_lang.diagnostics import Severity
    from orbit_lang.envelope import findings
    from orbit_lang.render import render_report

    days = _retention_days(retention)
    result = compile_paths([Path(f) for f in files])
    color = stderr_colour(files)
    if not result.ok:
        click.echo(
            render_report(result.diagnostics, result.sources, color=color), nl=False, err=True
        )
        sys.exit(2)
    limits = Limits(max_fan_out, max_history_events, max_payload_bytes)
    diagnostics = list(result.diagnostics)
    if max_history_events is not None:
        where = f"the server's --max-history-events {max_history_events}"
        for checked in result.workflows:
            declared = checked.definition.limits.get("max_history_events")
            if declared is None or declared > max_history_events:
                diagnostics += findings(
                    checked.node, checked.definition, limits, Severity.WARNING, where
                )
    if diagnostics:
        click.echo(render_report(diagnostics, result.sources, color=color), nl=False, err=True)
    rows = []
    for definition in result.definitions:
        env = envelope(definition, limits, items)
        rows.append((env, figures(env, store, starts_per_s, days)))
    if as_json:
        click.echo(pretty_json(_json(rows, store, starts_per_s, retention)))
        return
    for i, (env, fig) in enumerate(rows):
        if i:
            click.echo()
        _human(env, fig, store, starts_per_s, retention)


def _n(value: int | None) -> str:
    return "unbounded" if value is None else f"{value:,}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "unbounded"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def _human(
    env: Envelope, fig: Figures, store: str, starts_per_s: float | None, retention: str | None
) -> None:
    per = "per run" if env.per_run else "per execution"
    click.echo(f"{env.workflow}@{env.version}  ({per}: typical path / worst case)")
    click.echo(f"  events       {fig.events[0]:>10,} / {_n(fig.events[1])}")
    click.echo(f"  commits      {fig.commits[0]:>10,} / {_n(fig.commits[1])}")
    click.echo(f"  dispatches   {fig.dispatches[0]:>10,} / {_n(fig.dispatches[1])}")
    click.echo(
        f"  history      {_bytes(fig.history_bytes[0]):>10} / {_bytes(fig.history_bytes[1])}"
    )
    for signal, cost in env.per_signal:
        click.echo(
            f"  signal {signal}: each one no step awaits adds {_n(cost)} event{'' if cost == 1 else 's'}"
        )
    for cause in env.unbounded:
        where = f"step `{cause.step}`: " if cause.step else ""
        click.echo(f"  unbounded events: {where}{cause.reason}; {cause.fix}")
    if env.unbounded_bytes:
        cause = env.unbounded_bytes[0]
        more = len(env.unbounded_bytes) - 1
        extra = f" (and {more} more)" if more else ""
        click.echo(f"  unbounded bytes: {cause.reason}{extra}")
    click.echo(
        f"  throughput   ~{fig.executions_per_s:,.0f} executions/s on {store} "
        "(one server; model: docs/plan-and-envelope.md)"
    )
    if starts_per_s is not None and fig.growth_per_day is not None:
        line = f"  storage      {_bytes(fig.growth_per_day)}/day at {starts_per_s:g} starts/s"
        if fig.steady_state is not None:
            line += f", {_bytes(fig.steady_state)} kept with --retention {retention}"
        else:
            line += ", growing for ever without --retention"
        click.echo(line)


def _json(
    rows: list[tuple[Envelope, Figures]],
    store: str,
    starts_per_s: float | None,
    retention: str | None,
) -> dict[str, Any]:
    out = []
    for env, fig in rows:
        out.append(
            {
                "workflow": env.workflow,
                "version": env.version,
                "per_run": env.per_run,
                "typical": {
                    "events": fig.events[0],
                    "commits": fig.commits[0],
                    "dispatches": fig.dispatches[0],
                    "history_bytes": fig.history_bytes[0],
                },
                "worst_case": {
                    "events": fig.events[1],
                    "commits": fig.commits[1],
                    "dispatches": fig.dispatches[1],
                    "history_bytes": fig.history_bytes[1],
                },
                "per_signal": dict(env.per_signal),
                "unbounded": [
                    {"step": c.step, "reason": c.reason, "fix": c.fix} for c in env.unbounded
                ],
                "unbounded_bytes": [
                    {"step": c.step, "reason": c.reason} for c in env.unbounded_bytes
                ],
                "steps": [
                    {
                        "step": s.key,
                        "typical_events": s.cost.events,
                        "worst_events": s.cost.worst_events,
                    }
                    for s in env.steps
                ],
                "stored_bytes": fig.stored_bytes,
                "executions_per_s": round(fig.executions_per_s, 1),
                "storage_per_day_bytes": fig.growth_per_day,
                "storage_kept_bytes": fig.steady_state,
            }
        )
    return {
        "store": store,
        "starts_per_s": starts_per_s,
        "retention": retention,
        "workflows": out,
    }


cli = plan
