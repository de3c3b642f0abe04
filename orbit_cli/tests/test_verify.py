"""`orbit verify` (issue 42): verify blocks, the explorer, counterexamples.

The seeded-bug catalogue (examples/verify/bugs) is the main evidence: every
buggy workflow is caught, with a counterexample that `orbit replay` finds
consistent and whose generated test fails as `orbit test` runs it, and every
fixed one verifies clean. Every example verifies with the default bounds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orbit_cli.main import cli
from orbit_cli.replay import decode_events, parse_history, replay
from orbit_cli.verify.explore import Bounds, explore
from orbit_cli.verify.model import Model, fingerprint
from orbit_core.state import fold
from orbit_lang.compiler import compile_program
from orbit_lang.loader import load_program

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
BUGS = EXAMPLES / "verify" / "bugs"
BUGGY = sorted(p for p in BUGS.glob("[0-9]*.orbit") if not p.name.endswith(".fixed.orbit"))
FIXED = sorted(BUGS.glob("[0-9]*.fixed.orbit"))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["verify", *args])
    return result.exit_code, result.stdout, result.stderr


def report(path: Path, out: Path) -> dict[str, Any]:
    code, stdout, _ = run("--json", "--out", str(out), str(path))
    document: dict[str, Any] = json.loads(stdout)
    assert code == (0 if document["ok"] else 1)
    return document


def test_the_catalogue_has_ten_bugs_each_with_its_fix() -> None:
    assert len(BUGGY) >= 10
    assert [p.name.replace(".orbit", ".fixed.orbit") for p in BUGGY] == [p.name for p in FIXED]


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_each_seeded_bug_is_caught_with_a_consistent_counterexample(
    path: Path, tmp_path: Path
) -> None:
    document = report(path, tmp_path)
    assert not document["ok"]
    [block] = document["verifies"]
    assert block["complete"]
    definition = _definition(path, block["workflow"])
    for violation in block["violations"]:
        history = Path(violation["history"])
        assert history.parent == tmp_path
        execution_id, raw = parse_history(json.loads(history.read_text()))
        events = decode_events(raw)
        checked = replay(execution_id or "", events, definition)
        assert checked.divergences == []
        # The generated test reproduces the violation under `orbit test`
        # when nothing in it had to be left as a comment.
        if not violation["built_in"] and "not expressible" not in violation["test"]:
            _test_fails(path, violation["test"], tmp_path)


@pytest.mark.parametrize("path", FIXED, ids=lambda p: p.stem)
def test_each_fixed_workflow_verifies_clean(path: Path, tmp_path: Path) -> None:
    document = report(path, tmp_path)
    assert document["ok"], document["verifies"][0]["violations"]
    assert document["verifies"][0]["complete"]
    assert not list(tmp_path.iterdir())


def _examples() -> list[Path]:
    return sorted(EXAMPLES.glob("*.orbit")) + sorted((EXAMPLES / "verify").glob("*.verify.orbit"))


# The agent example explores about 84,000 states: some 25 s on a quiet
# machine, more on a loaded two-core CI one. Its time budget is checked by
# benchmarks/bench_verify.py, not here.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.name)
def test_every_example_verifies_with_the_default_bounds(path: Path, tmp_path: Path) -> None:
    document = report(path, tmp_path)
    assert document["ok"], [b["violations"] for b in document["verifies"]]
    for block in document["verifies"]:
        # The 30 s budget is benchmarks/bench_verify.py's to check, not a timed test's.
        assert block["complete"], block["truncated"]


def test_a_violation_prints_coverage_the_history_path_and_a_test(tmp_path: Path) -> None:
    code, out, _ = run("--out", str(tmp_path), str(BUGS / "04-ship-before-charge.orbit"))
    assert code == 1
    assert "explored " in out and " states, " in out
    assert "✓ charge" in out and "✓ ship" in out
    assert "shipping.ship" in out and "fails PERMANENT" in out
    assert "✗ invariant step charge SUCCEEDED when step ship SUCCEEDED" in out
    history = tmp_path / "orders-never-ship-unpaid.history.json"
    assert f"counterexample (1 choices): {history}" in out or str(history) in out
    assert history.exists()
    assert 'mock "payments.charge" fails "PERMANENT"' in out
    assert "expect step ship SUCCEEDED" in out and "expect step charge SUCCEEDED" in out
    assert out.rstrip().splitlines()[-1].startswith("verify result: FAILED. 1 block, 1 violation")


def test_the_counterexample_is_a_shortest_one(tmp_path: Path) -> None:
    # Shipping succeeds and the charge fails: two outcomes, nothing shorter.
    document = report(BUGS / "04-ship-before-charge.orbit", tmp_path)
    [violation] = document["verifies"][0]["violations"]
    assert violation["choices"] == 2


def test_compile_errors_exit_2_with_located_e09xx_codes(tmp_path: Path) -> None:
    source = tmp_path / "bad.orbit"
    source.write_text(
        (BUGS / "04-ship-before-charge.orbit")
        .read_text()
        .replace('import "tasks.orbit"', f'import "{BUGS / "tasks.orbit"}"')
        .replace("invariant step charge SUCCEEDED", "invariant step chrage SUCCEEDED")
        .replace(
            "workflow Order\n    input", "workflow Order\n    invariant compensated ship\n    input"
        )
        + '\nverify "other" {\n    workflow Ordr\n}\nverify "none" {\n    input {}\n}\n'
    )
    code, out, err = run("--out", str(tmp_path / "out"), str(source))
    assert code == 2
    assert "error[E0903]: `Order` has no step `chrage`" in err
    assert "bad.orbit:28:20" in err
    assert "error[E0900]: unknown workflow `Ordr`" in err
    assert "`expect" not in err
    assert "error[E0901]: verify `none` does not name a workflow" in err
    code, out, _ = run("--json", str(source))
    assert code == 2
    codes = [d["code"] for d in json.loads(out)["diagnostics"]]
    assert {"E0903", "E0900", "E0905"} <= set(codes)


def test_usage_errors_exit_2() -> None:
    assert run()[0] == 2
    assert run("--depth", "0", str(BUGS / "01-missing-compensation.orbit"))[0] == 2
    code, _, err = run("--workflow", "Nope", str(BUGS / "01-missing-compensation.orbit"))
    assert code == 2 and "Nope" in err


def test_bounds_cut_the_search_and_say_so(tmp_path: Path) -> None:
    code, out, _ = run(
        "--max-states",
        "5",
        "--out",
        str(tmp_path),
        str(EXAMPLES / "verify" / "expense.verify.orbit"),
    )
    assert code == 0
    assert "incomplete: state bound 5 reached" in out


def test_a_seed_changes_only_the_order_of_exploration(tmp_path: Path) -> None:
    path = BUGS / "02-refund-only-on-failure.orbit"
    plain = report(path, tmp_path / "a")
    seeded = report(path, tmp_path / "b")
    code, out, _ = run("--json", "--seed", "7", "--out", str(tmp_path / "c"), str(path))
    shuffled = json.loads(out)
    assert code == 1
    assert plain["verifies"][0]["states"] == seeded["verifies"][0]["states"]
    assert shuffled["verifies"][0]["states"] == plain["verifies"][0]["states"]
    assert [v["choices"] for v in shuffled["verifies"][0]["violations"]] == [
        v["choices"] for v in plain["verifies"][0]["violations"]
    ]


def test_the_explored_state_is_the_fold_of_its_history() -> None:
    # The model copies states instead of folding again; every copy must be
    # what folding the node's history gives.
    definition = _definition(EXAMPLES / "verify" / "order_processing.orbit", "OrderProcessing")
    model = Model(definition)
    node = model.start(
        {"order_id": "A", "customer_id": "c", "amount": 1.0, "items": [], "currency": "USD"}
    )
    frontier = [node]
    checked = 0
    while frontier and checked < 300:
        current = frontier.pop(0)
        for choice in model.choices(current):
            child = model.take(current, choice)
            assert fold(child.events, "verify").to_json() == child.state.to_json()
            assert fingerprint(child)
            frontier.append(child)
            checked += 1
    result = explore(model, node.state.input, (), Bounds())
    assert not result.truncated and not result.violations


def test_verify_blocks_change_no_definition_hash(tmp_path: Path) -> None:
    source = (EXAMPLES / "verify" / "order_processing.orbit").read_text()
    plain = tmp_path / "plain.orbit"
    plain.write_text(
        source.replace('import "../contracts.orbit"', f'import "{EXAMPLES}/contracts.orbit"')
    )
    with_block = tmp_path / "with.orbit"
    with_block.write_text(
        plain.read_text()
        + '\nverify "x" {\n    workflow OrderProcessing\n    invariant status COMPLETED\n}\n'
    )
    hashes = []
    for path in (plain, with_block):
        program, parsed = load_program([path])
        compiled = compile_program(program, parsed)
        assert compiled.ok
        hashes.append([d.definition_hash for d in compiled.definitions])
    assert hashes[0] == hashes[1]


def test_fmt_formats_verify_blocks(tmp_path: Path) -> None:
    path = tmp_path / "v.orbit"
    path.write_text(
        'verify   "x"  {\n  workflow   W\n      invariant status COMPLETED   when step a SUCCEEDED'
        "   and status   FAILED\n}\n"
    )
    result = CliRunner().invoke(cli, ["fmt", str(path)])
    assert result.exit_code == 0, result.output
    assert path.read_text() == (
        'verify "x" {\n    workflow W\n    invariant status COMPLETED when step a SUCCEEDED'
        " and status FAILED\n}\n"
    )


# ---- helpers


def _definition(path: Path, workflow: str) -> Any:
    program, parsed = load_program([path])
    compiled = compile_program(program, parsed)
    return next(d for d in compiled.definitions if d.name == workflow)


def _test_fails(path: Path, case: str, tmp_path: Path) -> None:
    test_file = tmp_path / "counterexample.test.orbit"
    test_file.write_text(f'import "{path}"\n\n{case}\n')
    result = CliRunner().invoke(cli, ["test", str(test_file)])
    assert result.exit_code == 1, result.output
    assert "FAILED  " in result.stdout
    assert "is not mocked" not in result.stdout


QUEUED = """\
task "jobs.run" {
    version "1.0.0"
    input { id: String }
    output { done: Bool }
}

workflow Queued {
    version "1.0.0"
    input { id: String }

    step run {
        worker "jobs.run"
        with { id: input.id }
        queue_timeout 5m
    }
}

verify "only a worker's own failure fails it" {
    workflow Queued
    input { id: "j-1" }
    invariant error "PERMANENT" when status FAILED
}
"""


def test_a_task_nobody_picks_up_before_its_queue_timeout_is_explored(tmp_path: Path) -> None:
    source = tmp_path / "queued.orbit"
    source.write_text(QUEUED, encoding="utf-8")
    document = report(source, tmp_path / "out")
    [block] = document["verifies"]
    assert block["complete"]
    [violation] = block["violations"]
    history = json.loads(Path(violation["history"]).read_text(encoding="utf-8"))
    assert "QUEUE_TIMEOUT" in json.dumps(history)
