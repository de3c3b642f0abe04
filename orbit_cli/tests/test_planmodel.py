"""The throughput model of `orbit plan` (orbit_cli/planmodel.py): one shape
for every store, costs that only add, and constants that reproduce the
calibration runs they were fitted on (docs/plan-and-envelope.md)."""

from __future__ import annotations

import attrs
import pytest

from orbit_cli.planmodel import CALIBRATION, STORES, StoreModel


def micros(model: StoreModel, events: int, dispatches: int, decisions: int) -> float:
    return (
        model.execution_us
        + model.event_us * events
        + model.dispatch_us * dispatches
        + model.step_commit_us * decisions
    )


@pytest.mark.parametrize("store", sorted(STORES))
def test_every_cost_is_a_positive_or_zero_figure(store: str) -> None:
    model = STORES[store]
    for name, value in attrs.asdict(model).items():
        assert value >= 0, name
    # A fixed part and a part per event at least: without them the model
    # would promise unbounded throughput for small workflows.
    assert model.execution_us > 0
    assert model.event_us > 0


@pytest.mark.parametrize("store", sorted(CALIBRATION))
def test_the_constants_reproduce_their_calibration_runs(store: str) -> None:
    # A fit over six points of a four-term model: each point within a third
    # (the machine they ran on is shared), and the whole set without bias.
    model = STORES[store]
    errors = []
    for (events, dispatches, decisions), measured in CALIBRATION[store].items():
        predicted = micros(model, events, dispatches, decisions)
        errors.append((predicted - measured) / measured)
        assert abs(errors[-1]) < 1 / 3, (events, dispatches, decisions, predicted, measured)
    assert abs(sum(errors) / len(errors)) < 0.1


def test_postgres_is_calibrated_on_its_own() -> None:
    # Not SQLite's constants copied over, nor the pre-calibration guesses.
    assert STORES["postgres"] != STORES["sqlite"]
    assert "postgres" in CALIBRATION
