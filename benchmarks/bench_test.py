"""`orbit test` throughput: `python benchmarks/bench_test.py [--tests N] [--repeat R]`.

Generates one file with a workflow (a compute step, a retried task with a
timeout, a fan-out, an await with a timeout, a day-long sleep, a child
workflow and compensations) and N tests of it that mix the paths: the
happy path with a signal (a day of simulated time), an await that times out
after six hours and compensates, and a task that fails twice before
succeeding on its retries. Then times `orbit test FILE` in-process (plan
and run, as the command does) and prints tests per second, with the
simulated time covered.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from orbit_cli.main import cli

WORKFLOW = """\
task "bench.work" {
    version "1.0.0"
    input { n: Int }
    output { n: Int, tag: String }
}

task "bench.item" {
    version "1.0.0"
    input { n: Int }
    output { n: Int }
}

task "bench.undo" {
    version "1.0.0"
    input { n: Int }
    output { undone: Bool }
}

task "bench.mail" {
    version "1.0.0"
    input { text: String }
    output { sent: Bool }
}

workflow BenchChild {
    version "1.0.0"
    input { n: Int }
    output { sent: Bool }
    step tell { worker "bench.mail" with { text: "child " + string(input.n) } }
    return { sent: tell.sent }
}

workflow Bench {
    version "1.0.0"
    input { n: Int, items: List<Int> = [1, 2, 3] }
    output { total: Int }
    signal go { ok: Bool }
    step double { compute { value: input.n * 2 } }
    step work {
        worker "bench.work"
        with { n: double.value }
        timeout 1m
        retry { attempts: 3, backoff: exponential, initial_delay: 30s }
        compensate { worker "bench.undo" with { n: input.n } }
    }
    step each {
        for item in input.items
        worker "bench.item"
        with { n: item }
        compensate { worker "bench.undo" with { n: item } }
    }
    step wait { await go after work timeout 6h }
    step rest { sleep 1d after wait }
    step child { workflow "BenchChild" after rest with { n: work.n } }
    step last { worker "bench.mail" after child, each with { text: work.tag } }
    return { total: work.n }
}
"""

MOCKS = """\
    mock "bench.item" returns { n: input.n }
    mock "bench.undo" returns { undone: true }
    mock "bench.mail" returns { sent: true }
"""


def _test(i: int) -> str:
    kind = i % 3
    head = f'test "case {i}" {{\n    workflow Bench\n    input {{ n: {i} }}\n{MOCKS}'
    if kind == 0:
        body = (
            '    mock "bench.work" returns { n: input.n, tag: "t" }\n'
            "    signal go { ok: true }\n"
            "    expect status COMPLETED\n"
            f"    expect output {{ total: {2 * i} }}\n"
        )
    elif kind == 1:
        body = (
            '    mock "bench.work" returns { n: input.n, tag: "t" }\n'
            "    expect status FAILED\n"
            '    expect error "SIGNAL_TIMEOUT"\n'
            "    expect compensated each\n"
        )
    else:
        body = (
            '    mock "bench.work" fails "BUSY" retryable times 2 then returns { n: 1, tag: "t" }\n'
            "    signal go { ok: true }\n"
            "    expect status COMPLETED\n"
            "    expect step work attempts 3\n"
        )
    return head + body + "}\n"


def generate(tests: int) -> str:
    return WORKFLOW + "\n" + "\n".join(_test(i) for i in range(tests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.test.orbit"
        path.write_text(generate(args.tests), encoding="utf-8")
        best = float("inf")
        best_cpu = float("inf")
        for _ in range(args.repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            result = CliRunner().invoke(cli, ["test", "--format", "json", str(path)])
            best = min(best, time.perf_counter() - wall)
            best_cpu = min(best_cpu, time.process_time() - cpu)
            assert result.exit_code == 0, result.output[-2000:]
    import json

    report = json.loads(result.stdout)
    simulated_h = sum(t["execution"]["simulated_ms"] for t in report["tests"]) / 3_600_000
    print(
        f"orbit test: {args.tests} tests in {best:.2f} s ({args.tests / best:,.0f} tests/s; "
        f"{best_cpu:.2f} s of CPU, {args.tests / best_cpu:,.0f} tests/s of CPU), "
        f"{simulated_h:,.0f} hours of simulated time"
    )


if __name__ == "__main__":
    main()
