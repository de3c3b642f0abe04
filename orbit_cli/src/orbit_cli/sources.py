"""What the commands that read ORBIT source files (check, compile, validate,
deploy) share: the `--policy` option (chapter 58, loaded here and checked by
`orbit_lang.policy`), the empty FILES check, and folders
given as FILES (`orbit check workflows/`), which stand for the `.orbit` files
below them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sized
from pathlib import Path
from typing import Any, TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., Any])


def policy_option(help: str) -> Callable[[_F], _F]:
    """`--policy FILE`, repeatable; each command says in `help` what it will do
    with the policy. The command receives `policies`: the loaded
    `orbit_lang.policy.Policy` values. A file that cannot be loaded stops the
    command with `error: policy <file>: ...` and exit 1 before anything is
    compiled or sent."""
    return click.option(
        "--policy",
        "policies",
        multiple=True,
        type=click.Path(path_type=Path),
        metavar="FILE",
        help=help,
        callback=_load_policies,
    )


def _load_policies(
    _ctx: click.Context, _param: click.Parameter, value: tuple[Path, ...]
) -> tuple[Any, ...]:
    if not value:
        return ()
    from orbit_lang.policy import PolicyError, load_policy
    from orbit_lang.render import error_line, should_color

    try:
        return tuple(load_policy(path) for path in value)
    except PolicyError as exc:
        click.echo(error_line(str(exc), color=should_color(sys.stderr)), nl=False, err=True)
        sys.exit(1)


def print_notices(lines: Iterable[str]) -> None:
    """Policy warnings that are not diagnostics (exemptions that matched nothing)."""
    for line in lines:
        click.echo(f"warning: {line}", err=True)


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


# Folders a project keeps tools and dependencies in, never its workflows.
_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})


def expand_folders(files: tuple[str, ...]) -> list[Path]:
    """FILES with each folder replaced by the `.orbit` files below it (sorted,
    hidden folders and node_modules skipped); a folder with none is an error."""
    paths: list[Path] = []
    for name in files:
        path = Path(name)
        if not path.is_dir():
            paths.append(path)
            continue
        found = sorted(
            p
            for p in path.rglob("*.orbit")
            if p.is_file()
            and not any(
                part.startswith(".") or part in _SKIPPED_DIRS
                for part in p.relative_to(path).parts[:-1]
            )
        )
        if not found:
            from orbit_lang.render import error_line, should_color

            message = f"no .orbit files in folder `{name}`"
            click.echo(error_line(message, color=should_color(sys.stderr)), nl=False, err=True)
            sys.exit(1)
        paths.extend(found)
    return paths
