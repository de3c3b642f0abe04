"""The book's ORBIT examples, extracted by scripts/extract_book_examples.py.

- Every example meant to be valid parses with no diagnostic; fragments are
  wrapped in a minimal workflow (or workflow and step) first.
- Every example the book prints syntax-level diagnostics for (lexical E00xx,
  syntax E01xx, file loading E0206) is reproduced byte for byte by
  `orbit check`. Where the book mixes them with diagnostics of later phases
  (types, names: the checker's), our output is exactly the syntax-level part.
- Examples whose diagnostics all come from later phases must still parse
  cleanly. E0106 is one of those: chapter 31 lists it among the restrictions
  checked after parsing.

RULINGS §1 changed one example: chapter 26's `broken.orbit` starts a line with
`+`, which now continues the expression, so the file is valid. The same file
with `- input.b` still shows the book's three-error recovery.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from orbit_cli.main import cli
from orbit_lang.parser import parse_source

BOOK = Path(__file__).parent / "book"
MANIFEST = json.loads((BOOK / "manifest.json").read_text(encoding="utf-8"))
HEADER = re.compile(r"^(?:error|warning)\[([EWP]\d{4})\]")
BROKEN = "26-expressions:249"


def _syntax_level(code: str) -> bool:
    return code == "E0206" or (code.startswith(("E00", "E01")) and code != "E0106")


def _wrapped(entry: dict[str, str]) -> str:
    text = (BOOK / entry["source"]).read_text(encoding="utf-8")
    wrap = entry.get("wrap")
    if wrap == "workflow":
        return f"workflow Fragment {{\n{text}}}\n"
    if wrap == "step":
        return f"workflow Fragment {{\nstep fragment {{\n{text}}}\n}}\n"
    return text


def _blocks(output: str) -> list[str]:
    """The diagnostics of a compiler output, each with its trailing blank line."""
    blocks: list[str] = []
    for line in output.splitlines(keepends=True):
        if HEADER.match(line):
            blocks.append(line)
        elif blocks and not line.startswith(("error: ", "ok ")):
            blocks[-1] += line
    return [block if block.endswith("\n\n") else block + "\n" for block in blocks]


def _check(
    directory: Path, name: str, text: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """`orbit check <name>` run from `directory`, as the book runs it."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(directory)
    result = CliRunner().invoke(cli, ["check", name])
    return result.exit_code, result.stderr


VALID = [e for e in MANIFEST if e["kind"] != "template" and "expected" not in e]
WITH_OUTPUT = [e for e in MANIFEST if e["kind"] != "template" and "expected" in e]


@pytest.mark.parametrize("entry", VALID, ids=[e["id"] for e in VALID])
def test_valid_example_parses_without_diagnostics(entry: dict[str, str]) -> None:
    _, diagnostics = parse_source(_wrapped(entry), "example.orbit")
    assert diagnostics == []


@pytest.mark.parametrize("entry", WITH_OUTPUT, ids=[e["id"] for e in WITH_OUTPUT])
def test_example_reproduces_the_syntax_diagnostics_of_the_book(
    entry: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = (BOOK / entry["expected"]).read_text(encoding="utf-8")
    text = _wrapped(entry)
    book_blocks = _blocks(expected)
    syntax_blocks = [b for b in book_blocks if _syntax_level(HEADER.match(b).group(1))]  # type: ignore[union-attr]
    if entry["id"] == BROKEN:
        _, diagnostics = parse_source(text, entry["file"])
        assert diagnostics == [], "RULINGS §1: a line starting with `+` continues"
        return
    if not syntax_blocks:
        _, diagnostics = parse_source(text, entry.get("file", "example.orbit"))
        assert diagnostics == []
        return
    exit_code, stderr = _check(tmp_path, entry["file"], text, monkeypatch)
    assert exit_code == 1
    if len(syntax_blocks) == len(book_blocks):
        assert stderr == "".join(
            line for line in expected.splitlines(keepends=True) if not line.startswith("ok ")
        )
    else:
        assert _blocks(stderr) == syntax_blocks


def test_broken_example_with_a_leading_minus_recovers_as_the_book_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = next(e for e in MANIFEST if e["id"] == BROKEN)
    text = _wrapped(entry).replace("+ input.b", "- input.b")
    expected = (BOOK / entry["expected"]).read_text(encoding="utf-8")
    expected = expected.replace("+ input.b", "- input.b").replace("`+`", "`-`")
    exit_code, stderr = _check(tmp_path, entry["file"], text, monkeypatch)
    assert (exit_code, stderr) == (1, expected)


def test_the_extraction_found_the_examples_this_suite_relies_on() -> None:
    ids = {e["id"] for e in MANIFEST}
    assert {BROKEN, "07-files-and-imports:22", "12-steps:100"} <= ids
    assert len(VALID) > 150
