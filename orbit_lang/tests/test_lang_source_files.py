"""Only regular files of bounded size are read as source (issue 11, item 5):
an import of, or a command-line argument naming, a device, a pipe, a
directory or a huge file is E0206 at once, never a hang."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from orbit_lang import check_paths, compile_source
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.parser import MAX_SOURCE_BYTES, SOURCE_FILES_NOTE, parse_file
from orbit_lang.render import render_report

T = TypeVar("T")

WORKFLOW = 'workflow W { version "1.0.0" }\n'


def _within(seconds: float, call: Callable[[], T]) -> T:
    """`call()`, failing the test (rather than hanging it) if it blocks."""
    result: list[T] = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s"
    return result[0]


def _import(tmp_path: Path, target: str) -> list[Diagnostic]:
    main = tmp_path / "main.orbit"
    text = f'import "{target}"\n{WORKFLOW}'
    result = _within(10, lambda: compile_source(text, str(main)))
    return result.diagnostics


def _e0206(diagnostics: list[Diagnostic]) -> Diagnostic:
    assert [d.code for d in diagnostics] == ["E0206"]
    return diagnostics[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    path = tmp_path / "pipe.orbit"
    os.mkfifo(path)
    return path


def test_importing_a_named_pipe_is_e0206_without_waiting_for_a_writer(
    tmp_path: Path, fifo: Path
) -> None:
    found = _e0206(_import(tmp_path, fifo.name))
    assert found.message == "cannot import `pipe.orbit`: not a regular file (a named pipe)"
    assert found.notes == (SOURCE_FILES_NOTE,)
    assert found.span is not None and (found.span.line, found.span.column) == (1, 1)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_importing_an_endless_device_is_e0206() -> None:
    found = _e0206(_import(Path("/"), "/dev/zero"))
    assert found.message == "cannot import `/dev/zero`: not a regular file (a character device)"
    assert found.notes == (SOURCE_FILES_NOTE,)


def test_importing_a_directory_is_e0206(tmp_path: Path) -> None:
    (tmp_path / "lib.orbit").mkdir()
    found = _e0206(_import(tmp_path, "lib.orbit"))
    assert found.message == "cannot import `lib.orbit`: Is a directory (os error 21)"
    assert found.notes == ()


def test_importing_a_file_over_the_size_limit_is_e0206(tmp_path: Path) -> None:
    big = tmp_path / "big.orbit"
    with big.open("wb") as fh:
        fh.truncate(MAX_SOURCE_BYTES + 1)  # sparse: nothing is written
    found = _e0206(_import(tmp_path, "big.orbit"))
    assert found.message == "cannot import `big.orbit`: the file is too large (2,097,153 bytes)"
    assert found.notes == (SOURCE_FILES_NOTE,)


def test_a_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "padded.orbit"
    path.write_bytes(WORKFLOW.encode() + b" " * (MAX_SOURCE_BYTES - len(WORKFLOW)))
    result = check_paths([path])
    assert result.diagnostics == []
    assert len(result.workflows) == 1


def test_a_missing_import_keeps_the_books_reason(tmp_path: Path) -> None:
    found = _e0206(_import(tmp_path, "missing.orbit"))
    assert found.message == "cannot import `missing.orbit`: No such file or directory (os error 2)"
    assert found.notes == ()


def test_a_pipe_named_on_the_command_line_is_e0206_with_its_note(fifo: Path) -> None:
    result = _within(10, lambda: check_paths([fifo]))
    found = _e0206(result.diagnostics)
    assert found.message == f"cannot read `{fifo}`: not a regular file (a named pipe)"
    assert render_report([found], {}) == (
        f"error[E0206]: cannot read `{fifo}`: not a regular file (a named pipe)\n"
        f" = note: {SOURCE_FILES_NOTE}\n"
        "\n"
        "error: compilation failed: 1 error(s), 0 warning(s)\n"
    )
    module, diagnostics = _within(10, lambda: parse_file(fifo))
    assert module.declarations == ()
    assert [d.message for d in diagnostics] == [found.message]
