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
58's outputs are policy diagnostics and chapters 50 and 57 print `orbit
compat` and `orbit diff` reports: here those files must simply check
cleanly; their transcripts are golden tests in orbit_cli/tests
(test_cli_policy.py, test_cli_compat.py, test_cli_diff.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from bookkit import (
    BOOK,
    CONTEXT,
    ENTRIES,
    FRAGMENT_GROUPS,
    MANIFEST,
    SUPPORT,
    in_context,
    orbit,
    prepare,
    wrapped,
)

from orbit_lang.parser import parse_source

BROKEN = "26-expressions:249"
NOT_CHECK_OUTPUT = ("58-policies", "50-compatibility-checks")


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
    files = prepare(entry, tmp_path)
    checked = orbit(tmp_path, monkeypatch, "check", *files)
    assert checked.exit_code == 0, checked.stderr
    assert "error" not in checked.stderr
    assert checked.stdout.startswith("ok ")
    compiled = orbit(tmp_path, monkeypatch, "compile", "-o", "build", *files)
    if checked.stdout == "ok no workflows (contracts only)\n":
        assert compiled.exit_code == 1
        assert "nothing to compile" in compiled.stderr
    else:
        assert compiled.exit_code == 0, compiled.stderr
        assert compiled.stderr.count("compiled ") == checked.stdout.count("ok ")


@pytest.mark.parametrize("entry", FRAGMENTS, ids=lambda e: e["id"])
def test_fragment_parses_without_diagnostics(entry: dict[str, str]) -> None:
    _, diagnostics = parse_source(wrapped(entry), "example.orbit")
    assert diagnostics == []


@pytest.mark.parametrize("group", FRAGMENT_GROUPS, ids=lambda g: "+".join(g["fragments"]))
def test_fragments_check_in_the_workflow_they_belong_to(
    group: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(SUPPORT, tmp_path, dirs_exist_ok=True)
    context = group["context"]
    if isinstance(context, dict):
        name = "context.orbit"
        text = (BOOK / ENTRIES[context["example"]]["source"]).read_text(encoding="utf-8")
    else:
        name = context
        text = (SUPPORT / context).read_text(encoding="utf-8")
    fragments = [
        (BOOK / ENTRIES[f]["source"]).read_text(encoding="utf-8") for f in group["fragments"]
    ]
    (tmp_path / name).write_text(in_context(fragments, text, group["workflow"]), encoding="utf-8")
    result = orbit(tmp_path, monkeypatch, "check", *group.get("with", []), name)
    if "expect" in group:
        assert result.exit_code == 1
        assert f"error[{group['expect']}]" in result.stderr
        assert result.stderr.count("error[") == 1, result.stderr
    else:
        assert result.exit_code == 0, result.stderr
        assert "error" not in result.stderr


def test_every_fragment_is_checked_in_a_workflow() -> None:
    grouped = {f for g in FRAGMENT_GROUPS for f in g["fragments"]}
    assert {e["id"] for e in FRAGMENTS} <= grouped


@pytest.mark.parametrize("entry", WITH_OUTPUT, ids=lambda e: e["id"])
def test_example_reproduces_the_output_of_the_book(
    entry: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = (BOOK / entry["expected"]).read_text(encoding="utf-8")
    if entry["id"] == BROKEN:
        _, diagnostics = parse_source(wrapped(entry), entry["file"])
        assert diagnostics == [], "RULINGS §1: a line starting with `+` continues"
        return
    files = prepare(entry, tmp_path)
    result = orbit(tmp_path, monkeypatch, "check", *files)
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
    text = wrapped(entry).replace("+ input.b", "- input.b")
    expected = (BOOK / entry["expected"]).read_text(encoding="utf-8")
    expected = expected.replace("+ input.b", "- input.b").replace("`+`", "`-`")
    files = prepare(entry, tmp_path, text)
    result = orbit(tmp_path, monkeypatch, "check", *files)
    assert (result.exit_code, result.stderr) == (1, expected)


def test_the_extraction_found_the_examples_this_suite_relies_on() -> None:
    ids = {e["id"] for e in MANIFEST}
    assert {BROKEN, "07-files-and-imports:22", "12-steps:100"} <= ids
    assert len(VALID) > 100
    assert set(CONTEXT) <= ids
