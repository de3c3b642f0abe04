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


def require_drained(client: RuntimeClient, definitions: Sequence[Definition], version: str) -> None:
    """Refuses the whole deploy while `version` of any workflow deployed has
    live executions. Deploying never unregisters a version, so this is a
    gate on the deploy itself: it checks every workflow before registering
    any, and registers nothing when one is not drained."""
    from orbit_cli.drain import census, live_of
    from orbit_core.semver import semver_key

    newest: dict[str, Definition] = {}
    for defn in definitions:
        known = newest.get(defn.name)
        if known is None or semver_key(defn.version) > semver_key(known.version):
            newest[defn.name] = defn
    for name, defn in sorted(newest.items()):
        live = live_of(census(client, name), version)
        if live:
            raise CliError(
                f"{name}@{version} has {live} live execution(s), so it is not drained; "
                f"nothing was deployed (--require-drained {version}). Move them with "
                f"`orbit migrate plan {name} --from {version} --to {defn.version}` "
                f"or wait until `orbit versions {name}` says drained"
            )


@click.command(
    "deploy",
    short_help="Compile and register workflow definitions with the runtime",
)
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@policy_option(
    "Check .orbit sources against this organisation policy before registering (repeatable)."
)
@click.option(
    "--require-drained",
    "drained_version",
    metavar="VERSION",
    help="Deploy nothing unless VERSION of each workflow in FILES has no live execution "
    "(as `orbit versions` counts them).",
)
@connection_options
def cli(
    client: RuntimeClient,
    files: tuple[Path, ...],
    policies: tuple[Any, ...],
    drained_version: str | None,
) -> None:
    """Register the workflows in FILES with the runtime.

    FILES are ORBIT sources (compiled first) or compiled IR (.json). Child
    workflows are registered before the workflows that start them. Each
    definition is reported as `deployed` when the runtime did not know it and
    `up to date` when the same content was already registered; a changed
    definition under an existing version is refused (DEFINITION_CONFLICT),
    except by a server started with --dev, which replaces it while no
    unfinished execution uses it and says `replaced`.

    With --require-drained VERSION the deploy is refused (exit 1, nothing
    registered) while VERSION of one of the workflows still has live
    executions; deploying never removes a version, so this only guards
    a pipeline that retires VERSION's workers after the deploy.
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
    definitions = load_definitions(list(files), policies=policies)
    if drained_version is not None:
        require_drained(client, definitions, drained_version)
    register(client, definitions)
