"""orbit_lang from Python: `compile_files` gives the definitions or raises one
`CompileError` whose text is what `orbit check` prints for the same files,
so a typo is reported where it is, not as an unpacking error later."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import orbit_lang
from orbit_cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

TYPO = """\
task "text.shout" {
    version "1.0.0"
    input { text: String }
    output { text: String }
}

workflow Shout {
    version "1.0.0"
    input { text: String }
    output { text: String }

    step shout {
        worker "text.shout"
        with { text: input.txt }
    }

    return { text: shout.txt }
}
"""


def _check_stderr(*args: str) -> str:
    result = CliRunner().invoke(cli, ["check", *args], env={"NO_COLOR": "1"})
    assert result.exit_code == 1
    return result.stderr


def test_a_good_file_gives_its_definitions() -> None:
    (definition,) = orbit_lang.compile_files([EXAMPLES / "hello.orbit"])
    assert definition.name == "Hello"


def test_a_typo_raises_one_error_printed_as_orbit_check_prints_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("shout.orbit").write_text(TYPO)
    with pytest.raises(orbit_lang.CompileError) as raised:
        orbit_lang.compile_files(["shout.orbit"])
    error = raised.value
    assert [d.code for d in error.errors] == ["E0402", "E0402"]
    assert str(error) + "\n" == _check_stderr("shout.orbit")
    assert " --> shout.orbit:14:28" in str(error)
    assert str(error).endswith("error: compilation failed: 2 error(s), 0 warning(s)")


def test_warnings_fail_only_when_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # A version that is not MAJOR.MINOR.PATCH is a warning (W0201), not an error.
    source = TYPO.replace("txt", "text").replace(
        'version "1.0.0"\n    input { text', 'version "1"\n    input { text'
    )
    Path("warn.orbit").write_text(source)
    result = orbit_lang.compile_paths(["warn.orbit"])
    assert result.errors == 0 and result.warnings >= 1, result.diagnostics
    assert [d.name for d in orbit_lang.compile_files(["warn.orbit"])] == ["Shout"]
    with pytest.raises(orbit_lang.CompileError) as raised:
        orbit_lang.compile_files(["warn.orbit"], strict=True)
    assert str(raised.value) + "\n" == _check_stderr("--strict", "warn.orbit")
    assert str(raised.value).endswith("warning(s) treated as errors (--strict)")


def test_compile_source_results_raise_too() -> None:
    with pytest.raises(orbit_lang.CompileError, match=r"error\[E0402\]"):
        orbit_lang.compile_source(TYPO, "typo.orbit").raise_on_errors()
