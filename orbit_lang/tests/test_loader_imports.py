"""Loading a compilation: imports, the prelude, unreadable files (chapter 07)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_lang import ast
from orbit_lang.loader import Program, load_program
from orbit_lang.prelude import PRELUDE_PATH
from orbit_lang.render import render_report


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _paths(program: Program) -> list[str]:
    return [m.path for m in program.modules]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_imports_resolve_from_the_importing_file(project: Path) -> None:
    _write(
        project,
        {
            "workflows/orders.orbit": 'import "../contracts/payments.orbit"\nimport "shared.orbit"\n',
            "contracts/payments.orbit": 'task "payments.charge" { }\n',
            "workflows/shared.orbit": "schema Shared { id: String }\n",
        },
    )
    program, diagnostics = load_program(["workflows/orders.orbit"])
    assert diagnostics == []
    assert _paths(program) == [
        PRELUDE_PATH,
        "contracts/payments.orbit",
        "workflows/shared.orbit",
        "workflows/orders.orbit",
    ]


def test_each_file_is_loaded_once_and_cycles_are_allowed(project: Path) -> None:
    _write(
        project,
        {
            "a.orbit": 'import "b.orbit"\nimport "sub/../b.orbit"\nworkflow A { version "1.0.0" }\n',
            "b.orbit": 'import "a.orbit"\nworkflow B { version "1.0.0" }\n',
        },
    )
    program, diagnostics = load_program(["a.orbit", "b.orbit", "./a.orbit"])
    assert diagnostics == []
    assert _paths(program) == [PRELUDE_PATH, "b.orbit", "a.orbit"]
    assert [w.name.name for w in program.workflows] == ["B", "A"]


def test_an_unreadable_import_is_reported_at_the_import(project: Path) -> None:
    _write(project, {"main.orbit": 'import "missing.orbit"\n'})
    program, diagnostics = load_program(["main.orbit"])
    assert render_report(diagnostics, program.sources) == (
        "error[E0206]: cannot import `missing.orbit`: No such file or directory (os error 2)\n"
        " --> main.orbit:1:1\n"
        "  |\n"
        '1 | import "missing.orbit"\n'
        "  | ^^^^^^^^^^^^^^^^^^^^^^\n"
        "\n"
        "error: compilation failed: 1 error(s), 0 warning(s)\n"
    )


def test_an_unreadable_file_on_the_command_line_has_no_location(project: Path) -> None:
    (project / "dir.orbit").mkdir()
    program, diagnostics = load_program(["nope.orbit", "dir.orbit"])
    assert [d.message for d in diagnostics] == [
        "cannot read `nope.orbit`: No such file or directory (os error 2)",
        "cannot read `dir.orbit`: Is a directory (os error 21)",
    ]
    assert all(d.span is None and d.code == "E0206" for d in diagnostics)
    assert _paths(program) == [PRELUDE_PATH]


def test_diagnostics_are_ordered_by_load_order_then_position(project: Path) -> None:
    _write(
        project,
        {
            "main.orbit": 'import "lib.orbit"\n$\nworkflow M { version "1.0.0" }\n#\n',
            "lib.orbit": "%\n",
        },
    )
    _, diagnostics = load_program(["main.orbit"])
    assert [(d.span.file, d.span.line) for d in diagnostics if d.span] == [
        ("lib.orbit", 1),
        ("main.orbit", 2),
        ("main.orbit", 4),
    ]


def test_the_prelude_declares_the_http_task(project: Path) -> None:
    program, diagnostics = load_program([])
    assert diagnostics == []
    (task,) = program.prelude.declarations
    assert isinstance(task, ast.Task)
    assert task.name.value == "orbit.http.request"
    fields = {
        member.keyword.line: [f.name.name for f in member.type.fields]
        for member in task.members
        if isinstance(member, ast.TaskInput | ast.TaskOutput)
        and isinstance(member.type, ast.RecordType)
    }
    assert list(fields.values()) == [
        ["method", "url", "headers", "body"],
        ["status", "headers", "body"],
    ]
