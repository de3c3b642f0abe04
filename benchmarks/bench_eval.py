"""Micro benchmark of the expression evaluator and value validation.

Measures the expressions the engine evaluates for every step (`with`, `when`,
the idempotency key), a compute step over a list, and the contract check of a
task input, then prints the cost of one step's worth of them.

    .venv/bin/nox -s bench -- eval            # or: python benchmarks/bench_eval.py [--n 100000]
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from typing import Any

from orbit_core.evaluate import Scope, evaluate
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.values import conform


def _get(root: e.Expr, *fields: str) -> e.Expr:
    for f in fields:
        root = e.Get(root, f)
    return root


INPUT = e.Input()
LOOKUP = e.StepRef("lookup")

WITH = e.Object(
    (
        e.Entry("order_id", _get(INPUT, "order_id")),
        e.Entry("amount", e.Binary("mul", _get(INPUT, "amount"), e.Float(1.2))),
        e.Entry("currency", e.Call("coalesce", (_get(INPUT, "currency"), e.Str("USD")))),
        e.Entry(
            "customer",
            e.Object(
                (
                    e.Entry("id", _get(INPUT, "customer", "id")),
                    e.Entry("tier", _get(LOOKUP, "tier")),
                )
            ),
        ),
        e.Entry("first_sku", _get(e.Index(_get(INPUT, "items"), e.Int(0)), "sku")),
    )
)
WHEN = e.Binary(
    "and",
    e.Binary("gt", _get(INPUT, "amount"), e.Float(100.0)),
    e.Unary("not", e.Call("is_null", (_get(LOOKUP, "tier"),))),
)
KEY = e.Binary(
    "add",
    e.Binary("add", _get(INPUT, "order_id"), e.Str("/")),
    e.Call("string", (_get(INPUT, "attempt"),)),
)
ITEM = e.Var("i")
COMPUTE = e.Call(
    "sum",
    (
        e.Call(
            "map",
            (
                _get(INPUT, "items"),
                e.Lambda(
                    "i",
                    e.Binary(
                        "mul",
                        _get(ITEM, "price"),
                        e.Call("float", (_get(ITEM, "quantity"),)),
                    ),
                ),
            ),
        ),
    ),
    float_sum=True,
)

TASK_INPUT = t.RecordType(
    (
        t.Field("order_id", t.STRING),
        t.Field("amount", t.FLOAT),
        t.Field("currency", t.STRING, "USD"),
        t.Field(
            "customer",
            t.RecordType((t.Field("id", t.STRING), t.Field("tier", t.OptionalType(t.STRING)))),
        ),
        t.Field("first_sku", t.OptionalType(t.STRING)),
        t.Field("priority", t.INT, 0),
    )
)

SCOPE = Scope(
    input={
        "order_id": "A-100",
        "amount": 250.0,
        "currency": None,
        "attempt": 2,
        "customer": {"id": "c-7", "email": "c7@example.com"},
        "items": [{"sku": f"SKU-{i}", "price": 9.5 + i, "quantity": i % 3 + 1} for i in range(10)],
    },
    execution={"id": "order-A-100", "workflow": "Orders", "version": "1.0.0"},
    steps={"lookup": {"tier": "gold"}},
)


def _case(fn: Callable[[], Any], n: int, repeat: int) -> float:
    """Best seconds per call."""
    return min(timeit.repeat(fn, number=n, repeat=repeat)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="calls per measurement")
    parser.add_argument("--repeat", type=int, default=5, help="measurements; the best is kept")
    args = parser.parse_args()

    payload = evaluate(WITH, SCOPE)
    cases: dict[str, Callable[[], Any]] = {
        "with (object, 6 fields)": lambda: evaluate(WITH, SCOPE),
        "when (comparison && !is_null)": lambda: evaluate(WHEN, SCOPE),
        "idempotency key (concat + string)": lambda: evaluate(KEY, SCOPE),
        "conform task input (6 fields)": lambda: conform(payload, TASK_INPUT),
        "compute sum(map(10 items, lambda))": lambda: evaluate(COMPUTE, SCOPE),
    }
    print(f"bench_eval: best of {args.repeat} x {args.n} calls")
    seconds: dict[str, float] = {}
    for name, fn in cases.items():
        seconds[name] = _case(fn, args.n, args.repeat)
        per_second = 1 / seconds[name]
        print(f"  {name:<38} {seconds[name] * 1e6:7.2f} µs  {per_second:>12,.0f}/s")
    step = sum(seconds[name] for name in list(cases)[:4])
    print(
        f"  {'one step (with + when + key + conform)':<38} {step * 1e6:7.2f} µs  {1 / step:>12,.0f} steps/s"
    )


if __name__ == "__main__":
    main()
