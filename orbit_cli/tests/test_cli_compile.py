"""`orbit compile` and `orbit validate` (chapters 06 and 66)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TWO = """\
task "a.run" { version "1.0.0" input { n: Int } output { v: Int } }
workflow Demo {
    version "1.0.0"
    step a { worker "a.run" with { n: 1 } }
}
workflow Queue {
    version "1.0.0"
    signal item { sku: String }
    step take { await item timeout 1h }
}
"""
WARNED = 'workflow Odd {\n    version "1.0"\n    step a { sleep 1s }\n}\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def _orbit(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_one_file_per_workflow_named_after_the_source(project: Path) -> None:
    (project / "hello.orbit").write_text((EXAMPLES / "hello.orbit").read_text())
    result = _orbit("compile", "hello.orbit", "-o", "build")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == "compiled Hello@1.0.0 -> build/hello.orbit.json\n"
    assert result.stdout == ""
    document = json.loads((project / "build" / "hello.orbit.json").read_text())
    assert (document["ir_version"], document["name"]) == ("orbit-ir/1", "Hello")


def test_several_workflows_of_a_file_get_the_workflow_name(project: Path) -> None:
    (project / "demo.orbit").write_text(TWO)
    result = _orbit("compile", "demo.orbit", "-o", "build")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        "compiled Demo@1.0.0 -> build/demo.Demo.orbit.json\n"
        "compiled Queue@1.0.0 -> build/demo.Queue.orbit.json\n"
    )
    queue = json.loads((project / "build" / "demo.Queue.orbit.json").read_text())
    assert queue["ir_version"] == "orbit-ir/2"


def test_the_default_output_directory_is_build(project: Path) -> None:
    (project / "demo.orbit").write_text(TWO)
    assert _orbit("compile", "demo.orbit").exit_code == 0
    assert sorted(p.name for p in (project / "build").iterdir()) == [
        "demo.Demo.orbit.json",
        "demo.Queue.orbit.json",
    ]


def test_stdout_prints_the_documents(project: Path) -> None:
    (project / "hello.orbit").write_text((EXAMPLES / "hello.orbit").read_text())
    result = _orbit("compile", "hello.orbit", "--stdout")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:3] == [
        "{",
        '  "ir_version": "orbit-ir/1",',
        '  "name": "Hello",',
    ]
    assert not (project / "build").exists()


def test_errors_write_nothing(project: Path) -> None:
    (project / "bad.orbit").write_text("workflow Bad {\n    step a { sleep 1s }\n}\n")
    result = _orbit("compile", "bad.orbit")
    assert result.exit_code == 1
    assert "error[E0500]" in result.stderr
    assert result.stderr.endswith("error: compilation failed: 1 error(s), 0 warning(s)\n")
    assert not (project / "build").exists()


def test_warnings_are_shown_and_do_not_stop_compilation(project: Path) -> None:
    (project / "odd.orbit").write_text(WARNED)
    result = _orbit("compile", "odd.orbit")
    assert result.exit_code == 0
    assert result.stderr.startswith("warning[W0201]")
    assert result.stderr.endswith("compiled Odd@1.0 -> build/odd.orbit.json\n")


def test_strict_with_warnings_writes_nothing(project: Path) -> None:
    (project / "odd.orbit").write_text(WARNED)
    result = _orbit("compile", "--strict", "odd.orbit")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: 1 warning(s) treated as errors (--strict)\n")
    assert not (project / "build").exists()


def test_contracts_only_is_nothing_to_compile(project: Path) -> None:
    (project / "c.orbit").write_text('task "a.run" { version "1.0.0" }\n')
    result = _orbit("compile", "c.orbit")
    assert result.exit_code == 1
    assert result.stderr == "error: nothing to compile: no workflow declarations found\n"


def test_compile_needs_files(project: Path) -> None:
    result = _orbit("compile")
    assert (result.exit_code, result.stderr) == (1, "error: no input files\n")


def test_validate_recomputes_the_hash(project: Path) -> None:
    (project / "demo.orbit").write_text(TWO)
    (project / "plain.orbit").write_text((EXAMPLES / "hello.orbit").read_text())
    assert _orbit("compile", "demo.orbit", "-o", "build").exit_code == 0
    document = json.loads((project / "build" / "demo.Demo.orbit.json").read_text())
    result = _orbit("validate", "build/demo.Demo.orbit.json", "plain.orbit")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "ok build/demo.Demo.orbit.json is valid orbit-ir/1 "
        f"(Demo@1.0.0, {document['definition_hash']})\n"
        "ok Hello@1.0.0 (2 steps)\n"
    )


def test_validate_rejects_a_tampered_file(project: Path) -> None:
    (project / "demo.orbit").write_text(TWO)
    assert _orbit("compile", "demo.orbit", "-o", "build").exit_code == 0
    path = project / "build" / "demo.Demo.orbit.json"
    document = json.loads(path.read_text())
    document["steps"][0]["with"]["entries"][0]["value"]["value"] = 2
    path.write_text(json.dumps(document, indent=2))
    result = _orbit("validate", "build/demo.Demo.orbit.json", "build/demo.Queue.orbit.json")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: build/demo.Demo.orbit.json: definition_hash does not match the IR content "
        "(was the file modified?)\n"
    )
    assert result.stdout.startswith("ok build/demo.Queue.orbit.json is valid orbit-ir/2")


def test_validate_rejects_what_is_not_ir(project: Path) -> None:
    (project / "x.json").write_text('{"ir_version": "orbit-ir/3"}')
    (project / "y.json").write_text("{")
    result = _orbit("validate", "x.json", "y.json")
    assert result.exit_code == 1
    assert "error: x.json: not a valid IR document: unsupported IR version `orbit-ir/3`" in (
        result.stderr
    )
    assert "error: y.json: not valid JSON" in result.stderr


def test_validate_rejects_orbit_ir_1_using_orbit_ir_2_features(project: Path) -> None:
    (project / "demo.orbit").write_text(TWO)
    assert _orbit("compile", "demo.orbit", "-o", "build").exit_code == 0
    path = project / "build" / "demo.Queue.orbit.json"
    document = json.loads(path.read_text())
    document["ir_version"] = "orbit-ir/1"
    from orbit_core.ir import hash_document

    document["definition_hash"] = hash_document(document)
    path.write_text(json.dumps(document))
    result = _orbit("validate", str(path.relative_to(project)))
    assert result.exit_code == 1
    assert "cannot use `orbit-ir/2` features" in result.stderr


def test_validate_checks_sources_like_check(project: Path) -> None:
    (project / "bad.orbit").write_text("workflow Bad {\n    step a { sleep 1s }\n}\n")
    result = _orbit("validate", "bad.orbit")
    assert result.exit_code == 1
    assert "error[E0500]" in result.stderr


def test_files_with_the_same_stem_do_not_overwrite_each_other(project: Path) -> None:
    (project / "a").mkdir()
    (project / "b").mkdir()
    (project / "a" / "flow.orbit").write_text('workflow A {\n    version "1.0.0"\n}\n')
    (project / "b" / "flow.orbit").write_text('workflow B {\n    version "1.0.0"\n}\n')
    result = _orbit("compile", "a/flow.orbit", "b/flow.orbit")
    assert result.exit_code == 0
    assert result.stderr == (
        "compiled A@1.0.0 -> build/flow.A.orbit.json\ncompiled B@1.0.0 -> build/flow.B.orbit.json\n"
    )
