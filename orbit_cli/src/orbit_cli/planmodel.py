"""`orbit plan`'s figures: an execution's envelope (orbit_core.envelope) turned
into storage growth and a throughput estimate.

Throughput model. An engine on one store spends, per execution, a fixed
part (the start, the end, the execution's row), a part per history event
(encoding it, its share of a group commit), a part per task dispatch (the
claim and the result's round trip through the handler threads) and a part
per step and commit: each commit runs the decider, which reads every step
of the workflow to find what is ready, so a workflow of many steps pays for
all of them at each of its commits. So the time of one execution, when many
run at once and commits are grouped, is modelled as

    seconds per execution = (EXECUTION_US + EVENT_US x events + DISPATCH_US x dispatches
                             + STEP_COMMIT_US x steps x commits) / 1e6

and the estimate is its inverse, in executions per second, for one server
process on this kind of machine. The constants were fitted by
`python benchmarks/bench_plan.py --calibrate` on the development machine
(two shared cores; the engine with two in-process handler threads, 2000
executions, all in flight, as benchmarks/bench_engine.py runs them): six
calibration workflows (chains of one to eight task steps; one task step and
four or eight compute steps) fitted by non-negative least squares. On
another machine run the calibration again and compare; `bench_plan.py`
without `--calibrate` prints predicted against measured for three bundled
workflows (docs/plan-and-envelope.md quotes the table).

Storage. The bytes the envelope counts are the events' compact JSON; a
store adds per event its row and index entries (`ROW_BYTES`, measured by
the calibration as the database file's size over the events it holds,
less their JSON), plus one execution row (`EXECUTION_ROW_BYTES`).
"""

from __future__ import annotations

import attrs

from orbit_core.envelope import Envelope


@attrs.frozen
class StoreModel:
    execution_us: float
    event_us: float
    dispatch_us: float
    step_commit_us: float  # per step of the workflow and commit of the run
    row_bytes: int  # per event, beyond its JSON
    execution_row_bytes: int


# Fitted on the development machine by bench_plan.py --calibrate (module docstring).
STORES = {
    "sqlite": StoreModel(
        execution_us=365.7,
        event_us=4.8,
        dispatch_us=95.7,
        step_commit_us=9.63,
        row_bytes=98,
        execution_row_bytes=0,
    ),
    # PostgreSQL started by tests/pgkit.py on the same machine (bench_plan.py
    # --calibrate --store postgres://...; CALIBRATION["postgres"]). The fit
    # leaves the per-step term at 0: on PostgreSQL the round trips of a
    # commit, not the decider, set the pace, so a chain of eight steps costs
    # about three times one step where SQLite's costs four. Bytes on disk
    # are not measured there (SQLite's figure stands in).
    "postgres": StoreModel(
        execution_us=550.6,
        event_us=15.5,
        dispatch_us=212.8,
        step_commit_us=0.0,
        row_bytes=100,
        execution_row_bytes=0,
    ),
}
# The calibration runs each store's constants were fitted on: (events,
# dispatches, steps x commits) -> the measured microseconds per execution,
# the median of three runs of 2000 executions (bench_plan.py --calibrate;
# the chains of one, two, four and eight task steps, and one task step and
# four or eight compute steps). tests keep the model within reach of them.
CALIBRATION: dict[str, dict[tuple[int, int, int], float]] = {
    "postgres": {
        (6, 1, 3): 827.6,
        (9, 2, 10): 993.6,
        (15, 4, 36): 1897.5,
        (27, 8, 136): 2575.5,
        (10, 1, 15): 883.3,
        (14, 1, 27): 997.4,
    },
}
DAY_S = 86_400


@attrs.frozen
class Figures:
    """One workflow's plan: per execution (typical, worst) and per day."""

    events: tuple[int, int | None]
    commits: tuple[int, int | None]
    dispatches: tuple[int, int | None]
    history_bytes: tuple[int, int | None]
    stored_bytes: int  # typical, with the store's own overhead
    executions_per_s: float  # the model's estimate on the typical path
    growth_per_day: int | None  # bytes a day at the start rate (None: no rate given)
    steady_state: int | None  # bytes kept with the retention (None: grows for ever)


def figures(
    env: Envelope, store: str, starts_per_s: float | None, retention_days: float | None
) -> Figures:
    model = STORES[store]
    cost = env.cost
    stored = cost.bytes + cost.events * model.row_bytes + model.execution_row_bytes
    micros = (
        model.execution_us
        + model.event_us * cost.events
        + model.dispatch_us * cost.dispatches
        + model.step_commit_us * len(env.steps) * cost.commits
    )
    growth = None if starts_per_s is None else round(stored * starts_per_s * DAY_S)
    steady = None
    if growth is not None and retention_days is not None:
        steady = round(growth * retention_days)
    return Figures(
        (cost.events, cost.worst_events),
        (cost.commits, cost.worst_commits),
        (cost.dispatches, cost.worst_dispatches),
        (cost.bytes, cost.worst_bytes),
        stored,
        1e6 / micros,
        growth,
        steady,
    )
