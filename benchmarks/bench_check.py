"""`orbit check` speed: `python benchmarks/bench_check.py [--lines N] [--repeat R]`.

Generates a valid program that exercises the checker (schemas with
defaults, contracts with compensations, fan-out, conditions and narrowing,
signals and queries, outcome and event handlers, child workflows, lambdas,
continue-as-new and tests), then times:

- `orbit check FILE` as a user runs it: a fresh process, so Python start-up
  and imports count (the target: under 1 s for 2,000 lines);
- the same check in-process (`orbit_lang.check_paths`), and a full compile
  to IR with hashes (`orbit_lang.compile_paths`).

Prints the best of R runs of each.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import benchkit

from orbit_lang import check_paths, compile_paths
from orbit_lang.process import tune_for_compiling

TARGET_S = 1.0


def _block(i: int) -> list[str]:
    return [
        f"/// Items of order family {i}.",
        f"schema Line{i} {{",
        "    sku: String",
        "    quantity: Int = 1",
        "    price: Float",
        "}",
        "",
        f'task "stock{i}.reserve" {{',
        '    version "1.0.0"',
        f"    input {{ order_id: String, line: Line{i} }}",
        "    output { reservation_id: String }",
        f'    compensated_by "stock{i}.release"',
        "}",
        "",
        f'task "stock{i}.release" {{',
        '    version "1.0.0"',
        "    input { reservation_id: String }",
        "    output { released: Bool }",
        "}",
        "",
        f'task "pay{i}.charge" {{',
        '    version "1.0.0"',
        "    input { order_id: String, amount: Float }",
        "    output { transaction_id: String, fee: Float? }",
        "}",
        "",
        f"workflow Ship{i} {{",
        '    version "1.0.0"',
        "    input { order_id: String, count: Int }",
        "    step pause { sleep 1s }",
        "    return { order_id: input.order_id, count: input.count }",
        "}",
        "",
        f"workflow Order{i} {{",
        '    version "1.0.0"',
        "    timeout 7d",
        f"    input {{ order_id: String, lines: List<Line{i}>, coupon: String? }}",
        "    signal review { approved: Bool, note: String? }",
        "    signal note { text: String }",
        "",
        "    step totals {",
        "        compute {",
        "            total: sum(map(input.lines, l => float(l.quantity) * l.price))",
        "            count: len(input.lines)",
        "            big: any(input.lines, l => l.price > 100.0)",
        '            label: coalesce(input.coupon, "none") + "-" + string(len(input.lines))',
        "        }",
        "    }",
        "    step reserve {",
        "        for line in filter(input.lines, l => l.quantity > 0)",
        "        max_parallel 4",
        f'        worker "stock{i}.reserve"',
        "        using python",
        "        with { order_id: input.order_id, line: line }",
        '        idempotency_key input.order_id + "/" + line.sku',
        "        retry { attempts: 3, backoff: exponential, initial_delay: 1s, max_delay: 30s }",
        "        compensate {",
        f'            worker "stock{i}.release"',
        "            with { reservation_id: reserve.reservation_id }",
        "        }",
        "    }",
        "    step decision { await review when totals.big timeout 2d }",
        "    step charge {",
        f'        worker "pay{i}.charge"',
        "        after reserve",
        "        when !totals.big || coalesce(decision.approved, false)",
        "        with { order_id: input.order_id, amount: totals.total }",
        "        timeout 30s",
        "    }",
        "    step ship {",
        f'        workflow "Ship{i}"',
        "        when !totals.big || coalesce(decision.approved, false)",
        "        with { order_id: charge.transaction_id, count: totals.count }",
        "    }",
        "    query status = { charged: !is_null(charge), total: totals.total }",
        "    on failure {",
        "        step log { compute { code: failure.code, charged: !is_null(charge) } }",
        "    }",
        "    on event note {",
        '        step echo { compute event.text + " " + input.order_id }',
        "    }",
        "    return { total: totals.total, transaction_id: charge.transaction_id }",
        "}",
        "",
        f'test "order {i} completes" {{',
        f"    workflow Order{i}",
        '    input { order_id: "A", lines: [{ sku: "X", price: 1.0 }] }',
        f'    mock "stock{i}.reserve" returns {{ reservation_id: "r" }}',
        f'    mock "pay{i}.charge" returns {{ transaction_id: "t", fee: null }}',
        "    expect status COMPLETED",
        "    expect output { total: 1.0 }",
        "}",
        "",
    ]


def generate(lines: int) -> str:
    """A valid program of exactly `lines` lines."""
    return benchkit.generate(_block, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    # What `orbit` does at start-up, so that the in-process numbers are its own.
    tune_for_compiling()
    orbit = shutil.which("orbit", path=str(Path(sys.executable).parent)) or "orbit"
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.orbit"
        path.write_text(generate(args.lines), encoding="utf-8")
        result = check_paths([path])
        assert not result.diagnostics, [d.message for d in result.diagnostics[:3]]

        def cli() -> None:
            subprocess.run([orbit, "check", str(path)], check=True, capture_output=True)

        wall = benchkit.best_of(cli, args.repeat)
        checked = benchkit.best_of(lambda: check_paths([path]), args.repeat)
        compiled = benchkit.best_of(lambda: compile_paths([path]), args.repeat)
    workflows = len(result.workflows)
    verdict = "ok" if wall < TARGET_S else "SLOWER THAN TARGET"
    print(
        f"orbit check: {args.lines} lines ({workflows} workflows) in {wall:.3f} s "
        f"(target < {TARGET_S} s: {verdict})"
    )
    print(f"  in-process check: {checked:.3f} s; full compile to IR with hashes: {compiled:.3f} s")


if __name__ == "__main__":
    main()
