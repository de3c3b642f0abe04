"""`orbit codegen --lang LANG FILES... -o DIR`: typed worker and client code
for every task contract (and every workflow's input, output, signals and
queries) the files declare. See docs/workers/typed-workers.md.

Exit codes follow chapter 66: 0 written (or, with --check, current), 1
compilation errors or, with --check, a file in DIR that is missing or
differs, 2 a usage error. `--json` prints what was written or found stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from orbit_cli.codegen import LANGUAGES
from orbit_cli.output import CliError, err, os_reason, out


def _default_package(lang: str, files: tuple[str, ...]) -> str:
    stem = Path(files[0]).stem if files else "contracts"
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in stem) or "contracts"
    if stem[0].isdigit():
        stem = "_" + stem
    return stem.lower() if lang != "typescript" else stem


@click.command(
    "codegen",
    short_help="Generate typed worker and client code from task contracts",
)
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--lang",
    required=True,
    type=click.Choice(LANGUAGES),
    help="The language to generate.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Directory to write the generated files into.",
)
@click.option(
    "--package",
    metavar="NAME",
    help="Module, package or namespace name (default: the first file's name).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if DIR is not up to date.")
@click.option("--json", "as_json", is_flag=True, help="Print the files as JSON.")
def codegen(  # noqa: PLR0917 - click passes every option
    files: tuple[str, ...],
    lang: str,
    output: Path,
    package: str | None,
    check: bool,
    as_json: bool,
) -> None:
    """Generate typed worker and client code for the task contracts and workflows in FILES."""
    from orbit_cli.codegen import renderer
    from orbit_cli.codegen.formatting import format_files
    from orbit_cli.codegen.model import build
    from orbit_cli.commands.schema import compile_reference

    reference = compile_reference(files)
    name = package or _default_package(lang, files)
    module = build(
        tuple(files),
        [d.contract for d in reference.declared],
        reference.definitions,
        reference.syntax,
    )
    generated = format_files(lang, renderer(lang)(module, name))
    stale: list[str] = []
    for relative, text in sorted(generated.items()):
        path = output / relative
        if check:
            try:
                current = path.read_text(encoding="utf-8")
            except OSError:
                current = None
            if current != text:
                stale.append(str(path))
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {path}: {os_reason(exc)}") from None
    written = [str(output / relative) for relative in sorted(generated)]
    if as_json:
        document = {
            "lang": lang,
            "files": written,
            "contracts": [
                {"task_name": c.task, "contract_version": c.version, "contract_hash": c.hash}
                for c in module.contracts
            ],
        }
        if check:
            document["stale"] = stale
        out(json.dumps(document, indent=2))
    if check:
        if stale:
            for name in stale:
                err(f"stale: {name} (run `orbit codegen` again)")
            sys.exit(1)
        if not as_json:
            err(f"{len(written)} generated file(s) up to date in {output}")
        return
    if not as_json:
        err(f"wrote {len(written)} file(s) for {len(module.contracts)} contract(s) in {output}")


cli = codegen
