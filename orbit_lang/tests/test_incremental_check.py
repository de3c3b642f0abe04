"""`orbit_lang.checkcache` (with `orbit_lang.incremental`, as `orbit lsp`
uses them): parsing and checking with memory after edits gives exactly
what a whole check of the same texts gives (diagnostics with their codes,
messages and spans, and the checked workflows), for one file or several
joined by imports, with unsaved texts in place of the files on disk."""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbit_lang.checkcache import IncrementalChecker
from orbit_lang.compiler import CompileResult, compile_program
from orbit_lang.incremental import IncrementalParser, chunks
from orbit_lang.loader import load_program
from orbit_lang.parser import Unreadable, read_source
from orbit_lang.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    p
    for folder in ("orbit_lang/tests/data", "tests/book", "examples", "orbit_cli/tests/fixtures")
    for p in (ROOT / folder).rglob("*.orbit")
)
# Files that import others: the edits also go into what they import.
IMPORTING = [p for p in FILES if "\nimport " in "\n" + p.read_text(errors="replace")]
# What a one-character edit types: word characters, spaces and line breaks,
# and the characters that open, close or escape something.
TYPED = ("x", "e", "1", "_", ".", " ", "\n", "{", "}", "(", '"', ":", ",", "\\", "/")


class Editor:
    """A program being edited: unsaved texts over the disk, checked both ways."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.buffers: dict[str, str] = {}
        self.parser = IncrementalParser()
        self.checker = IncrementalChecker()

    def text(self, path: Path) -> str:
        key = str(path.resolve())
        return self.buffers.get(key) or path.read_text(encoding="utf-8", errors="replace")

    def type(self, path: Path, text: str) -> None:
        self.buffers[str(path.resolve())] = text

    def read(self, path: str) -> SourceFile | Unreadable:
        text = self.buffers.get(str(Path(path).resolve()))
        return SourceFile(path, text) if text is not None else read_source(path)

    def check(self) -> CompileResult:
        """The fast result, after asserting that it is the whole check's."""
        program, parsed = load_program([self.root], read=self.read, parse=self.parser)
        fast = compile_program(program, parsed, lowered=False, check=self.checker)
        reference, parsed = load_program([self.root], read=self.read)
        whole = compile_program(reference, parsed, lowered=False)
        assert program.modules == reference.modules
        assert fast.diagnostics == whole.diagnostics
        assert _workflows(fast) == _workflows(whole)
        return fast


def _workflows(result: CompileResult) -> list[Any]:
    return [(w.node, w.definition, w.children, dict(w.step_types)) for w in result.workflows]


def _edit(text: str, rng: random.Random) -> str:
    """`text` with one character typed or deleted somewhere."""
    index = rng.randrange(len(text) + 1)
    if text and rng.random() < 0.3:
        index = min(index, len(text) - 1)
        return text[:index] + text[index + 1 :]
    return text[:index] + rng.choice(TYPED) + text[index:]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_one_character_edits_check_the_same(path: Path) -> None:
    rng = random.Random(str(path.relative_to(ROOT)))
    editor = Editor(path)
    editor.check()
    text = editor.text(path)
    for _ in range(4):
        text = _edit(text, rng)
        editor.type(path, text)
        editor.check()


@pytest.mark.parametrize("path", IMPORTING, ids=lambda p: str(p.relative_to(ROOT)))
def test_edits_in_imported_files_check_the_same(path: Path) -> None:
    rng = random.Random(str(path.relative_to(ROOT)))
    editor = Editor(path)
    imported = [Path(m) for m in editor.check().sources if Path(m).is_file()]
    for _ in range(6):
        target = rng.choice(imported)
        editor.type(target, _edit(editor.text(target), rng))
        editor.check()


@st.composite
def edits(draw: st.DrawFn) -> tuple[Path, list[tuple[str, float, str]]]:
    """A file and edits to it: characters typed or deleted, and declarations
    copied elsewhere (so that names are declared twice)."""
    path = draw(st.sampled_from(FILES))
    actions = st.tuples(
        st.sampled_from(("type", "type", "type", "delete", "copy")),
        st.floats(0, 1),
        st.sampled_from(TYPED),
    )
    return path, draw(st.lists(actions, min_size=1, max_size=8))


@given(edits())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_edit_sequences_check_the_same(case: tuple[Path, list[tuple[str, float, str]]]) -> None:
    path, actions = case
    editor = Editor(path)
    editor.check()
    text = editor.text(path)
    for action, where, typed in actions:
        index = int(where * len(text))
        if action == "type":
            text = text[:index] + typed + text[index:]
        elif action == "delete":
            text = text[:index] + text[index + 1 :]
        else:
            pieces = chunks(text)
            _, _, piece = pieces[int(where * (len(pieces) - 1))] if pieces else (0, 0, "")
            text = text[:index] + piece + text[index:]
        editor.type(path, text)
        editor.check()


FAMILY = """
schema Line{i} {{ sku: String }}

task "stock{i}.reserve" {{
    version "1.0.0"
    input {{ line: Line{i} }}
    output {{ reservation: String }}
}}

workflow Order{i} {{
    version "1.0.0"
    input {{ line: Line{i} }}
    step reserve {{ worker "stock{i}.reserve" with {{ line: input.line }} }}
    return {{ id: reserve.reservation }}
}}
"""


