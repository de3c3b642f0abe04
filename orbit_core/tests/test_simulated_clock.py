"""The simulated clock's subscriptions: engines of a simulated restart share
one clock, and a closed engine stops being called at each advance."""

from __future__ import annotations

from orbit_core.memory_store import MemoryStore
from orbit_core.testing import SequentialIds, SimulatedClock, simulated_engine


def test_a_closed_engine_leaves_the_clock() -> None:
    store, clock, ids = MemoryStore(), SimulatedClock(), SequentialIds()
    for _ in range(3):
        engine = simulated_engine(store, clock, ids=ids)
        # The engine's tick and its schedules' each listen.
        assert clock.subscribers == 2
        engine.close()
        assert clock.subscribers == 0
    clock.advance(1_000)


def test_unsubscribing_an_unknown_listener_is_ignored() -> None:
    clock = SimulatedClock()
    calls: list[int] = []
    clock.subscribe(lambda: calls.append(1))
    clock.unsubscribe(lambda: None)
    clock.advance(5)
    assert calls == [1]
