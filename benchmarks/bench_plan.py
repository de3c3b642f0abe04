"""bench_plan: `orbit plan`'s throughput model against measurement (issue 44).

Without options, runs three bundled workflows (examples/hello.orbit's
`Hello`, examples/checkout.orbit's `Checkout`, examples/agent.orbit's
`ResearchAgent`) on the engine with a fresh store and in-process handlers,
as bench_engine.py runs its chain (all executions in flight, two handler
threads), and prints for each the events the envelope predicts on the
typical path against the events recorded, and the executions/s the model
(orbit_cli.planmodel) predicts against those measured.

`--calibrate` measures the model's constants instead: six calibration
workflows (chains of one, two, four and eight task steps; one task step
followed by four or eight compute steps), each run three times, fit the
fixed cost per execution, the cost per event, the cost per dispatch and the
cost per step and commit (the decider reads every step at each decision);
it also measures the store's bytes per event beyond the events' JSON. Paste the figures into
orbit_cli/planmodel.py's STORES.

    python benchmarks/bench_plan.py --store /tmp/plan.db
    python benchmarks/bench_plan.py --calibrate --store /tmp/plan.db
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from orbit_cli.planmodel import STORES, figures
from orbit_core import ir
from orbit_core.api import StartRequest
from orbit_core.engine import Engine, tune_process
from orbit_core.envelope import envelope
from orbit_core.errors import OrbitError
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_lang.compiler import compile_paths

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import open_store

ROOT = Path(__file__).resolve().parent.parent
TASK = "plan.step"

# What the in-process handlers answer, per task (the agent's `plan` returns
# three queries and `check` a confident verdict: no editor review).
OUTPUTS: dict[str, Any] = {
    "greeting.compose": {"message": "hi"},
    "greeting.decorate": {"message": "hi!"},
    "inventory.reserve": {"reservation_id": "r-1"},
    "payments.charge": {"transaction_id": "t-1", "status": "ok"},
    "llm.plan": {"queries": ["a", "b", "c"], "estimated_cost_usd": 0.1},
    "tools.search": {"query": "a", "snippets": [], "sources": []},
    "llm.draft": {"text": "t", "citations": []},
    "guardrails.check": {"confidence": 0.95, "flags": []},
    "content.publish": {"url": "https://example.com/a"},
    "notifications.alert": {"sent": True},
}
WORKLOADS = (
    ("examples/hello.orbit", "Hello", {"name": "Ada"}, 10),
    (
        "examples/checkout.orbit",
        "Checkout",
        {"order_id": "o-1", "customer_id": "c-1", "amount": 10.0, "items": []},
        10,
    ),
    ("examples/agent.orbit", "ResearchAgent", {"question": "q", "slug": "s"}, 3),
)


def chain(tasks: int, computes: int) -> ir.Definition:
    record = t.RecordType((t.Field("i", t.INT),))
    steps = []
    for i in range(tasks + computes):
        after = (f"s{i - 1}",) if i else ()
        if i < tasks:
            step = ir.Step(
                f"s{i}",
                "task",
                task=TASK,
                depends_on=after,
                with_=e.Object((e.Entry("i", e.Int(i)),)),
            )
        else:
            step = ir.Step(f"s{i}", "compute", compute=e.Int(i), depends_on=after)
        steps.append(step)
    defn = ir.Definition(
        ir_version=ir.IR_V2 if computes else ir.IR_V1,
        name=f"Chain{tasks}x{computes}",
        version="1.0.0",
        input=t.EMPTY_RECORD,
        output=t.EMPTY_RECORD,
        steps=tuple(steps),
        result=e.EMPTY_OBJECT,
        contracts={TASK: ir.TaskContract(TASK, "1.0.0", record, t.EMPTY_RECORD)},
    )
    return attrs.evolve(defn, definition_hash=ir.definition_hash(defn))


@attrs.frozen
class Measured:
    executions_per_s: float
    events: float  # per execution
    json_bytes: float  # per execution
    file_bytes: int


def measure(
    definitions: list[ir.Definition], workflow: str, input: Any, store: str, executions: int
) -> Measured:
    """Runs `executions` of `workflow`, all in flight, on a fresh store."""
    tune_process()
    engine = Engine(open_store(store), handler_threads=2, auto_tick=False)
    for d in definitions:
        engine.deploy(d)
    tasks = {(c.name, c.version) for d in definitions for c in d.contracts.values()}
    for name, version in sorted(tasks):
        if not name.startswith("workflow:"):
            output = OUTPUTS.get(name, {})
            engine.register_handler(name, version, lambda _i, _c, out=output: out)
    started = time.perf_counter()
    for first in range(0, executions, 500):
        batch = [
            StartRequest(workflow, input=input, execution_id=f"{workflow}-{i}")
            for i in range(first, min(first + 500, executions))
        ]
        for answer in engine.start_many(batch):
            if isinstance(answer, OrbitError):
                raise answer
    while engine.health()["active_executions"]:
        time.sleep(0.001)
    elapsed = time.perf_counter() - started
    sample = [engine.history(f"{workflow}-{i}")["events"] for i in range(0, executions, 97)]
    for history in sample:
        if history[-1]["type"] != "WorkflowCompleted":
            raise SystemExit(f"{workflow}: an execution ended {history[-1]['type']}")
    events = sum(len(h) for h in sample) / len(sample)
    import orjson

    json_bytes = sum(len(orjson.dumps(ev)) for h in sample for ev in h) / len(sample)
    engine.close()
    size = os.path.getsize(store) if os.path.exists(store) else 0
    return Measured(executions / elapsed, events, json_bytes, size)


def _least_squares(rows: Sequence[tuple[float, ...]], columns: list[int]) -> list[float] | None:
    """The least-squares coefficients of `columns` (the rest held at 0; the
    last element of each row is the measured value), by Gaussian
    elimination on the normal equations; None when singular."""
    n = len(columns)
    m = [
        [sum(r[i] * r[j] for r in rows) for j in columns] + [sum(r[i] * r[-1] for r in rows)]
        for i in columns
    ]
    for c in range(n):
        pivot = max(range(c, n), key=lambda k: abs(m[k][c]))
        if abs(m[pivot][c]) < 1e-12:
            return None
        m[c], m[pivot] = m[pivot], m[c]
        for k in range(n):
            if k != c:
                f = m[k][c] / m[c][c]
                m[k] = [a - f * b for a, b in zip(m[k], m[c], strict=True)]
    return [m[c][n] / m[c][c] for c in range(n)]


TERMS = 4  # fixed, per event, per dispatch, per step and commit


def fit(rows: Sequence[tuple[float, ...]]) -> tuple[float, ...]:
    """Non-negative least squares of micros = a + b*events + c*dispatches +
    d*steps*commits, by trying every subset of the terms: on a shared
    machine the free fit can come out negative, which no cost is."""
    best: tuple[float, tuple[float, ...]] | None = None
    for mask in range(1, 2**TERMS):
        subset = [i for i in range(TERMS) if mask >> i & 1]
        found = _least_squares(rows, subset)
        if found is None or min(found) < 0:
            continue
        beta = [0.0] * TERMS
        for column, value in zip(subset, found, strict=True):
            beta[column] = value
        residual = sum((r[-1] - sum(beta[i] * r[i] for i in range(TERMS))) ** 2 for r in rows)
        if best is None or residual < best[0]:
            best = (residual, tuple(beta))
    assert best is not None
    return best[1]


def run_calibration(args: argparse.Namespace) -> int:
    """Each calibration workflow `--runs` times (the median counts: the
    machine is shared), then the least-squares fit of the model."""
    rows = []
    row_bytes = []
    for tasks, computes in ((1, 0), (2, 0), (4, 0), (8, 0), (1, 4), (1, 8)):
        defn = chain(tasks, computes)
        env = envelope(defn)
        runs = [
            measure([defn], defn.name, None, args.store, args.executions) for _ in range(args.runs)
        ]
        got = sorted(runs, key=lambda m: m.executions_per_s)[len(runs) // 2]
        micros = 1e6 / got.executions_per_s
        decisions = float(len(env.steps) * env.cost.commits)
        rows.append((1.0, got.events, float(tasks), decisions, micros))
        if got.file_bytes:
            row_bytes.append((got.file_bytes / args.executions - got.json_bytes) / got.events)
        print(
            f"{defn.name:<10} {got.events:5.1f} events {tasks} dispatches "
            f"{decisions:4.0f} steps x commits  "
            f"{got.executions_per_s:8.0f} executions/s  {micros:8.1f} us each"
        )
    fixed, per_event, per_dispatch, per_step = fit(rows)
    print(
        f"execution_us={fixed:.1f}, event_us={per_event:.1f}, dispatch_us={per_dispatch:.1f}, "
        f"step_commit_us={per_step:.2f}"
    )
    if row_bytes:
        print(f"row_bytes={sum(row_bytes) / len(row_bytes):.0f} (file bytes per event beyond JSON)")
    return 0


def compare(args: argparse.Namespace) -> int:
    store_kind = "postgres" if args.store.startswith("postgres") else "sqlite"
    print(
        f"store {args.store} ({store_kind} model), {args.executions} executions each, "
        f"all in flight, median of {args.runs} runs"
    )
    header = f"{'workflow':<14} {'events':>15} {'executions/s':>24}  error"
    print(header)
    print(f"{'':<14} {'plan':>7} {'run':>7} {'predicted':>11} {'measured':>12}")
    for path, name, input, items in WORKLOADS:
        definitions = compile_paths([ROOT / path]).raise_on_errors()
        defn = next(d for d in definitions if d.name == name)
        plan = figures(envelope(defn, items=items), store_kind, None, None)
        runs = [
            measure(definitions, name, input, args.store, args.executions) for _ in range(args.runs)
        ]
        # The median run counts, and the spread is printed: the machine is shared.
        runs.sort(key=lambda m: m.executions_per_s)
        got = runs[len(runs) // 2]
        spread = f"{runs[0].executions_per_s:.0f}..{runs[-1].executions_per_s:.0f}"
        error = (plan.executions_per_s - got.executions_per_s) / got.executions_per_s
        print(
            f"{name:<14} {plan.events[0]:>7} {got.events:>7.0f} "
            f"{plan.executions_per_s:>11.0f} {got.executions_per_s:>12.0f}  {error:+.0%}"
            f"  (runs {spread})"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_plan", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store", default="/tmp/bench_plan.db", help="SQLite path or postgres:// URL"
    )
    parser.add_argument("--executions", type=int, default=2000)
    parser.add_argument("--calibrate", action="store_true", help="measure the model's constants")
    parser.add_argument("--runs", type=int, default=3, help="runs per point; the median counts")
    args = parser.parse_args(argv)
    assert STORES  # the model the comparison uses
    return run_calibration(args) if args.calibrate else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
