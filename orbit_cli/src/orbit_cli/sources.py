"""What the commands that read ORBIT source files (check, compile, validate,
deploy) share: the `--policy` option and the empty FILES check."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sized
from pathlib import Path
from typing import Any, TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., Any])


def policy_option(help: str) -> Callable[[_F], _F]:
    """`--policy FILE`, repeatable, into the `policies` parameter; each command says
    in `help` what it does with the policy."""
    return click.option(
        "--policy",
        "policies",
        multiple=True,
        type=click.Path(path_type=Path),
        metavar="FILE",
        help=help,
    )


def stderr_colour(files: Sized) -> bool:
    """Whether stderr gets colour; with no FILES, `error: no input files` and exit 1."""
    # Imported here: `orbit deploy` uses only `policy_option` and loads the
    # compiler only once it has sources to compile.
    from orbit_lang.render import error_line, should_color

    color = should_color(sys.stderr)
    if not files:
        click.echo(error_line("no input files", color=color), nl=False, err=True)
        sys.exit(1)
    return color
