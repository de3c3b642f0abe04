"""Every diagnostic the book renders is reproduced by `orbit check`.

Each block in tests/book/diagnostics/ (extracted from the book) is produced
byte for byte, by one of the book's examples or, when the book prints the
diagnostic without a whole program, by a source reconstructed around the
lines it quotes (tests/book/cases/, mapped in cases/index.json); an entry
with a `policy` checks the case with `--policy` (the P-codes other chapters
print). Chapter 58's own transcripts are pinned by
orbit_cli/tests/test_cli_policy.py, with the policy files they need.

Each reconstructed case also has its complete output pinned in
`expected.txt` (UPDATE_GOLDEN=1 rewrites it), and cases with a `book.json`
reproduce the book's `--format json` output.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from bookkit import BOOK, CASES, ENTRIES, orbit, prepare
from click.testing import Result

UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))
INDEX: dict[str, dict[str, Any]] = json.loads((CASES / "index.json").read_text(encoding="utf-8"))
BLOCKS = sorted(
    path for path in (BOOK / "diagnostics").glob("*.txt") if not path.stem.startswith("58-policies")
)
CASE_DIRS = sorted(path for path in CASES.iterdir() if path.is_dir())


def _run_case(
    case: Path, where: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str
) -> Result:
    shutil.copytree(case, tmp_path, dirs_exist_ok=True)
    if "policy" in where:
        flags = ("--policy", where["policy"], *flags)
    return orbit(tmp_path, monkeypatch, "check", *flags, where["check"])


def _entry(case: Path) -> dict[str, Any]:
    for entry in INDEX.values():
        if entry.get("case") == case.name:
            return entry
    raise AssertionError(f"{case.name} is not in index.json")


@pytest.mark.parametrize("path", BLOCKS, ids=lambda p: p.stem)
def test_book_diagnostic_is_reproduced(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = INDEX.get(path.stem)
    assert where is not None, f"{path.stem} has no source in tests/book/cases/index.json"
    if "skip" in where:
        pytest.skip(where["skip"])
    flags = ["--strict"] if where.get("strict") else []
    if "example" in where:
        files = prepare(ENTRIES[where["example"]], tmp_path)
        result = orbit(tmp_path, monkeypatch, "check", *flags, *files)
    else:
        result = _run_case(CASES / where["case"], where, tmp_path, monkeypatch, *flags)
    block = path.read_text(encoding="utf-8")
    if block.count("\n") == 1:
        # The book quotes only the first line of this one.
        assert block in result.stderr
    else:
        assert block + "\n" in result.stderr, result.stderr
    assert result.exit_code == 1 or block.startswith("warning")


@pytest.mark.parametrize("case", CASE_DIRS, ids=lambda p: p.name)
def test_reconstructed_case_output_is_pinned(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run_case(case, _entry(case), tmp_path, monkeypatch)
    expected = case / "expected.txt"
    if UPDATE:
        expected.write_text(result.stderr + result.stdout, encoding="utf-8")
    assert result.stderr + result.stdout == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "case", [c for c in CASE_DIRS if (c / "book.json").exists()], ids=lambda p: p.name
)
def test_json_output_of_the_book(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run_case(case, _entry(case), tmp_path, monkeypatch, "--format", "json")
    assert (result.exit_code, result.stderr) == (1, "")
    assert result.stdout == (case / "book.json").read_text(encoding="utf-8")


def test_every_case_and_block_is_indexed() -> None:
    assert {p.stem for p in BLOCKS} <= set(INDEX)
    used = {entry.get("case") for entry in INDEX.values()}
    assert {case.name for case in CASE_DIRS} <= used
