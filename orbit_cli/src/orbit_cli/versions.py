"""The two sides `orbit diff` and `orbit compat` compare, loaded from files.

Each side is one `.orbit` file (compiled with its imports, as `orbit check`
would) or one compiled IR `.json` file. Both commands answer a side that
cannot be loaded with exit status 2 (chapter 66), so `load_side` prints the
compiler's diagnostics, or `error: <why>`, and raises `BadInput`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orbit_cli.output import CliError
from orbit_lang.compat import Side, task_contracts


class BadInput(click.ClickException):
    """A side that cannot be read, is not valid IR or does not compile: exit 2."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        from orbit_lang.render import error_line, should_color

        click.echo(
            error_line(self.format_message(), color=should_color(sys.stderr)),
            nl=False,
            err=True,
        )


def load_side(name: str) -> Side:
    path = Path(name)
    if path.suffix == ".json":
        from orbit_cli.definitions import load_ir_file

        try:
            definition = load_ir_file(path)
        except CliError as exc:
            raise BadInput(exc.format_message()) from None
        return Side((definition,), task_contracts([definition]), declares_all=False)
    return _compile(path)


def _compile(path: Path) -> Side:
    from orbit_lang.catalog import declared_contracts
    from orbit_lang.compiler import compile_program
    from orbit_lang.loader import load_program
    from orbit_lang.render import render_report, should_color

    if not path.is_file():
        reason = "No such file or directory (os error 2)" if not path.exists() else "not a file"
        raise BadInput(f"cannot read {path}: {reason}")
    program, diagnostics = load_program([path])
    result = compile_program(program, diagnostics)
    color = should_color(sys.stderr)
    # The summary line of a failed compilation is printed by the report.
    click.echo(render_report(result.diagnostics, result.sources, color=color), nl=False, err=True)
    if not result.ok:
        sys.exit(2)
    declared = [d.contract for d in declared_contracts(program)]
    return Side(tuple(result.definitions), task_contracts(result.definitions, declared))
