"""Retry delays: capped exponential growth with full jitter from an injected source."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import pytest
from sdk_fake_runtime import FakeRuntime

from orbit_sdk import Context, Worker
from orbit_sdk._backoff import Backoff

UNAVAILABLE = (503, {"error": {"code": "NOT_LEADER", "message": "this server is a standby"}})


def test_each_delay_is_drawn_below_a_doubling_ceiling_capped_at_5s() -> None:
    draws = iter([0.5, 0.25, 1.0, 0.0, 0.5, 0.5, 0.5, 0.9, 0.5])
    backoff = Backoff(lambda: next(draws))
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays == pytest.approx([0.1, 0.1, 0.8, 0.0, 1.6, 2.5, 2.5, 4.5])
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.1)


def test_workers_that_fail_together_do_not_retry_in_lockstep() -> None:
    schedules = []
    for seed in range(20):
        backoff = Backoff(random.Random(seed).random)
        schedules.append(tuple(round(backoff.next_delay(), 6) for _ in range(6)))
    assert len(set(schedules)) == 20
    ceilings = (0.2, 0.4, 0.8, 1.6, 3.2, 5.0)
    for schedule in schedules:
        assert all(0 <= delay <= ceiling for delay, ceiling in zip(schedule, ceilings))


def test_the_worker_draws_its_jitter_from_the_injected_source(
    fake: FakeRuntime,
    make_worker: Callable[..., Worker],
    start_worker: Callable[[Worker], Worker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The second failure is logged at WARNING only when something answered
    # in between (a heartbeat), else at DEBUG (orbit_sdk._contact): both
    # levels are captured, so the waits do not depend on that timing.
    caplog.set_level(logging.DEBUG, logger="orbit")
    worker = make_worker(concurrency=1)
    worker._random = lambda: 0.5

    @worker.task("a.one")
    def echo(input: object, ctx: Context) -> dict[str, object]:
        return {}

    fake.script("/v1/workers/poll", UNAVAILABLE, UNAVAILABLE)
    start_worker(worker)
    token = fake.enqueue("a.one", {})

    fake.result(token)
    waits = [m.rsplit(" ", 1)[1] for m in caplog.messages if m.startswith("poll failed")]
    assert waits == ["0.1s", "0.2s"]
