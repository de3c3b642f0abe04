"""`orbit deploy` and the deploying half of `orbit run`."""

from __future__ import annotations

from pathlib import Path

import cli_ir
import pytest
from cli_fake_runtime import FakeRuntime
from conftest import Orbit

from orbit_core.ir import from_json, to_json


def test_deploy_then_up_to_date(fake: FakeRuntime, orbit: Orbit, tmp_path: Path) -> None:
    defn = cli_ir.hello()
    ir = cli_ir.write(tmp_path / "hello.json", defn)
    short = defn.definition_hash[len("sha256:") :][:12]
    first = orbit("deploy", str(ir))
    assert (first.exit_code, first.stderr) == (0, f"deployed Hello@1.0.0 (sha256:{short})\n")
    second = orbit("deploy", str(ir))
    assert (second.exit_code, second.stderr) == (0, f"up to date Hello@1.0.0 (sha256:{short})\n")
    sent = fake.requests[0]["body"]
    assert from_json(sent) == defn
    assert sent == to_json(defn)


def test_deploy_with_no_files_does_nothing(fake: FakeRuntime, orbit: Orbit) -> None:
    result = orbit("deploy")
    assert (result.exit_code, result.output) == (0, "")
    assert fake.requests == []


def test_children_are_registered_before_parents(
    fake: FakeRuntime, orbit: Orbit, tmp_path: Path
) -> None:
    child = cli_ir.hello()
    parent = cli_ir.parent_of(child)
    files = [
        cli_ir.write(tmp_path / "parent.json", parent),
        cli_ir.write(tmp_path / "child.json", child),
    ]
    result = orbit("deploy", *map(str, files))
    assert result.exit_code == 0
    assert [line.split()[1] for line in result.stderr.splitlines()] == [
        "Hello@1.0.0",
        "Greeter@1.0.0",
    ]


def test_run_picks_the_parent_of_a_family(fake: FakeRuntime, tmp_path: Path) -> None:
    from orbit_cli.definitions import select_workflow

    child = cli_ir.hello()
    parent = cli_ir.parent_of(child)
    assert select_workflow([child, parent], None, "f.orbit") == parent
    assert select_workflow([child, parent], "Hello", "f.orbit") == child


def test_run_no_wait_prints_only_the_id_on_stdout(
    fake: FakeRuntime, orbit: Orbit, tmp_path: Path
) -> None:
    fake.bind_start("Hello", "99e811dd-7448-41cc-ac28-bc58d50200d2")
    ir = cli_ir.write(tmp_path / "hello.json", cli_ir.hello())
    result = orbit("run", str(ir), "--no-wait", "-i", '{"name": "Ada"}')
    assert result.exit_code == 0
    assert result.stdout == "99e811dd-7448-41cc-ac28-bc58d50200d2\n"
    assert result.stderr.splitlines()[1] == "started execution 99e811dd-7448-41cc-ac28-bc58d50200d2"
    assert not any("/wait" in r["path"] for r in fake.requests)


def test_run_attaches_to_an_existing_id(fake: FakeRuntime, orbit: Orbit) -> None:
    fake.register("Hello", "1.0.0", "sha256:505930b4d466")
    fake.add_execution("99e811dd-7448-41cc-ac28-bc58d50200d2").polls = 1
    result = orbit("run", "Hello", "--id", "99e811dd-7448-41cc-ac28-bc58d50200d2")
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert lines[0] == "attached to existing execution 99e811dd-7448-41cc-ac28-bc58d50200d2"
    assert lines[1].startswith("  ✓ compose ")


def test_inspect_summarises_an_ir_file(orbit: Orbit, tmp_path: Path) -> None:
    defn = cli_ir.hello()
    ir = cli_ir.write(tmp_path / "hello.json", defn)
    result = orbit("inspect", str(ir))
    assert result.exit_code == 0
    assert result.stdout == (
        "workflow Hello@1.0.0\n"
        "  Compose a greeting, then decorate it\n"
        "  ir:      orbit-ir/1\n"
        f"  hash:    {defn.definition_hash}\n"
        "  input:   { name: String, excitement: Int = 3 }\n"
        "  output:  { greeting: String }\n"
        "  timeout: 5m00s\n"
        "\n"
        "steps (execution order)\n"
        "  compose                greeting.compose@1.0.0 using python, retry 3x exponential\n"
        "  decorate               greeting.decorate@1.0.0 using typescript, timeout 10.0s after compose\n"
        "                         ↺ compensate greeting.undo\n"
        "\n"
        "contracts\n"
        "  greeting.compose@1.0.0\n"
        "    in:  { name: String }\n"
        "    out: { message: String }\n"
        "  greeting.decorate@1.0.0\n"
        "    in:  { message: String, excitement: Int }\n"
        "    out: { message: String }\n"
        "  greeting.undo@1.0.0\n"
        "    in:  { message: String }\n"
        "    out: { removed: Bool }\n"
    )


