"""The loader's `read` and `parse` ports, which `orbit lsp` fills with its
unsaved buffers and its parse cache."""

from __future__ import annotations

from pathlib import Path

from orbit_lang import ast
from orbit_lang.compiler import compile_program
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.loader import load_program
from orbit_lang.parser import Unreadable, parse, read_source
from orbit_lang.source import SourceFile

CONTRACT = 'task "t.run" {\n    version "1.0.0"\n    input { a: Int }\n    output { b: Int }\n}\n'
MAIN = (
    'import "contracts.orbit"\n'
    "workflow W {\n"
    '    version "1.0.0"\n'
    '    step s { worker "t.run" with { a: 1 } }\n'
    "    return { b: s.b }\n"
    "}\n"
)


def test_a_buffer_given_by_read_is_used_instead_of_the_disk(tmp_path: Path) -> None:
    (tmp_path / "contracts.orbit").write_text(CONTRACT)
    (tmp_path / "main.orbit").write_text(MAIN)
    main = str(tmp_path / "main.orbit")
    program, parsed = load_program([main])
    assert compile_program(program, parsed, lowered=False).diagnostics == []

    # The import's unsaved text renames the output field: `s.b` is now wrong.
    buffers = {str(tmp_path / "contracts.orbit"): CONTRACT.replace("b: Int", "c: Int")}

    def read(path: str) -> SourceFile | Unreadable:
        text = buffers.get(path)
        return SourceFile(path, text) if text is not None else read_source(path)

    program, parsed = load_program([main], read=read)
    codes = [d.code for d in compile_program(program, parsed, lowered=False).diagnostics]
    assert codes and all(code.startswith("E") for code in codes)


def test_every_file_goes_through_the_parse_port(tmp_path: Path) -> None:
    (tmp_path / "contracts.orbit").write_text(CONTRACT)
    (tmp_path / "main.orbit").write_text(MAIN)
    seen: list[str] = []

    def counting(source: SourceFile) -> tuple[ast.Module, list[Diagnostic]]:
        seen.append(Path(source.path).name)
        return parse(source)

    load_program([str(tmp_path / "main.orbit")], parse=counting)
    assert seen[1:] == ["main.orbit", "contracts.orbit"]
