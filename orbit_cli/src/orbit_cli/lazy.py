"""A click group that imports a command's module only when it is used.

`orbit --version` and `orbit <command>` then load one command module, not
all of them (click's documented LazyGroup pattern).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import click


class LazyGroup(click.Group):
    def __init__(self, *args: Any, lazy_subcommands: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # name -> "package.module.attribute"
        self.lazy_subcommands = lazy_subcommands

    def list_commands(self, ctx: click.Context) -> list[str]:
        available = [n for n, target in self.lazy_subcommands.items() if _exists(target)]
        return [*super().list_commands(ctx), *available]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_subcommands.get(cmd_name)
        if target is not None and _exists(target):
            return _load(target)
        return super().get_command(ctx, cmd_name)


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
