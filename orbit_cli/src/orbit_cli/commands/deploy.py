"""`orbit deploy`: register workflow definitions with the runtime."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orbit_cli.client import RuntimeClient, connection_options
from orbit_cli.output import CliError, err
from orbit_cli.sources import policy_option

if TYPE_CHECKING:
    from orbit_core.ir import Definition


def register(client: RuntimeClient, definitions: Sequence[Definition]) -> None:
    """POSTs each definition (children first) and reports `deployed`, `up to
    date`, or (from a development server) `replaced`."""
    from orbit_core.ir import to_json

    for defn in definitions:
        answer = client.post("/v1/workflows", to_json(defn))
        short = defn.definition_hash.removeprefix("sha256:")[:12]
        if answer.get("replaced"):
            err(
                f"replaced {defn.name}@{defn.version} (sha256:{short}): the development server "
                "swapped the definition of this version, which no unfinished execution used"
            )
            continue
        verb = "deployed" if answer.get("created") else "up to date"
        err(f"{verb} {defn.name}@{defn.version} (sha256:{short})")


@click.command(
    "deploy",
    short_help="Register workflow definitions with the runtime.",
)
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@policy_option(
    "Check .orbit sources against this organisation policy before registering (repeatable)."
)
@connection_options
def cli(client: RuntimeClient, files: tuple[Path, ...], policies: tuple[Any, ...]) -> None:
    """Register the workflows in FILES with the runtime.

    FILES are ORBIT sources (compiled first) or compiled IR (.json). Child
    workflows are registered before the workflows that start them. Each
    definition is reported as `deployed` when the runtime did not know it and
    `up to date` when the same content was already registered; a changed
    definition under an existing version is refused (DEFINITION_CONFLICT),
    except by a server started with --dev, which replaces it while no
    unfinished execution uses it and says `replaced`.
    """
    if not files:
        return
    # The IR codec is heavy; load it only when there is something to deploy.
    from orbit_cli.definitions import load_definitions

    compiled = [f for f in files if f.suffix == ".json"]
    if policies and compiled:
        raise CliError(
            f"--policy needs .orbit sources, and {compiled[0]} is compiled IR: "
            "violations and waivers are located in the source"
        )
    register(client, load_definitions(list(files), policies=policies))
