"""`orbit compile FILES -o DIR`: write one orbit-ir JSON document per workflow.

Each workflow goes to `<DIR>/<file stem>.orbit.json`, or to
`<DIR>/<file stem>.<Workflow>.orbit.json` when its file declares several;
`compiled Name@version -> path` is printed for each, children first. With
`--stdout` the documents are printed instead. Nothing is written when the
files do not compile (or, with --strict, when there is any warning).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import click

from orbit_cli.commands.check import report
from orbit_cli.output import CliError, err, os_reason, out, pretty_json
from orbit_cli.sources import policy_option, print_notices, stderr_colour
from orbit_core.ir import Definition, to_json
from orbit_lang import compile_paths
from orbit_lang.policy import Policy, apply_policies
from orbit_lang.render import render_report


@click.command("compile", short_help="Compile workflow files to orbit-ir JSON")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--strict",
    is_flag=True,
    help="Treat warnings as errors: with any warning, write nothing and exit 1.",
)
@click.option(
    "-o",
    "--out-dir",
    type=click.Path(path_type=Path),
    default=Path("build"),
    show_default=True,
    help="Output directory, created if needed.",
)
@click.option("--stdout", "to_stdout", is_flag=True, help="Print the IR instead of writing files.")
@policy_option("Check the workflows against an organisation policy first (repeatable).")
def compile_command(
    files: tuple[Path, ...],
    strict: bool,
    out_dir: Path,
    to_stdout: bool,
    policies: tuple[Policy, ...],
) -> None:
    """Compile workflow files to orbit-ir JSON."""
    color = stderr_colour(files)
    result, notices = apply_policies(compile_paths(list(files), strict=strict), policies)
    print_notices(notices)
    if not result.ok:
        report(result, color=color)
        sys.exit(1)
    # Only warnings are left here; they are shown, and do not stop compilation.
    click.echo(render_report(result.diagnostics, result.sources, color=color), nl=False, err=True)
    if not result.definitions:
        raise CliError("nothing to compile: no workflow declarations found")
    if to_stdout:
        for definition in result.definitions:
            out(pretty_json(to_json(definition)))
        return
    paths = output_paths(result.definitions, out_dir)
    for definition, path in zip(result.definitions, paths, strict=True):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(pretty_json(to_json(definition)) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {path}: {os_reason(exc)}") from None
        err(f"compiled {definition.name}@{definition.version} -> {path}")


def output_paths(definitions: list[Definition], out_dir: Path) -> list[Path]:
    """`<stem>.orbit.json`, or `<stem>.<Workflow>.orbit.json` when a file
    declares several workflows (or when two files share a stem)."""
    files = [str(d.source_map.get("file", d.name)) for d in definitions]
    stems = [Path(file).name.removesuffix(".orbit") for file in files]
    per_stem = Counter(stems)
    return [
        out_dir / f"{stem}.{definition.name}.orbit.json"
        if per_stem[stem] > 1
        else out_dir / f"{stem}.orbit.json"
        for definition, stem in zip(definitions, stems, strict=True)
    ]


cli = compile_command
