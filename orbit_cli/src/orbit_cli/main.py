"""Entry point of the `orbit` command."""

from __future__ import annotations

import click

from orbit_cli import __version__
from orbit_cli.commands.check import check


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "-V", "--version", prog_name="orbit", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Compile, run and inspect ORBIT workflows."""


cli.add_command(check)


def main() -> None:
    cli()
