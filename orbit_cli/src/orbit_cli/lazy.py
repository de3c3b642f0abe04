"""A click group that imports a command's module only when it is used.

`orbit --version` and `orbit <command>` then load one command module, not
all of them (click's documented LazyGroup pattern). A mistyped command name
gets the closest names as "did you mean" (click offers that for options only).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from typing import Any

import click


class LazyGroup(click.Group):
    def __init__(self, *args: Any, lazy_subcommands: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # name -> "package.module.attribute"
        self.lazy_subcommands = lazy_subcommands

    # Commands a mistyped name is matched against only after all others.
    suggested_last: frozenset[str] = frozenset()

    def list_commands(self, ctx: click.Context) -> list[str]:
        available = [n for n, target in self.lazy_subcommands.items() if _exists(target)]
        return [*super().list_commands(ctx), *available]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_subcommands.get(cmd_name)
        if target is not None and _exists(target):
            return _load(target)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if args and self.get_command(ctx, name) is None and not name.startswith("-"):
            names = self.list_commands(ctx)
            # Later commands are suggested only when no earlier one is close,
            # so a typo of a book command keeps the book's suggestion.
            usual = [n for n in names if n not in self.suggested_last]
            close = difflib.get_close_matches(name, usual, n=3, cutoff=0.6)
            if not close:
                close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
            if close:
                quoted = ", ".join(f"'{c}'" for c in close)
                ctx.fail(f"No such command '{name}'. Did you mean {quoted}?")
        return super().resolve_command(ctx, args)


def _exists(target: str) -> bool:
    # Commands owned by other parts of the code base may not be installed yet.
    module = target.rpartition(".")[0]
    return importlib.util.find_spec(module) is not None


def _load(target: str) -> click.Command:
    module_name, _, attribute = target.rpartition(".")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command
