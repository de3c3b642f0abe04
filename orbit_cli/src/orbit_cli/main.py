"""Entry point of the `orbit` command."""

from __future__ import annotations

import click

from orbit_cli import __version__
from orbit_cli.lazy import LazyGroup
from orbit_lang.process import tune_for_compiling

COMMANDS = {
    name: f"orbit_cli.commands.{name}.cli"
    for name in (
        "init",
        "check",
        "validate",
        "compile",
        "fmt",
        "lsp",
        "graph",
        "docs",
        "schema",
        "diff",
        "compat",
        "server",
        "deploy",
        "run",
        "status",
        "inspect",
        "logs",
        "cancel",
        "signal",
        "query",
        "ps",
        "token",
        "workers",
        "test",
        "simulate",
        "replay",
        "schedule",
        # Beyond the book (issue 42): listed after the book's commands.
        "verify",
    )
}
# `help` comes last in the command list, as chapter 66 lists it.
COMMANDS["help"] = "orbit_cli.commands.help.cli"


@click.group(
    cls=LazyGroup,
    lazy_subcommands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(
    __version__, "-V", "--version", prog_name="orbit", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Compile, run and inspect ORBIT workflows."""


def main() -> None:
    # Once for the process, before any thread compiles (orbit_lang.process).
    tune_for_compiling()
    cli()
