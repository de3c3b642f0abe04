"""Helpers shared by the tests that run the book's examples through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli

BOOK = Path(__file__).parent / "book"
SUPPORT = BOOK / "support"
CASES = BOOK / "cases"
MANIFEST: list[dict[str, Any]] = json.loads((BOOK / "manifest.json").read_text(encoding="utf-8"))
ENTRIES = {entry["id"]: entry for entry in MANIFEST}
CONTEXT: dict[str, dict[str, Any]] = json.loads(
    (SUPPORT / "context.json").read_text(encoding="utf-8")
)


def wrapped(entry: dict[str, Any]) -> str:
    """The example's text; fragments wrapped in a minimal workflow or step."""
    text = (BOOK / entry["source"]).read_text(encoding="utf-8")
    wrap = entry.get("wrap")
    if wrap == "workflow":
        return f"workflow Fragment {{\n{text}}}\n"
    if wrap == "step":
        return f"workflow Fragment {{\nstep fragment {{\n{text}}}\n}}\n"
    return text


def prepare(entry: dict[str, Any], root: Path, text: str | None = None) -> list[str]:
    """Writes the example (and the support files) under `root`; returns the
    file names to pass to the CLI, relative to `root`."""
    shutil.copytree(SUPPORT, root, dirs_exist_ok=True)
    context = CONTEXT.get(entry["id"], {})
    name = entry.get("file") or context.get("file") or "example.orbit"
    if "dir" in context:
        name = f"{context['dir']}/{name}"
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(wrapped(entry) if text is None else text, encoding="utf-8")
    return [*context.get("with", []), name]


def orbit(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    """`orbit ARGS` run from `root`, without colour."""
    monkeypatch.chdir(root)
    monkeypatch.setenv("NO_COLOR", "1")
    return CliRunner().invoke(cli, list(args))
