"""`orbit fmt` prints the `migrate from` block (docs/language/migration.md)
canonically: each item on its line one indent deeper than the block (the
formatter keeps line breaks, as everywhere), `reverse` nested the same way,
an empty block as `{}`; formatting twice changes nothing, and the formatted
source compiles to the same IR and hash."""

from __future__ import annotations

import shutil
from pathlib import Path

from orbit_lang.compiler import compile_program
from orbit_lang.formatter import format_source
from orbit_lang.loader import load_program

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "migration"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "migration"

MESSY = """\
workflow Flow {
  version "2.0.0"
  input { n: Int, m: Int }
      step pause { sleep 1h }
 migrate   from "1.0.0"   in "flow-v1.orbit"{
rename b   to pause
      remove  c
   input{m:input.n*2+coalesce(a.v,0)}
  reverse {
   rename pause to b
       input { n : input.m }
  }
 }
    migrate from "0.9.0" in "flow-v0.orbit" {   }
}
"""

CANONICAL = """\
workflow Flow {
    version "2.0.0"
    input { n: Int, m: Int }
    step pause { sleep 1h }
    migrate from "1.0.0" in "flow-v1.orbit" {
        rename b to pause
        remove c
        input { m: input.n * 2 + coalesce(a.v, 0) }
        reverse {
            rename pause to b
            input { n: input.m }
        }
    }
    migrate from "0.9.0" in "flow-v0.orbit" {}
}
"""


def test_the_block_is_printed_canonically_and_stays_so() -> None:
    formatted = format_source(MESSY, "flow.orbit")
    assert formatted.changed
    assert formatted.text == CANONICAL
    again = format_source(CANONICAL, "flow.orbit")
    assert not again.changed
    assert again.text == CANONICAL


def test_the_sources_with_migrations_are_formatted() -> None:
    for path in [*sorted(FIXTURES.glob("*.orbit")), *sorted(EXAMPLES.glob("*.orbit"))]:
        text = path.read_text(encoding="utf-8")
        assert not format_source(text, str(path)).changed, path


def _compiled(path: Path) -> list[tuple[str, str]]:
    program, diagnostics = load_program([path])
    result = compile_program(program, diagnostics)
    assert result.ok, [d.message for d in result.diagnostics]
    return [(d.key, d.definition_hash) for d in result.definitions]


def test_a_messy_block_formats_to_the_same_ir(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "flow-v1.orbit", tmp_path / "flow-v1.orbit")
    original = (FIXTURES / "flow-v2.orbit").read_text(encoding="utf-8")
    block = original.index("    migrate from")
    messy = original[:block] + (
        ' migrate from "1.0.0"   in "flow-v1.orbit"{\nrename b   to pause\n'
        "input{m:input.n*2+coalesce(a.v,0)}\n"
        "  }\n}\n"
    )
    formatted = format_source(messy, "flow-v2.orbit")
    assert formatted.text == original
    (tmp_path / "flow-v2.orbit").write_text(messy, encoding="utf-8")
    before = _compiled(tmp_path / "flow-v2.orbit")
    (tmp_path / "flow-v2.orbit").write_text(formatted.text, encoding="utf-8")
    assert _compiled(tmp_path / "flow-v2.orbit") == before
    assert _compiled(FIXTURES / "flow-v2.orbit") == before
