"""Entry point of the `orbit` command.

Every failure starts with `error:` on stderr, as chapter 66 prints them:
click's own usage errors (an unknown flag, a missing argument) would print
`Error:` after the usage line, so `OrbitGroup.main` runs click without its
standalone handling and shows them in the book's layout: the error line,
the usage, where to read more; exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

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
        "schedule",
        "test",
        "simulate",
        "replay",
        # Beyond the book: typed workers from the contracts.
        "codegen",
        # Beyond the book (issue 42): listed after the book's commands.
        "verify",
        # Beyond the book (issue 41): versions in production.
        "versions",
        "migrate",
        # Beyond the book (issue 38): operator actions.
        "restart",
        "fork",
        # Beyond the book (issue 44).
        "plan",
        # Beyond the book (issue 38): operating executions.
        "pause",
        "resume",
    )
}
# `help` comes last in the command list, as chapter 66 lists it.
COMMANDS["help"] = "orbit_cli.commands.help.cli"


def usage_error_text(exc: click.UsageError) -> str:
    """`error: <message>`, then the usage and where to read more (no trailing newline)."""
    message = exc.format_message()
    # click capitalises its sentences ("No such option"); ours are lower case.
    if message[:2].istitle():
        message = message[0].lower() + message[1:]
    from orbit_lang.render import error_line, should_color

    lines = [error_line(message, color=should_color(sys.stderr)).rstrip("\n")]
    ctx = exc.ctx
    if ctx is not None:
        lines += ["", ctx.get_usage()]
        if ctx.command.get_help_option(ctx) is not None:
            lines += ["", f"For more information, try '{ctx.command_path} --help'."]
    return "\n".join(lines)


class OrbitGroup(LazyGroup):
    """The top-level group: click's standalone handling, but usage errors in our style."""

    # Issue 38's commands: `statsu` must still suggest only `status`, as the book shows.
    suggested_last = frozenset({"restart", "fork", "pause", "resume"})

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            click.echo(usage_error_text(exc), err=True)
            _exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            _exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            _exit(1)
        # Without standalone handling click returns the code of a `ctx.exit(n)`,
        # or the command's own return value (ours return None).
        _exit(result if isinstance(result, int) else 0)


def _exit(code: int) -> NoReturn:
    sys.exit(code)


@click.group(
    cls=OrbitGroup,
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
