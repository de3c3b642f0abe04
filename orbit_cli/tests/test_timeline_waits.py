"""How `orbit logs` and `orbit simulate` print a flow-control wait."""

from __future__ import annotations

from orbit_cli.timeline import event_line


def _waiting(reason: str, limit: int) -> dict[str, object]:
    return {
        "type": "WorkflowWaiting",
        "seq": 2,
        "timestamp_ms": 1_000,
        "reason": reason,
        "key": "c-1",
        "label": "customer_id",
        "limit": limit,
        "ticket": 1,
    }


def test_a_debounce_wait_prints_no_limit() -> None:
    line = event_line(_waiting("debounce", 0), 1_000)
    assert "reason=debounce" in line
    assert "limit" not in line


def test_a_concurrency_wait_prints_its_limit() -> None:
    line = event_line(_waiting("concurrency", 5), 1_000)
    assert line.endswith("reason=concurrency limit=5")
