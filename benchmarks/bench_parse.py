"""Parse throughput: `python benchmarks/bench_parse.py [--lines N] [--repeat R]`.

Generates a program of contracts and workflows that uses most of the
language (records, steps with retry and conditions, lambdas, signals,
queries), then times `parse_source` (lexing, parsing and building the AST)
on it and on a 1,000-line file. Prints the best of R runs.
"""

from __future__ import annotations

import argparse

import benchkit

from orbit_lang.parser import parse_source

TARGET_1000_LINES_S = 0.2


def _block(i: int) -> list[str]:
    return [
        f"/// Contract {i}.",
        f'task "svc{i}.run" {{',
        '    version "1.0.0"',
        "    input { order_id: String, amount: Float, items: List<{ sku: String, quantity: Int }> }",
        "    output { ok: Bool, score: Float?, tags: Map<String, String> }",
        "}",
        "",
        f"workflow Flow{i} {{",
        '    version "1.2.3"',
        "    timeout 1h",
        "    input { order_id: String, amount: Float = 0.0, items: List<{ sku: String, quantity: Int }> }",
        "    signal review { approved: Bool, note: String? }",
        "",
        "    step first {",
        f'        worker "svc{i}.run"',
        "        using python",
        "        with { order_id: input.order_id, amount: input.amount * 1.2 + 3, items: input.items }",
        "        retry { attempts: 3, backoff: exponential, initial_delay: 1s, max_delay: 30s }",
        "        timeout 30s",
        "    }",
        "    step second {",
        f'        worker "svc{i}.run"',
        "        after first",
        "        when first.ok && coalesce(first.score, 0.0) < 0.8 || input.amount >= 100.0",
        '        with { order_id: "x-" + input.order_id, amount: if first.ok then 1.0 else 2.0,'
        " items: filter(input.items, it => it.quantity > 0) }",
        "    }",
        "    step wait { await review timeout 2d }",
        "    query state = { done: !is_null(second), score: first.score }",
        '    return { ok: second.ok, first: first.tags["a"], n: len(input.items) }',
        "}",
        "",
    ]


def generate(lines: int) -> str:
    """A valid program of exactly `lines` lines."""
    return benchkit.generate(_block, lines)


def best_time(text: str, repeat: int) -> float:
    _, diagnostics = parse_source(text, "bench.orbit")
    assert not diagnostics, diagnostics[:3]
    return benchkit.best_of(lambda: parse_source(text, "bench.orbit"), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    big = best_time(generate(args.lines), args.repeat)
    print(f"parse: {args.lines} lines in {big:.3f} s ({args.lines / big:,.0f} lines/s)")
    small = best_time(generate(1000), args.repeat)
    verdict = "ok" if small < TARGET_1000_LINES_S else "SLOWER THAN TARGET"
    print(f"parse: 1000 lines in {small:.3f} s (target < {TARGET_1000_LINES_S} s: {verdict})")


if __name__ == "__main__":
    main()
