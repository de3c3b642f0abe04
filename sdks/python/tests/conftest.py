from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Worker

ORBIT_VARIABLES = (
    "ORBIT_SERVER",
    "ORBIT_WORKER_TOKEN",
    "ORBIT_TOKEN",
    "ORBIT_CA_CERT",
    "ORBIT_CLIENT_CERT",
    "ORBIT_CLIENT_KEY",
    "ORBIT_LOG_LEVEL",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ORBIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeRuntime]:
    runtime = FakeRuntime()
    yield runtime
    runtime.close()


@pytest.fixture
def make_worker(fake: FakeRuntime) -> Callable[..., Worker]:
    """A Worker connected to the fake runtime, with a short poll for fast stops.

    Its retry delays have no jitter (each is the full ceiling), so tests can
    predict them; tests of the jitter replace worker._random.
    """

    def make(**options: Any) -> Worker:
        options.setdefault("poll_wait_ms", 300)
        options.setdefault("worker_id", "test-worker")
        options.setdefault("server", fake.url)
        worker = Worker(**options)
        worker._random = lambda: 1.0
        return worker

    return make


@pytest.fixture
def start_worker() -> Iterator[Callable[[Worker], Worker]]:
    """Runs a worker on its background thread and stops it after the test."""
    running: list[tuple[Worker, threading.Thread]] = []

    def start(worker: Worker) -> Worker:
        running.append((worker, worker.start()))
        return worker

    yield start
    for worker, thread in running:
        worker.stop()
        thread.join(timeout=10)
        assert not thread.is_alive(), "worker did not stop"
