"""The book's ORBIT examples, extracted by scripts/extract_book_examples.py.

- Every example the book prints compiler output for is reproduced byte for
  byte by `orbit check`: the diagnostics on stderr and the `ok` lines on
  stdout.
- Every whole program meant to be valid checks `ok` and compiles. Examples
  that use contracts or files the book prints elsewhere get them from
  tests/book/support/ (context.json says which); a few are skipped with the
  reason written there.
- Fragments (members shown on their own) parse without diagnostics once
  wrapped in a minimal workflow or step.

RULINGS §1 changed one example: chapter 26's `broken.orbit` starts a line
with `+`, which now continues the expression, so the file is valid. The same
file with `- input.b` still shows the book's three-error recovery. Chapter
58's outputs are policy diagnostics (`--policy`, a later issue) and chapter
50's are `orbit compat` output: those files must simply check cleanly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_lang.parser import parse_source

BOOK = Path(__file__).parent / "book"
SUPPORT = BOOK / "support"
MANIFEST = json.loads((BOOK / "manifest.json").read_text(encoding="utf-8"))
CONTEXT = json.loads((SUPPORT / "context.json").read_text(encoding="utf-8"))
BROKEN = "26-expressions:249"
NOT_CHECK_OUTPUT = ("58-policies", "50-compatibility-checks")


def _wrapped(entry: dict[str, str]) -> str:
    text = (BOOK / entry["source"]).read_text(encoding="utf-8")
    wrap = entry.get("wrap")
    if wrap == "workflow":
        return f"workflow Fragment {{\n{text}}}\n"
    if wrap == "step":
        return f"workflow Fragment {{\nstep fragment {{\n{text}}}\n}}\n"
    return text


def _prepare(entry: dict[str, str], root: Path, text: str | None = None) -> list[str]:
    """Writes the example (and the support files) under `root`; returns the
    file names to pass to the CLI, relative to `root`."""
    shutil.copytree(SUPPORT, root, dirs_exist_ok=True)
    context = CONTEXT.get(entry["id"], {})
    name = entry.get("file") or context.get("file") or "example.orbit"
    if "dir" in context:
        name = f"{context['dir']}/{name}"
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_wrapped(entry) if text is None else text, encoding="utf-8")
    return [*context.get("with", []), name]


def _orbit(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(root)
    monkeypatch.setenv("NO_COLOR", "1")
    return CliRunner().invoke(cli, list(args))


def _split(expected: str) -> tuple[str, str]:
    """The book's output as (stderr, stdout): `ok` lines go to stdout."""
    lines = expected.splitlines(keepends=True)
    return (
        "".join(line for line in lines if not line.startswith("ok ")),
        "".join(line for line in lines if line.startswith("ok ")),
    )


VALID = [
    e
    for e in MANIFEST
    if e["kind"] == "program" and "expected" not in e and "skip" not in CONTEXT.get(e["id"], {})
]
FRAGMENTS = [e for e in MANIFEST if e["kind"] == "fragment"]
WITH_OUTPUT = [
    e
    for e in MANIFEST
    if e["kind"] != "template" and "expected" in e and not e["id"].startswith(NOT_CHECK_OUTPUT)
]
CLEAN_DESPITE_OUTPUT = [
    e for e in MANIFEST if "expected" in e and e["id"].startswith(NOT_CHECK_OUTPUT)
]


@pytest.mark.parametrize("entry", VALID + CLEAN_DESPITE_OUTPUT, ids=lambda e: e["id"])
def test_valid_example_checks_ok_and_compiles(
    entry: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _prepare(entry, tmp_path)
    checked = _orbit(tmp_path, monkeypatch, "check", *files)
    assert checked.exit_code == 0, checked.stderr
    assert "error" not in checked.stderr
    assert checked.stdout.startswith("ok ")
    compiled = _orbit(tmp_path, monkeypatch, "compile", "-o", "build", *files)
    if checked.stdout == "ok no workflows (contracts only)\n":
        assert compiled.exit_code == 1
        assert "nothing to compile" in compiled.stderr
    else:
        assert compiled.exit_code == 0, compiled.stderr
        assert compiled.stderr.count("compiled ") == checked.stdout.count("ok ")


@pytest.mark.parametrize("entry", FRAGMENTS, ids=lambda e: e["id"])
def test_fragment_parses_without_diagnostics(entry: dict[str, str]) -> None:
    _, diagnostics = parse_source(_wrapped(entry), "example.orbit")
    assert diagnostics == []


@pytest.mark.parametrize("entry", WITH_OUTPUT, ids=lambda e: e["id"])
def test_example_reproduces_the_output_of_the_book(
    entry: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = (BOOK / entry["expected"]).read_text(encoding="utf-8")
    if entry["id"] == BROKEN:
        _, diagnostics = parse_source(_wrapped(entry), entry["file"])
        assert diagnostics == [], "RULINGS §1: a line starting with `+` continues"
        return
    files = _prepare(entry, tmp_path)
    result = _orbit(tmp_path, monkeypatch, "check", *files)
    stderr, stdout = _split(expected)
    if not stdout and "error: " not in stderr:
        # The book shows the warnings alone, without the `ok` lines after them.
        assert result.stderr.rstrip("\n") == stderr.rstrip("\n")
        assert result.exit_code == 0
        return
    assert (result.stderr, result.stdout) == (stderr, stdout)
    assert result.exit_code == (1 if "error: " in stderr else 0)


def test_broken_example_with_a_leading_minus_recovers_as_the_book_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = next(e for e in MANIFEST if e["id"] == BROKEN)
    text = _wrapped(entry).replace("+ input.b", "- input.b")
    expected = (BOOK / entry["expected"]).read_text(encoding="utf-8")
    expected = expected.replace("+ input.b", "- input.b").replace("`+`", "`-`")
    files = _prepare(entry, tmp_path, text)
    result = _orbit(tmp_path, monkeypatch, "check", *files)
    assert (result.exit_code, result.stderr) == (1, expected)


def test_the_extraction_found_the_examples_this_suite_relies_on() -> None:
    ids = {e["id"] for e in MANIFEST}
    assert {BROKEN, "07-files-and-imports:22", "12-steps:100"} <= ids
    assert len(VALID) > 100
    assert set(CONTEXT) <= ids
