"""`orbit fmt`: the chapter 49 transcript, options, messages and exit codes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_lang import formatter

BOOK = Path(__file__).resolve().parents[2] / "tests" / "book" / "examples" / "49-formatter"
MESSY = (BOOK / "0030.orbit").read_text(encoding="utf-8")
TIDY = (BOOK / "0044.orbit").read_text(encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def _fmt(*args: str) -> Result:
    return CliRunner().invoke(cli, ["fmt", *args])


def test_the_chapter_transcript(project: Path) -> None:
    (project / "messy.orbit").write_text(MESSY, encoding="utf-8")
    checked = _fmt("--check", "messy.orbit")
    assert (checked.exit_code, checked.stdout, checked.stderr) == (
        1,
        "",
        "would reformat messy.orbit\n",
    )
    assert (project / "messy.orbit").read_text(encoding="utf-8") == MESSY
    formatted = _fmt("messy.orbit")
    assert (formatted.exit_code, formatted.stdout, formatted.stderr) == (
        0,
        "",
        "formatted messy.orbit\n",
    )
    assert (project / "messy.orbit").read_text(encoding="utf-8") == TIDY
    again = _fmt("--check", "messy.orbit")
    assert (again.exit_code, again.stdout, again.stderr) == (0, "", "")


def test_a_formatted_file_is_not_touched(project: Path) -> None:
    path = project / "tidy.orbit"
    path.write_text(TIDY, encoding="utf-8")
    os.utime(path, (1_000_000, 1_000_000))
    result = _fmt("tidy.orbit")
    assert (result.exit_code, result.stderr) == (0, "")
    assert path.stat().st_mtime == 1_000_000


def test_lexical_errors_are_refused_and_the_file_kept(project: Path) -> None:
    bad = 'workflow A {\n    step a { compute "open\n}\n'
    (project / "lexbad.orbit").write_text(bad, encoding="utf-8")
    result = _fmt("lexbad.orbit")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: lexbad.orbit: cannot format a file with lexical errors: "
        "unterminated string literal\n",
    )
    assert (project / "lexbad.orbit").read_text(encoding="utf-8") == bad


def test_syntax_errors_do_not_prevent_formatting(project: Path) -> None:
    (project / "broken.orbit").write_text("workflow W{\nstep {\n}\n", encoding="utf-8")
    result = _fmt("broken.orbit")
    assert (result.exit_code, result.stderr) == (0, "formatted broken.orbit\n")
    assert (project / "broken.orbit").read_text() == "workflow W {\n    step {\n    }\n"


def test_every_file_is_handled_and_any_failure_exits_1(project: Path) -> None:
    (project / "a.orbit").write_text(MESSY, encoding="utf-8")
    (project / "bad.orbit").write_text("schema A { a: # }\n", encoding="utf-8")
    (project / "b.orbit").write_text(MESSY, encoding="utf-8")
    result = _fmt("a.orbit", "bad.orbit", "missing.orbit", "b.orbit")
    assert result.exit_code == 1
    assert result.stderr == (
        "formatted a.orbit\n"
        "error: bad.orbit: cannot format a file with lexical errors: unexpected character `#`\n"
        "error: cannot read missing.orbit: No such file or directory (os error 2)\n"
        "formatted b.orbit\n"
    )
    assert (project / "b.orbit").read_text(encoding="utf-8") == TIDY


def test_check_reports_each_unformatted_file_and_writes_nothing(project: Path) -> None:
    (project / "a.orbit").write_text(MESSY, encoding="utf-8")
    (project / "b.orbit").write_text(TIDY, encoding="utf-8")
    (project / "c.orbit").write_text(MESSY, encoding="utf-8")
    result = _fmt("--check", "a.orbit", "b.orbit", "c.orbit")
    assert (result.exit_code, result.stderr) == (
        1,
        "would reformat a.orbit\nwould reformat c.orbit\n",
    )
    assert (project / "a.orbit").read_text(encoding="utf-8") == MESSY


def test_no_files_is_an_error(project: Path) -> None:
    result = _fmt()
    assert (result.exit_code, result.stderr) == (1, "error: no input files\n")
    result = _fmt("--check")
    assert (result.exit_code, result.stderr) == (1, "error: no input files\n")


def test_a_directory_is_not_expanded(project: Path) -> None:
    (project / "workflows").mkdir()
    result = _fmt("workflows")
    assert result.exit_code == 1
    assert result.stderr == "error: cannot read workflows: Is a directory (os error 21)\n"


def test_a_file_that_is_not_utf8_is_refused_unchanged(project: Path) -> None:
    data = b'schema A{ a: String = "caf\xe9" }\n'
    (project / "latin1.orbit").write_bytes(data)
    result = _fmt("latin1.orbit")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: cannot read latin1.orbit: the file is not UTF-8 text\n",
    )
    assert (project / "latin1.orbit").read_bytes() == data


def test_windows_line_endings_and_permissions_are_kept(project: Path) -> None:
    path = project / "crlf.orbit"
    path.write_bytes(MESSY.replace("\n", "\r\n").encode())
    path.chmod(0o640)
    result = _fmt("crlf.orbit")
    assert result.exit_code == 0, result.stderr
    assert path.read_bytes() == TIDY.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in project.iterdir()] == ["crlf.orbit"]


def test_a_failed_safety_check_leaves_the_file_unchanged(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = formatter._Layout.run
    monkeypatch.setattr(formatter._Layout, "run", lambda self: original(self).replace("2", "3"))
    (project / "messy.orbit").write_text(MESSY, encoding="utf-8")
    result = _fmt("messy.orbit")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: messy.orbit: formatter safety check failed (token `2` at line 9 became `3`); "
        "the file was left unchanged\n",
    )
    assert (project / "messy.orbit").read_text(encoding="utf-8") == MESSY


def test_a_file_that_cannot_be_written_is_left_whole(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = project / "messy.orbit"
    path.write_text(MESSY, encoding="utf-8")

    def refused(*_args: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refused)
    result = _fmt("messy.orbit")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: cannot write messy.orbit: Permission denied (os error 13)\n",
    )
    assert path.read_text(encoding="utf-8") == MESSY
    assert [p.name for p in project.iterdir()] == ["messy.orbit"]


def test_help_lists_check() -> None:
    result = CliRunner().invoke(cli, ["fmt", "--help"])
    assert result.exit_code == 0
    assert "--check" in result.stdout
    assert "canonical layout" in result.stdout


def test_a_fifo_is_refused_without_reading(project: Path) -> None:
    os.mkfifo(project / "pipe.orbit")
    result = _fmt("pipe.orbit")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: cannot read pipe.orbit: not a regular file\n",
    )


def test_a_file_over_2_mib_is_refused(project: Path) -> None:
    (project / "big.orbit").write_text("// x\n" * 500_000, encoding="utf-8")
    result = _fmt("big.orbit")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: cannot read big.orbit: the file is too large (2,500,000 bytes)\n",
    )
