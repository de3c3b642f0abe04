"""Running workflows in-process with simulated time: for pytest suites,
`orbit test` and the engine's own tests.

    from orbit_core.testing import SimulatedClock, simulated_engine

    engine = simulated_engine()
    engine.deploy(definition)
    engine.register_handler("greeting.compose", "1.0.0", lambda i: {"message": "hi"})
    engine.start("Hello", input={"name": "Ada"}, execution_id="t-1")
    run_until_idle(engine)          # runs handlers and jumps the clock to each due time

A pytest fixture is one line: `@pytest.fixture` returning `simulated_engine()`
(close it afterwards); or use the `orbit_engine` fixture this module exposes
as a pytest plugin, registered by orbit-core's `pytest11` entry point so a
user's suite has it without `-p`.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from orbit_core.decide import Limits
from orbit_core.engine import Engine
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import IdSource, Store

EPOCH_2026_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, where `orbit test` starts


class SimulatedClock:
    """A clock that moves only when told to. Engines subscribe to it and run
    their periodic tick on every `advance`."""

    def __init__(self, start_ms: int = EPOCH_2026_MS) -> None:
        self._now = start_ms
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def now_ms(self) -> int:
        return self._now

    def subscribe(self, listener: Callable[[], None]) -> bool:
        with self._lock:
            self._listeners.append(listener)
        return True

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    @property
    def subscribers(self) -> int:
        """How many engines tick on this clock (closed ones have left)."""
        return len(self._listeners)

    def advance(self, ms: int) -> None:
        """Moves time forward by `ms` and lets every engine tick."""
        with self._lock:
            self._now += ms
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def advance_to(self, at_ms: int) -> None:
        self.advance(max(0, at_ms - self._now))


class SequentialIds:
    """Deterministic identifiers: `tok-1`, `session-1`, `exec-1`, ... Share one
    between the engines of a simulated restart, as real ids never repeat."""

    def __init__(self) -> None:
        self._tokens = itertools.count(1)
        self._executions = itertools.count(1)
        self._sessions = itertools.count(1)

    def token(self) -> str:
        return f"tok-{next(self._tokens)}"

    def execution_id(self) -> str:
        return f"exec-{next(self._executions)}"

    def session_id(self) -> str:
        return f"session-{next(self._sessions)}"


def simulated_engine(
    store: Store | None = None,
    clock: SimulatedClock | None = None,
    *,
    limits: Limits | None = None,
    ids: IdSource | None = None,
    **options: Any,
) -> Engine:
    """An engine on simulated time whose in-process handlers run on the
    caller's thread (deterministic: same inputs, same events)."""
    return Engine(
        store if store is not None else MemoryStore(),
        clock if clock is not None else SimulatedClock(),
        ids if ids is not None else SequentialIds(),
        limits=limits,
        handler_threads=0,
        **{"pipeline": False, **options},
    )


def run_until_idle(engine: Engine, max_ms: int = 365 * 24 * 3600 * 1000) -> int:
    """Runs in-process handlers and skips the clock to each due time until
    nothing is left to do (or `max_ms` of simulated time passed). Returns the
    simulated milliseconds that elapsed."""
    clock = engine.clock
    if not isinstance(clock, SimulatedClock):
        raise TypeError("run_until_idle needs an engine on a SimulatedClock")
    start = clock.now_ms()
    while True:
        engine.run_handlers()
        due = engine.next_due_ms()
        if due is None or due - start > max_ms:
            return clock.now_ms() - start
        clock.advance_to(max(due, clock.now_ms() + 1) if due <= clock.now_ms() else due)


try:  # a pytest plugin when pytest is around
    import pytest

    @pytest.fixture
    def orbit_engine() -> Iterator[Engine]:
        """A fresh simulated engine per test (in-memory store, simulated clock)."""
        engine = simulated_engine()
        try:
            yield engine
        finally:
            engine.close()

except ImportError:  # pragma: no cover - pytest is a test-time dependency
    pass
