"""Deterministic jitter: the same delay for a schedule and occurrence on
every server and after every restart, spread evenly below the bound."""

from __future__ import annotations

import hashlib


def jitter_ms(schedule_id: str, occurrence_ms: int, bound_ms: int | None) -> int:
    """A delay in [0, bound_ms) derived from a hash of the schedule and occurrence."""
    if not bound_ms or bound_ms <= 0:
        return 0
    digest = hashlib.sha256(f"{schedule_id}\n{occurrence_ms}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % bound_ms
