"""Helpers shared by the tests that run the book's examples through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_lang import ast
from orbit_lang.parser import parse_source

BOOK = Path(__file__).parent / "book"
SUPPORT = BOOK / "support"
CASES = BOOK / "cases"
MANIFEST: list[dict[str, Any]] = json.loads((BOOK / "manifest.json").read_text(encoding="utf-8"))
ENTRIES = {entry["id"]: entry for entry in MANIFEST}
CONTEXT: dict[str, dict[str, Any]] = json.loads(
    (SUPPORT / "context.json").read_text(encoding="utf-8")
)
FRAGMENT_GROUPS: list[dict[str, Any]] = json.loads(
    (SUPPORT / "fragments.json").read_text(encoding="utf-8")
)


def wrapped(entry: dict[str, Any]) -> str:
    """The example's text; fragments wrapped in a minimal workflow or step."""
    text: str = (BOOK / entry["source"]).read_text(encoding="utf-8")
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


def _member_key(member: object) -> tuple[str, str] | None:
    """What identifies a workflow member that a fragment may replace."""
    if isinstance(member, ast.Step | ast.Signal | ast.Query):
        return (type(member).__name__, member.name.name)
    if isinstance(member, ast.OutcomeHandler):
        return ("on", member.kind.name)
    if isinstance(member, ast.EventHandler):
        return ("on event", member.signal.name)
    if isinstance(member, ast.Limits | ast.Return | ast.ContinueAsNew):
        return (type(member).__name__, "")
    return None


def in_context(fragments: list[str], context: str, workflow: str) -> str:
    """`context` with each fragment's members put into `workflow`: a member
    replaces the one it names (a step of the same name, say), others are
    added at the end of the workflow."""
    for fragment in fragments:
        module, diagnostics = parse_source(context, "context.orbit")
        assert not diagnostics, diagnostics
        target = next(
            d
            for d in module.declarations
            if isinstance(d, ast.Workflow) and d.name.name == workflow
        )
        existing = {_member_key(m): m for m in target.members if _member_key(m) is not None}
        wrapped_text = f"workflow Fragment {{\n{fragment}}}\n"
        parsed, diagnostics = parse_source(wrapped_text, "fragment.orbit")
        assert not diagnostics, diagnostics
        (wrapper,) = parsed.declarations
        assert isinstance(wrapper, ast.Workflow)
        edits: list[tuple[int, int, str]] = []
        for member in wrapper.members:
            text = wrapped_text[member.span.start : member.span.end]
            replaced = existing.get(_member_key(member))
            if replaced is not None:
                edits.append((replaced.span.start, replaced.span.end, text))
            else:
                end = target.span.end - 1
                edits.append((end, end, f"\n    {text}\n"))
        for start, end, text in sorted(edits, reverse=True):
            context = context[:start] + text + context[end:]
    return context
