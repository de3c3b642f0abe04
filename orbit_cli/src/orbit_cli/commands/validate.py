"""`orbit validate FILES...`: validate compiled IR and check ORBIT sources.

A `.json` file is read as an IR document, validated, and its
`definition_hash` recomputed: `ok <path> is valid orbit-ir/1 (Name@v,
sha256:...)`, or an error naming the file. The other files are checked
together as with `orbit check`. Exit 0 when every file is valid, 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orbit_cli.commands.check import report
from orbit_cli.definitions import load_ir_file
from orbit_cli.output import CliError, err, out
from orbit_cli.sources import stderr_colour
from orbit_core.ir import IR_V1, needs_ir_v2
from orbit_lang import check_paths


@click.command(
    "validate", short_help="Check workflow files, and validate compiled IR (.json) files"
)
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
def validate(files: tuple[Path, ...]) -> None:
    """Check workflow files, and validate compiled IR (.json) files."""
    color = stderr_colour(files)
    valid = True
    for path in files:
        if path.suffix == ".json":
            valid = _validate_ir(path) and valid
    sources = [path for path in files if path.suffix != ".json"]
    if sources:
        result = check_paths(sources)
        report(result, color=color)
        valid = result.ok and valid
    sys.exit(0 if valid else 1)


def _validate_ir(path: Path) -> bool:
    try:
        definition = load_ir_file(path)
    except CliError as error:
        err(f"error: {error.format_message()}")
        return False
    if definition.ir_version == IR_V1 and needs_ir_v2(definition):
        err(f"error: {path}: an `orbit-ir/1` document cannot use `orbit-ir/2` features")
        return False
    out(
        f"ok {path} is valid {definition.ir_version} "
        f"({definition.name}@{definition.version}, {definition.definition_hash})"
    )
    return True


cli = validate
