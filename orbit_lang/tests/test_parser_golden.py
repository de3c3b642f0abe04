"""Golden tests: source files beside the exact output they must produce.

- `data/parser/err/<case>/`: the `.orbit` files at the top of the directory
  are loaded together (as `orbit check` would, from that directory);
  `expected.txt` holds the human report and `expected.json` the JSON one.
  Cases named `book_*` reproduce the book's examples (chapters 07, 12, 26, 69).
- `data/parser/ok/<name>.orbit`: must parse with no diagnostic; `<name>.ast`
  holds a dump of the syntax tree.

Run with UPDATE_GOLDEN=1 to rewrite the expected files, then review the diff.
A missing expected file fails the test unless UPDATE_GOLDEN is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from orbit_lang import ast
from orbit_lang.loader import load_program
from orbit_lang.parser import parse_file
from orbit_lang.render import render_json, render_report
from orbit_lang.source import Span

DATA = Path(__file__).parent / "data" / "parser"
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))

ERROR_CASES = sorted(p.name for p in (DATA / "err").iterdir() if p.is_dir())
OK_CASES = sorted(p.stem for p in (DATA / "ok").glob("*.orbit"))


def _compare(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"missing {path}; run with UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", ERROR_CASES)
def test_error_case_reports_exactly(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = DATA / "err" / case
    monkeypatch.chdir(directory)
    files = sorted(p.name for p in directory.glob("*.orbit"))
    program, diagnostics = load_program(files)
    assert diagnostics, "an error case must report something"
    _compare(directory / "expected.txt", render_report(diagnostics, program.sources))
    _compare(directory / "expected.json", render_json(diagnostics))


@pytest.mark.parametrize("case", OK_CASES)
def test_valid_case_parses_to_the_expected_tree(case: str) -> None:
    module, diagnostics = parse_file(DATA / "ok" / f"{case}.orbit")
    assert diagnostics == []
    _compare(DATA / "ok" / f"{case}.ast", "\n".join(dump(module)) + "\n")


_HIDDEN = {"span", "keyword", "operator_span", "key_span", "with_keyword", "when_keyword", "path"}


def _where(span: Span) -> str:
    return f"@{span.line}:{span.column}-{span.end_line}:{span.end_column}"


def dump(node: object, indent: str = "") -> list[str]:
    """A readable tree: one node per line, fields indented below it."""
    if isinstance(node, ast.Identifier):
        return [f"{indent}{node.name} {_where(node.span)}"]
    if isinstance(node, ast.StringLiteral):
        return [f"{indent}{node.value!r} {_where(node.span)}"]
    if isinstance(node, tuple):
        lines = [f"{indent}-" if not node else ""]
        for item in node:
            lines += dump(item, indent)
        return [line for line in lines if line]
    kind = type(node)
    if not attrs.has(kind):
        return [f"{indent}{node!r}"]
    span = getattr(node, "span", None)
    lines = [f"{indent}{type(node).__name__} {_where(span) if span else ''}".rstrip()]
    for field in attrs.fields(kind):
        if field.name in _HIDDEN:
            continue
        value = getattr(node, field.name)
        if value is None or value == ():
            continue
        child = dump(value, indent + "    ")
        if len(child) == 1:
            lines.append(f"{indent}  {field.name}: {child[0].strip()}")
        else:
            lines.append(f"{indent}  {field.name}:")
            lines += child
    return lines