def _families(count: int) -> str:
    return "".join(FAMILY.format(i=i) for i in range(count))


def _checked(tmp_path: Path, texts: Mapping[str, str]) -> tuple[Editor, Path]:
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    root = tmp_path / next(iter(texts))
    editor = Editor(root)
    editor.check()
    return editor, root


def test_an_edit_checks_again_only_the_workflows_that_read_it(tmp_path: Path) -> None:
    text = _families(3)
    editor, root = _checked(tmp_path, {"main.orbit": text})
    assert (editor.checker.checked, editor.checker.reused) == (3, 0)
    # A character typed into the version of the second family's task.
    at = text.index('version "1.0.0"', text.index("stock1.reserve")) + len('version "1.0.0')
    editor.type(root, text[:at] + "-rc" + text[at:])
    assert not editor.check().diagnostics
    assert (editor.checker.checked, editor.checker.reused) == (4, 2)
    # An edit to the schema the second family's task reads reaches it too.
    at = text.index("sku", text.index("schema Line1"))
    editor.type(root, text[:at] + "x" + text[at:])
    editor.check()
    assert (editor.checker.checked, editor.checker.reused) == (5, 4)


def test_an_edit_above_moves_the_remembered_diagnostics(tmp_path: Path) -> None:
    text = _families(2).replace('worker "stock1.reserve"', 'worker "stock1.reservx"')
    editor, root = _checked(tmp_path, {"main.orbit": text})
    before = editor.check().diagnostics
    assert [d.code for d in before] == ["E0300"]
    editor.type(root, "// a comment\n\n" + text.replace("String }", "String  }", 1))
    after = editor.check().diagnostics
    assert editor.checker.reused >= 2
    assert after[0].span is not None and before[0].span is not None
    assert after[0].span.line == before[0].span.line + 2
    assert after[0].span.start == before[0].span.start + len("// a comment\n\n") + 1


def test_a_copy_that_takes_over_a_name_gets_the_diagnostics(tmp_path: Path) -> None:
    text = _families(2).replace('worker "stock1.reserve"', 'worker "stock1.reservx"')
    editor, root = _checked(tmp_path, {"main.orbit": text})
    copy = text[text.index("workflow Order1") : text.rindex("}") + 1]
    edited = copy + "\n" + text
    editor.type(root, edited)
    codes = [(d.code, d.span.line if d.span else 0) for d in editor.check().diagnostics]
    # The copy, first in the file, is the one in force: its step is the unknown task.
    assert ("E0300", 4) in codes and any(code == "E0200" for code, _ in codes)


def test_a_new_name_changes_the_suggestion_of_an_unknown_one(tmp_path: Path) -> None:
    text = _families(1).replace('worker "stock0.reserve"', 'worker "stock0.rsvd"')
    editor, root = _checked(tmp_path, {"main.orbit": text})
    (before,) = [d.help for d in editor.check().diagnostics if d.code == "E0300"]
    assert before is not None and "did you mean" not in before
    # A task whose name is close to the misspelt one.
    editor.type(root, text + 'task "stock0.rsvp" {\n    version "1.0.0"\n}\n')
    found = [d.help for d in editor.check().diagnostics if d.code == "E0300"]
    assert found == ["did you mean `stock0.rsvp`?"]


def test_an_edit_in_an_imported_file_reaches_its_importers(tmp_path: Path) -> None:
    contracts = _families(2)
    split = contracts.index("workflow Order0")
    main = 'import "contracts.orbit"\n' + contracts[split:].replace("Order", "Main")
    editor, _ = _checked(tmp_path, {"main.orbit": main, "contracts.orbit": contracts[:split]})
    imported = tmp_path / "contracts.orbit"
    editor.type(imported, contracts[:split].replace("reservation: String", "reservation: Int"))
    assert [d.code for d in editor.check().diagnostics] == []
    editor.type(imported, contracts[:split].replace("reservation: String", "reserved: Int"))
    assert [d.code for d in editor.check().diagnostics]


TEST = """
test "order {i}" {{
    workflow Order{i}
    input {{ line: {{ sku: "X" }} }}
    mock "stock{i}.reserve" returns {{ reservation: "r" }}
    expect status COMPLETED
}}
"""


def test_a_test_is_checked_again_only_when_what_it_reads_changes(tmp_path: Path) -> None:
    text = _families(2) + TEST.format(i=0) + TEST.format(i=1)
    editor, root = _checked(tmp_path, {"main.orbit": text})
    assert (editor.checker.checked, editor.checker.reused) == (4, 0)
    at = text.index('version "1.0.0"', text.index("stock1.reserve")) + len('version "1.0.0')
    editor.type(root, text[:at] + "-rc" + text[at:])
    assert not editor.check().diagnostics
    # The second family's workflow and its test.
    assert (editor.checker.checked, editor.checker.reused) == (6, 2)
    # Back to the first text, with the first test's input now wrong: the
    # second family and its test again, and the first test.
    editor.type(root, text.replace('sku: "X"', "sku: 1", 1))
    assert editor.check().diagnostics
    assert (editor.checker.checked, editor.checker.reused) == (9, 3)
