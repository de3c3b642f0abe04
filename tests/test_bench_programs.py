"""The programs the parse and check benchmarks generate stay valid and of the size asked."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from orbit_lang import compile_source
from orbit_lang.parser import parse_source

_BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _benchmark(name: str) -> ModuleType:
    # The benchmarks are scripts that import their sibling `benchkit`, as they
    # do when run from their folder.
    if str(_BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(_BENCHMARKS))
    return __import__(name)


def test_parse_program_is_valid_and_exactly_sized() -> None:
    text = _benchmark("bench_parse").generate(1000)
    assert text.count("\n") == 1000
    _, diagnostics = parse_source(text, "bench.orbit")
    assert diagnostics == []


def test_check_program_compiles_cleanly_and_is_exactly_sized() -> None:
    text = _benchmark("bench_check").generate(600)
    assert text.count("\n") == 600
    result = compile_source(text, "bench.orbit")
    assert [d.message for d in result.diagnostics] == []
    assert {d.ir_version for d in result.definitions} == {"orbit-ir/1", "orbit-ir/2"}


def test_fmt_benchmark_restores_the_generated_layout() -> None:
    from orbit_lang.formatter import format_source

    tidy = _benchmark("bench_check").generate(600)
    messy = _benchmark("bench_fmt").messy(tidy)
    assert messy != tidy
    assert format_source(messy, "bench.orbit").text == tidy


def test_test_benchmark_program_passes() -> None:
    from click.testing import CliRunner

    from orbit_cli.main import cli

    bench = _benchmark("bench_test")
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.test.orbit"
        path.write_text(bench.generate(6), encoding="utf-8")
        result = CliRunner().invoke(cli, ["test", str(path)])
    assert result.exit_code == 0, result.output
    assert "6 passed, 0 failed" in result.stdout


def test_cost_benchmark_counts_the_bytecodes_of_a_step(tmp_path: Path, capsys: Any) -> None:
    bench = _benchmark("bench_cost")
    saved = tmp_path / "counts.json"
    assert bench.main(["--bytecodes", "--traced", "20", "--save", str(saved), "--top", "3"]) == 0
    counts = json.loads(saved.read_text())
    # Every step appends events and runs the decider, whatever else changes.
    assert counts["executions.py:append"] >= 1 and counts["decide.py:decide"] >= 1
    assert len(capsys.readouterr().out.splitlines()) == 4  # the total, then the top three
    # Against saved counts: the totals, then the largest changes.
    assert bench.main(["--bytecodes", "--traced", "20", "--vs", str(saved), "--top", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("bytecodes per step: ") and len(lines) == 2


def test_cost_benchmark_estimates_the_cycles_of_a_step(monkeypatch: Any) -> None:
    # The two runs' totals (valgrind itself is not needed here): the
    # difference is divided by the 3 x 100 steps between them.
    bench = _benchmark("bench_cost")
    small = dict.fromkeys(bench.CACHE_EVENTS, 1_000_000)
    large = {**small, "Ir": 1_300_000, "I1mr": 1_000_300, "DLmr": 1_000_030}
    monkeypatch.setattr(bench.shutil, "which", lambda _tool: "/usr/bin/valgrind")
    monkeypatch.setattr(bench, "_warm", lambda _repo, _py: None)
    monkeypatch.setattr(bench, "_cachegrind", lambda _repo, _py, n: small if n == 100 else large)
    per = bench.cache(Path("."), sys.executable, 100, 200)
    assert (per["Ir"], per["I1mr"], per["DLmr"], per["D1mr"]) == (1000, 1, 0.1, 0)
    assert per["cycles"] == 1000 + 10 * 1 + 100 * 0.1


def test_visibility_benchmark_counts_what_indexing_adds_per_step(
    monkeypatch: Any, capsys: Any
) -> None:
    # Two sizes of each workflow (valgrind itself is not needed here): the
    # difference of the counts over the 300 steps between them, with and
    # without the search fields, and the ratio of the two.
    bench = _benchmark("bench_visibility")
    counts = {("without", 100): 10_000_000, ("without", 400): 40_000_000}
    counts |= {("with", 100): 11_000_000, ("with", 400): 43_300_000}
    monkeypatch.setattr(bench.shutil, "which", lambda _tool: "/usr/bin/valgrind")
    monkeypatch.setattr(bench, "_child", lambda *_args, **_kw: "")
    monkeypatch.setattr(bench, "_callgrind", lambda _args, which, n: counts[(which, n)])
    assert bench.main(["--counted", "--small", "100", "--large", "400"]) == 0
    out = capsys.readouterr().out
    assert "without search fields:      100,000" in out
    assert "with 2 search fields:       107,667" in out
    assert "indexing adds +7.7 % (instructions)" in out


def test_visibility_benchmark_runs_one_counted_child(tmp_path: Path) -> None:
    # The child a counted run starts under valgrind, run plainly: it must
    # finish its executions and exit.
    bench = _benchmark("bench_visibility")
    store = str(tmp_path / "v.db")
    argv = ["--one-run", "with", "--steps-executions", "20", "--store", store]
    assert bench.main(argv) == 0


def test_visibility_benchmark_times_pairs_for_each_step_count(tmp_path: Path, capsys: Any) -> None:
    # A tiny timed series: per step count, the two arms' figures and the
    # median of the per-pair ratios with their spread, then a summary.
    bench = _benchmark("bench_visibility")
    store = str(tmp_path / "t.db")
    argv = [
        "--commit",
        "--runs",
        "2",
        "--steps",
        "1,3",
        "--steps-executions",
        "10",
        "--store",
        store,
    ]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "10 executions of 1 step(s) a run" in out and "10 executions of 3 step(s) a run" in out
    assert out.count("(median of 2 pairs; quartiles") == 4  # CPU and wall, per step count
    assert "load average (1 min): " in out


def test_visibility_benchmark_runs_a_pair_together(tmp_path: Path, capsys: Any) -> None:
    # `--together`: each arm of a pair in a child process of its own, at
    # the same time; each child reports its run's figures per step.
    bench = _benchmark("bench_visibility")
    store = str(tmp_path / "t.db")
    argv = ["--commit", "--together", "--runs", "1", "--steps-executions", "10", "--store", store]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "1 pairs run together" in out and "(median of 1 pairs;" in out


def test_visibility_benchmark_median_interval_is_the_sign_tests() -> None:
    # 10 values: the 2nd and the 9th bound the median at 97.9 %; with 5
    # or fewer no pair of order statistics reaches 95 %, so the range.
    bench = _benchmark("bench_visibility")
    assert bench._median_interval([float(v) for v in range(10, 0, -1)]) == (2.0, 9.0)
    assert bench._median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_engine_benchmark_starts_executions_in_batches(tmp_path: Path, capsys: Any) -> None:
    # With a few executions in flight on a durable store, the starts of new
    # executions must share commits: started one at a time from one thread,
    # each start would wait for a commit of its own and set the pace.
    bench = _benchmark("bench_engine")
    argv = ["--store", str(tmp_path / "b.db"), "--executions", "300", "--in-flight", "30"]
    assert bench.main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["commits"] < 300 / 2, result


def test_flow_benchmark_runs_and_fairness_holds(tmp_path: Path, capsys: Any) -> None:
    # A small run of each part: the limited run completes every execution,
    # and the small customer's work is not queued behind the big one's.
    bench = _benchmark("bench_flow")
    argv = ["--quick", "--limits", "all", "--store", str(tmp_path / "f.db"), "--json"]
    assert bench.main(argv) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["limited_tasks_per_s"] > 0 and result["free_tasks_per_s"] > 0
    assert all(v["tasks_per_s"] > 0 for v in result["limited"].values()), result
    assert result["fairness"]["share"] < 0.05, result
