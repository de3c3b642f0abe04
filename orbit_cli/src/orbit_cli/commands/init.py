"""`orbit init`: a new project with the quick start's workflow and two workers."""

from __future__ import annotations

import json
import os
from importlib.resources import files
from pathlib import Path

import click

from orbit_cli import sdk_sources
from orbit_cli.output import CliError, os_reason, out

# (template file, path in the project), in the order the files are reported.
TEMPLATE = (
    ("package.json", "workers/typescript/package.json"),
    ("requirements.txt", "workers/python/requirements.txt"),
    ("gitignore", ".gitignore"),
    ("hello.orbit", "workflows/hello.orbit"),
    ("worker.py.tmpl", "workers/python/worker.py"),
    ("worker.ts", "workers/typescript/worker.ts"),
    ("README.md", "README.md"),
)


@click.command("init", short_help="Create a project with a sample workflow and workers.")
@click.argument("name")
def cli(name: str) -> None:
    """Create the directory NAME holding a small two-language project: a
    workflow with its task contracts, a Python worker and a TypeScript worker
    that serve them, and the files that install their SDKs. NAME must not
    exist yet, or be an empty directory.
    """
    root = Path(name)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise CliError(f"{name} already exists and is not empty")
    folder = sdk_sources.sdk_folder()
    if os.environ.get(sdk_sources.ENV, "").strip() and not folder.is_dir():
        raise CliError(f"{sdk_sources.ENV}: {folder} is not a directory")
    sdks = sdk_sources.find(folder)
    source = files("orbit_cli").joinpath("templates", "hello")
    for template, relative in TEMPLATE:
        target = root / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            text = source.joinpath(template).read_text(encoding="utf-8")
            target.write_text(_with_sdks(template, text, sdks), "utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {target}: {os_reason(exc)}") from None
        out(f"  created {name.rstrip('/')}/{relative}")
    out()
    out(f"Next: cd {name} && orbit check workflows/hello.orbit")


def _with_sdks(template: str, text: str, sdks: sdk_sources.SdkSources) -> str:
    """The template with its SDK requirement pointed where `sdks` says."""
    if template == "requirements.txt":
        return sdks.requirements_txt()
    if template == "package.json" and sdks.typescript_tarball is not None:
        package = json.loads(text)
        package["dependencies"]["orbit-lang"] = sdks.typescript_dependency()
        return json.dumps(package, indent=2) + "\n"
    return text
