"""`orbit docs FILES... -o DIR`: reference pages for the workflows and task
contracts the files declare (chapter 56): `index`, one page per workflow and
`contracts`, as Markdown (default) or self-contained HTML, and with
--json-schema the schemas of `orbit schema` in `DIR/schemas`, linked from the
workflow pages. Nothing is written when the files do not compile. The pages
themselves are built by `orbit_cli.docpages`.
"""

from __future__ import annotations

from pathlib import Path

import click

from orbit_cli.commands.schema import compile_reference, write_schemas
from orbit_cli.output import CliError, err, os_reason


@click.command(
    "docs",
    short_help="Generate reference documentation for workflows and task contracts",
)
@click.argument("files", nargs=-1)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    metavar="DIR",
    required=True,
    help="Output directory: one page per workflow, `contracts` and `index`.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["markdown", "html"]),
    default="markdown",
    show_default=True,
    help="`markdown` or `html` (one self-contained file per page).",
)
@click.option(
    "--json-schema",
    is_flag=True,
    help="Also write JSON Schema files to `<DIR>/schemas` and link them from the pages.",
)
@click.option(
    "--envelope",
    is_flag=True,
    help="Also show each workflow's resource envelope (events, commits, dispatches, bytes).",
)
def docs(
    files: tuple[str, ...], output: Path, output_format: str, json_schema: bool, envelope: bool
) -> None:
    """Generate reference documentation for workflows and task contracts."""
    from orbit_cli import docpages
    from orbit_cli.schemas import all_payloads, workflow_payloads

    reference = compile_reference(files)
    ext = "md" if output_format == "markdown" else "html"
    links = None
    if json_schema:
        links = {
            d.name: [(p.label, f"{p.name}.schema.json") for p in workflow_payloads(d)]
            for d in reference.definitions
        }
    contracts = docpages.contracts_for(reference.definitions, reference.declared)
    builder = docpages.Builder(reference.definitions, contracts, ext, links, envelope)
    pages = [
        builder.index_page(),
        *(builder.workflow_page(d) for d in reference.definitions),
        builder.contracts_page(),
    ]
    render = docpages.to_markdown if ext == "md" else docpages.to_html
    for page in pages:
        path = output / f"{page.name}.{ext}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(page), encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {path}: {os_reason(exc)}") from None
        err(f"wrote {path}")
    if json_schema:
        declared = [d.contract for d in reference.declared]
        schemas = all_payloads(reference.definitions, declared)
        write_schemas(schemas, output / "schemas")
        err(f"wrote {len(schemas)} JSON Schema file(s) in {output / 'schemas'}")


cli = docs