INBOX = """\
workflow Inbox {
    version "1.0.0"
    input { seen: Int = 0, label: String = "inbox", tags: List<String> = [], name: String }
    output { seen: Int }
    signal message { text: String, urgent: Bool = false }
    step take { await message timeout 1d }
    return { seen: input.seen + 1 }
}
"""


def test_inspect_shows_input_defaults(orbit: Orbit, tmp_path: Path) -> None:
    # A caller reading the summary learns which fields it may leave out.
    source = tmp_path / "inbox.orbit"
    source.write_text(INBOX, encoding="utf-8")
    result = orbit("inspect", str(source))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        '  input:   { seen: Int = 0, label: String = "inbox", tags: List<String> = [], '
        "name: String }"
    ) in lines
    assert "  message                { text: String, urgent: Bool = false }" in lines


def test_orbit_sources_need_the_compiler(
    orbit: Orbit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orbit_lang

    # orbit_lang loads its compiler on first use (a module __getattr__), so
    # hide the entry point rather than delete it.
    monkeypatch.setattr(orbit_lang, "compile_paths", None, raising=False)
    source = tmp_path / "hello.orbit"
    source.write_text("workflow Hello {}")
    result = orbit("deploy", str(source))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: this installation cannot compile .orbit files yet")


class _Compiled:
    def __init__(self, definitions: list[object], diagnostics: list[object]) -> None:
        self.definitions = definitions
        self.diagnostics = diagnostics
        self.ok = not any(getattr(d, "severity", "") == "error" for d in diagnostics)


class _Diagnostic:
    def __init__(self, severity: str) -> None:
        self.severity = severity


def test_orbit_sources_are_compiled_with_orbit_lang(
    fake: FakeRuntime, orbit: Orbit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orbit_lang

    seen: list[object] = []

    def compile_paths(paths: list[Path], strict: bool = False) -> _Compiled:
        seen.append((paths, strict))
        return _Compiled([cli_ir.hello()], [_Diagnostic("warning")])

    monkeypatch.setattr(orbit_lang, "compile_paths", compile_paths, raising=False)
    monkeypatch.setattr(
        orbit_lang, "render_diagnostics", lambda ds, color: "warning[W0601]: …\n", raising=False
    )
    source = tmp_path / "hello.orbit"
    source.write_text("// compiled by the stub above")
    result = orbit("deploy", str(source))
    assert result.exit_code == 0
    assert seen == [([source], False)]
    assert result.stderr.splitlines()[0] == "warning[W0601]: …"
    assert result.stderr.splitlines()[1].startswith("deployed Hello@1.0.0")

    monkeypatch.setattr(
        orbit_lang,
        "compile_paths",
        lambda paths, strict=False: _Compiled([], [_Diagnostic("error"), _Diagnostic("warning")]),
    )
    failed = orbit("deploy", str(source))
    assert failed.exit_code == 1
    assert failed.stderr.splitlines()[-1] == "error: compilation failed: 1 error(s), 1 warning(s)"


def test_deploy_compiles_sources_with_the_real_compiler(
    fake: FakeRuntime, orbit: Orbit, tmp_path: Path
) -> None:
    from orbit_lang import compile_paths

    examples = Path(__file__).resolve().parents[2] / "examples"
    (compiled,) = compile_paths([examples / "hello.orbit"]).definitions
    result = orbit("deploy", str(examples / "hello.orbit"))
    short = compiled.definition_hash.removeprefix("sha256:")[:12]
    assert (result.exit_code, result.stderr) == (0, f"deployed Hello@1.0.0 (sha256:{short})\n")
    assert from_json(fake.requests[0]["body"]) == compiled
