"""`orbit verify FILES [--workflow W] [--depth N] [--max-states N] [--seed S]
[--json] [--out DIR]` (beyond the book): explore every interleaving of a
workflow's task outcomes, signals, timers and cancellations within the
bounds and check the invariants (orbit_cli.verify; docs/testing/verify.md).

Compiles the files like `orbit check`; on errors prints the diagnostics on
stderr (with --json also `{"diagnostics": [...], "verifies": []}` on
stdout) and exits 2. Otherwise verifies every `verify` block of the
compilation (only those of --workflow with it), or, when the files hold
none, every workflow they define against the built-in invariants. Each
violation's shortest counterexample found is written to --out as a history
for `orbit replay --history` and printed as an `orbit test` case.

Exit status, following chapter 66: 0 when no invariant is violated; 1 when
one is; 2 for usage errors and files that do not compile.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import click

from orbit_cli.output import CliError, os_reason, pretty_json
from orbit_cli.sources import stderr_colour
from orbit_cli.verify.explore import Bounds, Result, Violation, explore
from orbit_cli.verify.model import Choice, Model, Node
from orbit_cli.verify.targets import Target

DEFAULT_OUT = Path(".orbit") / "verify"


@click.command(
    "verify",
    short_help="Check every interleaving of outcomes, signals and timers against invariants",
)
@click.argument("files", nargs=-1, required=True)
@click.option("--workflow", help="Verify only this workflow (its verify blocks, or itself).")
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=Bounds().depth,
    show_default=True,
    help="At most this many environment choices (outcomes, signals, cancellation, clock) "
    "per execution.",
)
@click.option(
    "--max-states",
    type=click.IntRange(min=1),
    default=Bounds().max_states,
    show_default=True,
    help="Stop after this many distinct states per verify block.",
)
@click.option(
    "--seed",
    type=int,
    help="Explore the choices of each state in an order shuffled by this seed (which of "
    "several equally short counterexamples is reported, and what a bound cuts off).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report object.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_OUT,
    show_default=True,
    help="Write each counterexample's history here, as <verify name>.history.json.",
)
def verify(
    *,
    files: tuple[str, ...],
    workflow: str | None,
    depth: int,
    max_states: int,
    seed: int | None,
    as_json: bool,
    out_dir: Path,
) -> None:
    """Compile FILES and explore, within the bounds, every order and outcome of
    the task attempts, signals, timers, cancellations and child workflows of
    each `verify` block's workflow, checking its invariants and the built-in
    ones; print coverage and, for each violation, the shortest counterexample
    found."""
    from orbit_cli.verify.targets import targets
    from orbit_lang.render import render_json, render_report
    from orbit_lang.testplan import plan_tests

    began = time.perf_counter()
    paths = [Path(f) for f in files]
    plan = plan_tests(paths)
    compiled = plan.compiled
    if compiled.diagnostics and not as_json:
        color = stderr_colour(files)
        click.echo(
            render_report(compiled.diagnostics, compiled.sources, color=color), nl=False, err=True
        )
    if not compiled.ok:
        if as_json:
            diagnostics = json.loads(render_json(compiled.diagnostics))["diagnostics"]
            click.echo(pretty_json({"diagnostics": diagnostics, "verifies": []}))
        sys.exit(2)
    chosen = targets(plan, paths, workflow)
    if workflow is not None and not chosen:
        raise click.UsageError(f"no verify block or workflow `{workflow}` in the files")
    bounds = Bounds(depth=depth, max_states=max_states)
    reports = []
    used: set[str] = set()
    for target in chosen:
        model = _model(target, seed)
        result = explore(model, target.value(), target.invariants, bounds)
        written = _write(model, target, result, out_dir, used)
        reports.append((target, model, result, written))
        if not as_json:
            _human(target, result, written)
    violations = sum(len(r.violations) for _, _, r, _ in reports)
    elapsed = time.perf_counter() - began
    if as_json:
        click.echo(pretty_json(_json(reports, violations)))
    else:
        verdict = "FAILED" if violations else "ok"
        noun = "block" if len(reports) == 1 else "blocks"
        click.echo(
            f"\nverify result: {verdict}. {len(reports)} {noun}, {violations} "
            f"violation{'s' if violations != 1 else ''} ({elapsed:.2f}s)"
        )
    sys.exit(1 if violations else 0)


class _Shuffled(Model):
    def __init__(self, target: Target, seed: int) -> None:
        super().__init__(target.definition, codes=target.codes())
        self.seed = seed

    def choices(self, node: Node) -> list[Choice]:
        found = super().choices(node)
        # Seeded by the state's own history length and the seed, so a rerun
        # with the same seed explores in the same order.
        random.Random(self.seed * 1_000_003 + len(node.events)).shuffle(found)
        return found


def _model(target: Target, seed: int | None) -> Model:
    if seed is None:
        return Model(target.definition, codes=target.codes())
    return _Shuffled(target, seed)


# ---------------------------------------------------------------- writing


def _write(
    model: Model, target: Target, result: Result, out_dir: Path, used: set[str]
) -> list[tuple[Violation, Path, str]]:
    from orbit_cli.verify.counterexample import slug, test_case, write_history

    written = []
    base = slug(target.name)
    for violation in result.violations:
        stem, n = base, 1
        while stem in used:
            n += 1
            stem = f"{base}.{n}"
        used.add(stem)
        try:
            path = write_history(violation, out_dir, stem)
        except OSError as exc:
            raise CliError(f"cannot write {out_dir}: {os_reason(exc)}") from None
        case = test_case(model, f"{target.name}: counterexample", violation)
        written.append((violation, path, case))
    return written


# ---------------------------------------------------------------- reports


def coverage_rows(result: Result) -> list[tuple[str, bool, list[str]]]:
    """(unit, reached, settled statuses seen) for every declared unit, then
    any unit reached that the declaration list does not name."""
    units = result.coverage.units
    rows = [(key, key in units, sorted(units.get(key, ()))) for key in result.declared]
    rows += [
        (key, True, sorted(v)) for key, v in sorted(units.items()) if key not in result.declared
    ]
    return rows


def _human(target: Target, result: Result, written: list[tuple[Violation, Path, str]]) -> None:
    d = target.definition
    click.echo(f'verify "{target.name}" ({d.name}@{d.version}, {target.file}:{target.line})')
    click.echo(
        f"  explored {result.states} states, {result.transitions} transitions, "
        f"{result.paths} paths (deepest {result.max_depth} choices) in {result.seconds:.2f}s"
    )
    if result.truncated:
        click.echo(f"  incomplete: {result.truncated}; raise --depth or --max-states to go further")
    ends = ", ".join(f"{status} {n}" for status, n in sorted(result.coverage.ends.items()))
    click.echo(f"  ends: {ends or 'none'}")
    click.echo("  coverage:")
    rows = coverage_rows(result)
    width = max([len(k) for k, _, _ in rows] + [4])
    for key, reached, statuses in rows:
        mark = "✓" if reached else "✗"
        detail = ", ".join(statuses) if reached else "never reached"
        click.echo(f"    {mark} {key:<{width}}  {detail}".rstrip())
    tasks = result.coverage.tasks
    if tasks:
        click.echo("  task outcomes:")
        width = max(len(t) for t in tasks)
        for task in sorted(tasks):
            click.echo(f"    {task:<{width}}  {', '.join(sorted(tasks[task]))}")
    if not written:
        click.echo("  ✓ every invariant holds")
    for violation, path, case in written:
        click.echo(f"  ✗ {violation.invariant}")
        click.echo(f"      {violation.message}")
        click.echo(f"      counterexample ({violation.node.depth} choices): {path}")
        click.echo(f"      replay it: orbit replay --history {path} --definition {target.source}")
        click.echo("      as a test:")
        for line in case.splitlines():
            click.echo(f"        {line}")


def _json(
    reports: list[tuple[Target, Model, Result, list[tuple[Violation, Path, str]]]],
    violations: int,
) -> dict[str, Any]:
    blocks = []
    for target, _, result, written in reports:
        blocks.append(
            {
                "name": target.name,
                "workflow": result.workflow,
                "version": result.version,
                "file": target.file,
                "line": target.line,
                "input": result.input,
                "states": result.states,
                "transitions": result.transitions,
                "paths": result.paths,
                "unfinished": result.unfinished,
                "max_depth": result.max_depth,
                "seconds": round(result.seconds, 3),
                "complete": not result.truncated,
                "truncated": result.truncated or None,
                "ends": dict(sorted(result.coverage.ends.items())),
                "coverage": [
                    {"unit": key, "reached": reached, "statuses": statuses}
                    for key, reached, statuses in coverage_rows(result)
                ],
                "task_outcomes": {
                    task: sorted(outcomes)
                    for task, outcomes in sorted(result.coverage.tasks.items())
                },
                "violations": [
                    {
                        "invariant": v.invariant,
                        "built_in": v.user is None,
                        "message": v.message,
                        "choices": v.node.depth,
                        "history": str(path),
                        "test": case,
                    }
                    for v, path, case in written
                ],
            }
        )
    return {"verifies": blocks, "violations": violations, "ok": violations == 0}


# The lazy command table imports each command module as `cli`.
cli = verify
