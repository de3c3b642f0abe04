"""`orbit test [--filter TEXT] [--format human|json] FILES...` (chapter 51).

Compiles the files like `orbit check`; on errors prints the diagnostics as
check does (on stderr, or as `{"diagnostics": [...], "tests": []}` with
--format json) and runs nothing. Otherwise runs every selected test of the
compilation on its own simulated engine (orbit_cli.testrun) and prints one
line per test, the failures with the execution timelines, and the summary
on stdout. Exit 0 when every selected test passed (also when none was
selected), 1 when one failed, the files do not compile, or no files were
given.

`--junit-xml PATH` (beyond the book, for CI systems that read JUnit XML
reports, as `pytest --junitxml` writes them) also writes one <testcase> per
selected test, a failed one carrying its failure report.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import click

from orbit_cli.output import CliError, os_reason, pretty_json
from orbit_cli.simulator import Deployment
from orbit_cli.sources import stderr_colour
from orbit_cli.testrun import TestResult, execution_json, run_test, simulated
from orbit_cli.timeline import timeline


@click.command(
    "test", short_help="Run the `test` declarations in .orbit files, without a server or workers"
)
@click.argument("files", nargs=-1)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["human", "json"]),
    default="human",
    show_default=True,
    help="human: a line per test, then failures and a summary; json: one report object.",
)
@click.option(
    "--filter",
    "name_filter",
    metavar="FILTER",
    help="Select the tests whose name includes this text; the rest count as filtered out.",
)
@click.option(
    "--junit-xml",
    "junit_xml",
    metavar="PATH",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the results as a JUnit XML report to PATH, for CI systems.",
)
def test(
    files: tuple[str, ...], output_format: str, name_filter: str | None, junit_xml: Path | None
) -> None:
    """Compile FILES and run every `test` declaration of the compilation on an
    in-memory engine whose clock jumps from one due time to the next."""
    from orbit_lang.render import render_json, render_report
    from orbit_lang.testplan import plan_tests

    color = stderr_colour(files)
    began = time.perf_counter()
    plan = plan_tests([Path(f) for f in files])
    compiled = plan.compiled
    if output_format == "human" and compiled.diagnostics:
        click.echo(
            render_report(compiled.diagnostics, compiled.sources, color=color), nl=False, err=True
        )
    if not compiled.ok:
        if output_format == "json":
            diagnostics = json.loads(render_json(compiled.diagnostics))["diagnostics"]
            click.echo(pretty_json({"diagnostics": diagnostics, "tests": []}))
        sys.exit(1)
    selected = [c for c in plan.tests if name_filter is None or name_filter in c.name]
    filtered_out = len(plan.tests) - len(selected)
    if output_format == "human":
        noun = "test" if len(selected) == 1 else "tests"
        click.echo(f"running {len(selected)} {noun}")
    results = []
    walls: list[float] = []
    deployment = Deployment(plan.definitions) if selected else None
    for case in selected:
        assert deployment is not None
        started = time.perf_counter()
        result = run_test(case, deployment)
        walls.append(time.perf_counter() - started)
        results.append(result)
        if output_format == "human":
            word = "ok" if result.passed else "FAILED"
            click.echo(f"{word:<8}{case.name} ({simulated(result.outcome.simulated_ms)} simulated)")
    elapsed = time.perf_counter() - began
    if junit_xml is not None:
        _write_junit(junit_xml, results, walls, filtered_out, elapsed)
    if output_format == "json":
        click.echo(pretty_json(_report(results, filtered_out)))
    else:
        _human_summary(results, filtered_out, elapsed)
    sys.exit(0 if all(r.passed for r in results) else 1)


def _human_summary(results: list[TestResult], filtered_out: int, elapsed: float) -> None:
    failed = [r for r in results if not r.passed]
    if failed:
        click.echo("\nfailures:")
        for result in failed:
            click.echo("")
            click.echo("\n".join(failure_report(result)))
    passed = len(results) - len(failed)
    verdict = "FAILED" if failed else "ok"
    click.echo(
        f"\ntest result: {verdict}. {passed} passed, {len(failed)} failed, "
        f"{filtered_out} filtered out ({elapsed:.2f}s)"
    )


def failure_report(result: TestResult) -> list[str]:
    """The `---- <name> (...)` block of one failed test."""
    case = result.case
    lines = [f"---- {case.name} ({case.file}:{case.line}, {case.workflow}@{case.version})"]
    lines += [f"  ✗ {failure}" for failure in result.failures]
    outcome = result.outcome
    for execution in (outcome.main, *outcome.children):
        lines.append("")
        lines.append(f"  timeline of execution `{execution.id}`:")
        lines += [f"    {line}".rstrip() for line in timeline(execution.history)]
    return lines


def _report(results: list[TestResult], filtered_out: int) -> dict[str, Any]:
    tests = []
    for result in results:
        case = result.case
        entry: dict[str, Any] = {
            "name": case.name,
            "workflow": case.workflow,
            "version": case.version,
            "file": case.file,
            "line": case.line,
            "status": "passed" if result.passed else "failed",
            "failures": list(result.failures),
            "execution": execution_json(result.outcome),
        }
        if not result.passed:
            entry["history"] = result.outcome.main.history
        tests.append(entry)
    passed = sum(1 for r in results if r.passed)
    return {
        "tests": tests,
        "passed": passed,
        "failed": len(results) - passed,
        "filtered_out": filtered_out,
    }


def _write_junit(
    path: Path, results: list[TestResult], walls: list[float], filtered_out: int, elapsed: float
) -> None:
    failed = sum(1 for r in results if not r.passed)
    counts = {"tests": str(len(results)), "failures": str(failed), "errors": "0"}
    root = ElementTree.Element("testsuites", {**counts, "time": f"{elapsed:.3f}"})
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        {"name": "orbit test", **counts, "skipped": str(filtered_out), "time": f"{elapsed:.3f}"},
    )
    for result, wall in zip(results, walls, strict=True):
        case = result.case
        element = ElementTree.SubElement(
            suite,
            "testcase",
            {
                "classname": f"{case.workflow}@{case.version}",
                "name": case.name,
                "file": case.file,
                "line": str(case.line),
                "time": f"{wall:.3f}",
            },
        )
        if not result.passed:
            failure = ElementTree.SubElement(element, "failure", {"message": result.failures[0]})
            failure.text = "\n".join(failure_report(result))
    try:
        ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {os_reason(exc)}") from None


# The lazy command table imports each command module as `cli`.
cli = test
