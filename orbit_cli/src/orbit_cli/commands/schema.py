"""`orbit schema FILES...`: JSON Schema (draft 2020-12) for the payloads of
the workflows and task contracts the files declare (chapter 56).

Without --output, one JSON object mapping each name to its schema goes to
stdout; with it, `<DIR>/<name>.schema.json` per schema. --workflow keeps one
workflow and the task contracts it calls. The documents are built by
`orbit_cli.schemas`; `compile_reference` is shared with `orbit docs`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import click

from orbit_cli.output import CliError, err, os_reason, out, pretty_json
from orbit_cli.sources import expand_folders, stderr_colour
from orbit_core.ir import Definition


@attrs.frozen
class Reference:
    """A compiled set of files, with every task contract they declare."""

    definitions: list[Definition]
    declared: list[Any]  # orbit_lang.catalog.DeclaredContract
    # The parsed files (orbit_lang.ast.Module), for their doc comments.
    syntax: list[Any] = attrs.field(factory=list)


def compile_reference(files: tuple[str, ...]) -> Reference:
    """Compiles FILES (errors reported as by `orbit check`, exit 1; warnings
    printed, not fatal) and reads their task contracts."""
    from orbit_cli.commands.check import report
    from orbit_lang.catalog import declared_contracts
    from orbit_lang.compiler import compile_program
    from orbit_lang.loader import load_program
    from orbit_lang.render import render_report

    color = stderr_colour(files)
    program, diagnostics = load_program(expand_folders(files))
    result = compile_program(program, diagnostics)
    if not result.ok:
        report(result, color=color)
        sys.exit(1)
    click.echo(render_report(result.diagnostics, result.sources, color=color), nl=False, err=True)
    return Reference(list(result.definitions), declared_contracts(program), list(program.modules))


def select_definitions(reference: Reference, workflow: str | None) -> list[Definition]:
    if workflow is None:
        return reference.definitions
    for definition in reference.definitions:
        if definition.name == workflow:
            return [definition]
    available = ", ".join(d.name for d in reference.definitions) or "none"
    raise CliError(f"no workflow `{workflow}`; available: {available}")


def write_schemas(schemas: dict[str, Any], directory: Path) -> None:
    for name, schema in schemas.items():
        path = directory / f"{name}.schema.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(pretty_json(schema) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {path}: {os_reason(exc)}") from None


@click.command(
    "schema",
    short_help="Export JSON Schema (draft 2020-12) for workflow inputs, outputs, signals, queries and task contracts",
)
@click.argument("files", nargs=-1)
@click.option(
    "--workflow", metavar="WORKFLOW", help="Only this workflow (and the contracts it uses)."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Write one `<name>.schema.json` file per schema into this directory "
    "instead of printing a single JSON object.",
)
def schema(files: tuple[str, ...], workflow: str | None, output: Path | None) -> None:
    """Export JSON Schema (draft 2020-12) for workflow inputs, outputs, signals, queries and task contracts."""
    from orbit_cli.schemas import all_payloads

    reference = compile_reference(files)
    definitions = select_definitions(reference, workflow)
    declared = [] if workflow is not None else [d.contract for d in reference.declared]
    schemas = all_payloads(definitions, declared)
    if output is None:
        out(pretty_json(schemas))
        return
    write_schemas(schemas, output)
    err(f"wrote {len(schemas)} JSON Schema file(s) in {output}")


cli = schema
