"""Golden tests for the checker's diagnostics.

data/check/err/<case>.orbit is compiled as a file of that name; the exact
human report (what `orbit check` prints on stderr) must equal
<case>.expected, and `--format json` must describe the same diagnostics.
data/check/ok/*.orbit must compile without any diagnostic. Run with
UPDATE_GOLDEN=1 to rewrite the expected files, then review the diff; a
missing expected file fails the test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orbit_lang import compile_source
from orbit_lang.render import render_json, render_report

DATA = Path(__file__).parent / "data" / "check"
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))
ERR = sorted((DATA / "err").glob("*.orbit"))
OK = sorted((DATA / "ok").glob("*.orbit"))


@pytest.mark.parametrize("path", ERR, ids=lambda p: p.stem)
def test_diagnostics(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(path.parent)
    result = compile_source(path.read_text(encoding="utf-8"), path.name)
    report = render_report(result.diagnostics, result.sources)
    expected = path.with_suffix(".expected")
    if UPDATE:
        expected.write_text(report, encoding="utf-8")
    assert expected.exists(), f"missing {expected.name}; run with UPDATE_GOLDEN=1"
    assert report == expected.read_text(encoding="utf-8")
    assert result.diagnostics, "an err case must report something"
    document = json.loads(render_json(result.diagnostics))["diagnostics"]
    assert [(d["code"], d["location"]["line"]) for d in document] == [
        (d.code, d.span.line if d.span else None) for d in result.diagnostics
    ]


@pytest.mark.parametrize("path", OK, ids=lambda p: p.stem)
def test_valid_program(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(path.parent)
    result = compile_source(path.read_text(encoding="utf-8"), path.name)
    assert [d.message for d in result.diagnostics] == []
    assert result.ok
