"""`orbit help [COMMAND]...`: the same text as `orbit [COMMAND]... --help`.

The names are resolved through the groups themselves, so a mistyped name
gets the group's own "No such command ... Did you mean" error (exit 2), and
a group's subcommands are reached as `orbit help schedule create`.
"""

from __future__ import annotations

import click


@click.command(
    "help",
    context_settings={"ignore_unknown_options": False},
    short_help="Print this message or the help of the given subcommand(s)",
)
@click.argument("names", nargs=-1, metavar="[COMMAND]...")
@click.pass_context
def help_command(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Print this message or the help of the given subcommand(s)."""
    parent = ctx.parent
    assert parent is not None  # `help` only runs under the `orbit` group
    current_ctx = parent
    command = parent.command
    for name in names:
        if not isinstance(command, click.Group):
            current_ctx.fail(f"`{current_ctx.command_path}` has no subcommands")
        _, found, _ = command.resolve_command(current_ctx, [name])
        assert found is not None  # resolve_command fails on an unknown name
        current_ctx = click.Context(found, info_name=found.name, parent=current_ctx)
        command = found
    click.echo(command.get_help(current_ctx))


cli = help_command
