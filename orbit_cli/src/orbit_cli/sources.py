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
    """`--policy FILE`, repeatable; each command says in `help` what it will do
    with the policy.

    Policy checks (chapter 58) are not built yet. Accepting the option and
    ignoring it would let a policy pass that was never applied, so a run that
    names one stops with an error instead.
    """
    return click.option(
        "--policy",
        "policies",
        multiple=True,
        type=click.Path(path_type=Path),
        metavar="FILE",
        help=f"{help} Not supported yet.",
        callback=_refuse_policies,
        expose_value=False,
    )


def _refuse_policies(_ctx: click.Context, _param: click.Parameter, value: tuple[Path, ...]) -> None:
    if value:
        from orbit_lang.render import error_line, should_color

        message = "--policy: policy checks are not supported yet by this version of orbit"
        click.echo(error_line(message, color=should_color(sys.stderr)), nl=False, err=True)
        sys.exit(2)


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
