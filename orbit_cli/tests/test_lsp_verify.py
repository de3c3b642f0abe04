"""Verify on save in `orbit lsp` (orbit_cli.lsp.verifying), driven by a real
LSP client: a seeded bug of examples/verify/bugs gets an error on its
invariant when the setting is on, nothing when it is off, and its fix gets
nothing.

A search runs on the server's verify thread, one after another in the
order of the saves, so "nothing was published for A" is known once the
result of a later save of B has arrived.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsp_client import Session, run
from lsprotocol import types as lsp

from orbit_cli.lsp.verifying import Settings, read_settings

ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "examples" / "verify" / "bugs"
BUG = "04-ship-before-charge"
INVARIANT = "invariant step charge SUCCEEDED when step ship SUCCEEDED"
ON = {"orbit": {"verify": {"onSave": True}}}

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def bugs(tmp_path: Path) -> Path:
    """The seeded bug, a copy of it, and its fix, beside their tasks."""
    shutil.copy(BUGS / "tasks.orbit", tmp_path / "tasks.orbit")
    shutil.copy(BUGS / f"{BUG}.orbit", tmp_path / "bug.orbit")
    shutil.copy(BUGS / f"{BUG}.orbit", tmp_path / "other.orbit")
    shutil.copy(BUGS / f"{BUG}.fixed.orbit", tmp_path / "fixed.orbit")
    return tmp_path


def _violations(found: list[lsp.Diagnostic]) -> list[lsp.Diagnostic]:
    return [d for d in found if d.code == "E0910"]


async def _saved_with_violation(s: Session, path: Path) -> list[lsp.Diagnostic]:
    """Opens and saves `path`; its diagnostics once the violation is shown."""
    target = s.open(path)
    await s.wait_diagnostics(target)
    s.save(target)
    found = await s.wait_diagnostics(target, lambda d: bool(_violations(d)))
    return _violations(found)


def test_a_broken_invariant_is_an_error_on_its_line_after_save(bugs: Path) -> None:
    text = (bugs / "bug.orbit").read_text()
    line = text.splitlines().index(f"    {INVARIANT}")

    async def check(s: Session) -> None:
        [found] = await _saved_with_violation(s, bugs / "bug.orbit")
        assert found.severity == lsp.DiagnosticSeverity.Error
        assert found.source == "orbit"
        assert found.range.start.line == line
        assert found.range.start.character == 4
        first = found.message.splitlines()[0]
        assert first.startswith('verify "orders never ship unpaid": invariant violated: ')
        assert "step charge SUCCEEDED when step ship SUCCEEDED" in first
        history = bugs / ".orbit" / "verify" / "orders-never-ship-unpaid.history.json"
        assert "counterexample (" in found.message and str(history) in found.message
        assert history.is_file()

    run(check, options=ON)


def test_an_edit_clears_the_violation_until_the_next_save(bugs: Path) -> None:
    async def check(s: Session) -> None:
        await _saved_with_violation(s, bugs / "bug.orbit")
        target = next(iter(s.diagnostics))
        text = (bugs / "bug.orbit").read_text()
        s.change(target, text + "\n")
        await s.wait_version(target, 2)
        assert not _violations(s.diagnostics[target])

    run(check, options=ON)


def test_off_by_default_then_on_through_configuration_and_the_fix_is_clean(
    bugs: Path,
) -> None:
    async def check(s: Session) -> None:
        bug = s.open(bugs / "bug.orbit")
        await s.wait_diagnostics(bug)
        s.save(bug)  # the setting is off: no search
        s.configure(ON)
        fixed = s.open(bugs / "fixed.orbit")
        await s.wait_diagnostics(fixed)
        s.save(fixed)
        # Searched after the fix (one verify thread, in order of the saves).
        await _saved_with_violation(s, bugs / "other.orbit")
        assert s.diagnostics[fixed] == []
        assert not _violations(s.diagnostics[bug])

    run(check)


def test_a_search_cut_by_the_budget_is_only_a_note(bugs: Path) -> None:
    options = {"orbit": {"verify": {"onSave": True, "maxStates": 1}}}

    async def check(s: Session) -> None:
        fixed = s.open(bugs / "fixed.orbit")
        await s.wait_diagnostics(fixed)
        s.save(fixed)
        [note] = await s.wait_diagnostics(fixed, bool)
        assert note.severity == lsp.DiagnosticSeverity.Information
        assert "state bound 1 reached" in note.message

    run(check, options=options)


def test_settings_are_read_with_or_without_the_section_and_bad_values_ignored() -> None:
    assert read_settings(None) == Settings()
    assert read_settings({"verify": {"onSave": True, "maxStates": 10}}) == Settings(True, 10)
    current = Settings(True, 10, 500)
    assert read_settings({"orbit": {"verify": {"timeBudgetMs": 100}}}, current) == Settings(
        True, 10, 100
    )
    bad = {"orbit": {"verify": {"onSave": "yes", "maxStates": 0, "timeBudgetMs": True}}}
    assert read_settings(bad, current) == current
    assert Settings(max_states=7, time_budget_ms=1500).bounds().seconds == 1.5
