"""Effect classes (issue 38) in the offline tools: `orbit inspect` and
`orbit docs` show a declared class on its contract, and print nothing new
for a contract without one."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from orbit_cli.main import cli

SOURCE = """
task "pay.charge" {
    version "1.0.0"
    effect once
}
task "mail.send" {
    version "1.0.0"
}
workflow W {
    version "1.0.0"
    step charge { worker "pay.charge" }
    step mail { worker "mail.send" after charge }
}
"""


def test_inspect_and_docs_show_a_declared_effect_class(tmp_path: Path) -> None:
    source = tmp_path / "w.orbit"
    source.write_text(SOURCE)
    runner = CliRunner()
    inspected = runner.invoke(cli, ["inspect", str(source)])
    assert inspected.exit_code == 0, inspected.output
    lines = inspected.output.splitlines()
    charge = lines.index("  pay.charge@1.0.0")
    assert lines[charge + 3] == "    effect: once"
    mail = lines.index("  mail.send@1.0.0")
    assert "effect" not in " ".join(lines[mail : mail + 4])

    out = tmp_path / "docs"
    documented = runner.invoke(cli, ["docs", str(source), "-o", str(out)])
    assert documented.exit_code == 0, documented.output
    page = (out / "contracts.md").read_text()
    assert page.count("| Effect |") == 1
    assert "| Effect | `once` |" in page
