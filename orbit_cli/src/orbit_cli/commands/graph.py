"""`orbit graph FILE`: a workflow as a Mermaid flowchart, Graphviz DOT, SVG
or a Mermaid sequence diagram (chapter 55).

FILE is ORBIT source (compiled first; errors are reported as by `orbit
check`, exit 1) or a compiled IR `.json` document. Which workflow: the one
named by --workflow, else the single one no other workflow of the file
starts. The drawing itself is `orbit_cli.graph` (model), `graph_text` and
`graph_svg` (formats); this module only selects and writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orbit_cli.output import CliError, err, os_reason
from orbit_core.ir import Definition


@click.command("graph", short_help="Render a workflow as a diagram (Mermaid, Graphviz DOT or SVG)")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--workflow", metavar="WORKFLOW", help="The workflow to render when the file defines several."
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["mermaid", "dot", "svg"]),
    default="mermaid",
    show_default=True,
    help="`mermaid` (flowchart), `dot` (Graphviz) or `svg` (laid out by orbit, no external tools).",
)
@click.option(
    "--sequence",
    is_flag=True,
    help="Render a Mermaid sequence diagram of the workflow's calls instead of the step graph.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Write to this file instead of stdout.",
)
def graph(
    file: Path, workflow: str | None, output_format: str, sequence: bool, output: Path | None
) -> None:
    """Render a workflow as a diagram (Mermaid, Graphviz DOT or SVG)."""
    if sequence and output_format != "mermaid":
        raise CliError(f"--sequence works only with --format mermaid, not --format {output_format}")
    definition = select(load_file(file), workflow, file)
    from orbit_cli import graph_svg, graph_text

    if sequence:
        text = graph_text.sequence(definition)
    elif output_format == "dot":
        text = graph_text.dot(definition)
    elif output_format == "svg":
        text = graph_svg.svg(definition)
    else:
        text = graph_text.mermaid(definition)
    write_output(text, output)


def load_file(file: Path) -> list[Definition]:
    """The workflows FILE declares, children first; compile errors exit 1."""
    if file.suffix == ".json":
        from orbit_cli.definitions import load_ir_file

        return [load_ir_file(file)]
    from orbit_cli.commands.check import report
    from orbit_lang import compile_paths
    from orbit_lang.render import render_report, should_color

    color = should_color(sys.stderr)
    result = compile_paths([file])
    if not result.ok:
        report(result, color=color)
        sys.exit(1)
    click.echo(render_report(result.diagnostics, result.sources, color=color), nl=False, err=True)
    own = [d for d in result.definitions if d.source_map.get("file") == str(file)]
    return own or list(result.definitions)


def select(definitions: list[Definition], name: str | None, file: Path) -> Definition:
    from orbit_cli.definitions import select_workflow

    return select_workflow(definitions, name, str(file), hint="; choose one with --workflow <NAME>")


def write_output(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {output}: {os_reason(exc)}") from None
    err(f"wrote {output}")


cli = graph
