"""A start or dispatch rate as a token bucket, kept as one number per key.

The bucket is the generic cell rate algorithm: a key earns one start every
`interval` (`per / max`, in microseconds, rounded up so the rate is never
exceeded) and may bank up to `burst` of them (`max` when no burst is
given). Its whole state is the theoretical arrival time `tat`: the instant
at which the bucket would be full again. A start at `now` may go when
`tat - now <= (burst - 1) * interval`, and moves `tat` to
`max(tat, now) + interval`. A key never seen, or whose `tat` has passed,
has a full bucket, so only keys used within the last `burst * interval`
carry any state at all.

A step's rate (engine/step_rate.py) promises tokens before it takes them:
a task is queued for workers only while the bucket holds a token for it
and for every task of its key already queued, and takes the token when a
worker is handed it. `available` and `ready_for` are that count and
its due time.

Pure: times come in as arguments (the engine's clock).
"""

from __future__ import annotations

from orbit_core.ir.definition import Rate

US_PER_MS = 1000


def interval_us(rate: Rate) -> int:
    return max(1, -(-rate.period_ms * US_PER_MS // rate.limit))


def capacity(rate: Rate) -> int:
    return rate.burst if rate.burst is not None else rate.limit


def take(tat_us: int, now_ms: int, rate: Rate) -> int | None:
    """The key's new `tat` when a start may go at `now_ms`, else None."""
    now_us = now_ms * US_PER_MS
    step = interval_us(rate)
    if tat_us - now_us > (capacity(rate) - 1) * step:
        return None
    return max(tat_us, now_us) + step


def charge(tat_us: int, now_ms: int, rate: Rate) -> int:
    """The key's new `tat` after one more token is spent at `now_ms`,
    whether or not the bucket had it (a dispatch that happened is counted)."""
    return max(tat_us, now_ms * US_PER_MS) + interval_us(rate)


def available(tat_us: int, now_ms: int, rate: Rate) -> int:
    """How many tokens the bucket holds at `now_ms` (0 to `capacity`)."""
    now_us = now_ms * US_PER_MS
    step = interval_us(rate)
    slack = (capacity(rate) - 1) * step - (max(tat_us, now_us) - now_us)
    return 0 if slack < 0 else slack // step + 1


def ready_ms(tat_us: int, rate: Rate) -> int:
    """The first millisecond at which `take` lets a start go."""
    at_us = tat_us - (capacity(rate) - 1) * interval_us(rate)
    return -(-at_us // US_PER_MS)


def ready_for(tat_us: int, rate: Rate, promised: int) -> int | None:
    """The first millisecond at which the bucket holds `promised + 1`
    tokens; None when that is more than it can ever hold (only a spent
    promise makes room then)."""
    room = capacity(rate) - 1 - promised
    if room < 0:
        return None
    at_us = tat_us - room * interval_us(rate)
    return -(-at_us // US_PER_MS)
