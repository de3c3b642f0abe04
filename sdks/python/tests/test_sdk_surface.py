"""The public surface: exports, TaskError, Context and the retry schedule."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import orbit_sdk
from orbit_sdk import ApiError, Context, TaskError
from orbit_sdk._backoff import Backoff


def test_exports_are_sorted_and_importable() -> None:
    assert orbit_sdk.__all__ == sorted(orbit_sdk.__all__)
    for name in orbit_sdk.__all__:
        assert hasattr(orbit_sdk, name)
    assert orbit_sdk.__version__ == "0.1.0"


def test_task_error_carries_its_fields() -> None:
    error = TaskError("CARD_DECLINED", "limit exceeded", retryable=False, details={"limit": 1})
    assert isinstance(error, Exception)
    assert (error.code, error.message, error.retryable, error.details) == (
        "CARD_DECLINED",
        "limit exceeded",
        False,
        {"limit": 1},
    )
    defaults = TaskError("BUSY")
    assert (defaults.message, defaults.retryable, defaults.details) == ("", True, None)


def test_api_error_text() -> None:
    error = ApiError(401, "UNAUTHENTICATED", "missing or invalid credentials")
    assert str(error) == "UNAUTHENTICATED (401): missing or invalid credentials"
    assert not error.is_connection_error
    assert ApiError(0, "CONNECTION", "x").is_connection_error


def _context(deadline_ms: int | None) -> Context:
    return Context._from_assignment(
        {
            "token": "t",
            "execution_id": "e",
            "workflow": "W",
            "workflow_version": "1.0.0",
            "step_id": "compensate:publish",
            "task_name": "greeting.unpublish",
            "contract_version": "1.0.0",
            "timeout_ms": 30000,
            "idempotency_key": "e/compensate:publish",
            "attempt": 3,
            "redelivery": False,
            "deadline_ms": deadline_ms,
        }
    )


def test_context_members() -> None:
    ctx = _context(None)
    assert (ctx.step_id, ctx.attempt, ctx.idempotency_key) == (
        "compensate:publish",
        3,
        "e/compensate:publish",
    )
    assert isinstance(ctx.cancelled, threading.Event)
    before = ctx.is_cancelled
    ctx.cancelled.set()
    assert (before, ctx.is_cancelled) == (False, True)
    # The contract version and the timeout stay out of the context.
    assert not hasattr(ctx, "contract_version")
    assert not hasattr(ctx, "timeout_ms")


def test_remaining_ms_counts_down_to_the_deadline_and_stops_at_zero() -> None:
    assert _context(None).remaining_ms() is None
    now_ms = int(time.time() * 1000)
    remaining = _context(now_ms + 5000).remaining_ms()
    assert remaining is not None
    assert 4000 < remaining <= 5000
    assert _context(now_ms - 1000).remaining_ms() == 0


def test_context_log_takes_any_field_name(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="orbit")
    _context(None).log("note", message="m", step="overridden")
    assert caplog.messages == [
        'note {"execution_id": "e", "step": "overridden", "attempt": 3, "message": "m"}'
    ]


def test_backoff_ceiling_doubles_from_200_ms_to_5_s() -> None:
    backoff = Backoff(lambda: 1.0)
    assert [backoff.next_delay() for _ in range(8)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.next_delay() == 0.2
