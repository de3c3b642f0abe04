"""`orbit fmt` over every whole program of the book (chapter 49's promises).

For each program, with the files it imports: `orbit fmt` rewrites the files,
after which they parse to the same syntax tree (spans aside), compile to
definitions with the same hashes, and `orbit fmt --check` finds nothing to
do. (orbit_lang/tests/test_format_properties.py formats messy copies of
the same programs.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from bookkit import CONTEXT, MANIFEST, orbit, prepare

from orbit_lang import compile_paths
from orbit_lang.parser import parse_source
from orbit_lang.source import Span

PROGRAMS = [
    e for e in MANIFEST if e["kind"] == "program" and "skip" not in CONTEXT.get(e["id"], {})
]


def shape(node: Any) -> Any:
    """A syntax tree as plain data without its spans."""
    if isinstance(node, Span):
        return None
    if attrs.has(type(node)):
        return (
            type(node).__name__,
            tuple(
                shape(getattr(node, f.name)) for f in attrs.fields(type(node)) if f.name != "span"
            ),
        )
    if isinstance(node, tuple | list):
        return tuple(shape(item) for item in node)
    if isinstance(node, dict):
        return tuple(sorted((k, shape(v)) for k, v in node.items()))
    return node


def _hashes(files: list[str]) -> list[tuple[str, str, str]]:
    result = compile_paths(files)
    return [(d.name, d.version, d.definition_hash) for d in result.definitions]


@pytest.mark.parametrize("entry", PROGRAMS, ids=lambda e: e["id"])
def test_fmt_keeps_every_book_program_the_same(
    entry: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = prepare(entry, tmp_path)
    monkeypatch.chdir(tmp_path)
    main = tmp_path / files[-1]
    original = main.read_text(encoding="utf-8")
    before = _hashes(files)
    tree, diagnostics = parse_source(original, files[-1])

    formatted = orbit(tmp_path, monkeypatch, "fmt", *files)
    assert formatted.exit_code == 0, formatted.stderr
    assert "error" not in formatted.stderr
    text = main.read_text(encoding="utf-8")
    new_tree, new_diagnostics = parse_source(text, files[-1])
    assert shape(new_tree) == shape(tree)
    assert [(d.code, d.message) for d in new_diagnostics] == [
        (d.code, d.message) for d in diagnostics
    ]
    assert _hashes(files) == before

    again = orbit(tmp_path, monkeypatch, "fmt", "--check", *files)
    assert (again.exit_code, again.stderr) == (0, "")
