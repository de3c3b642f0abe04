"""The token bucket of flow/rate.py: `available` and `ready_for` agree with
`take` (a step's rate promises tokens with them and spends them with
`charge`), checked against every sequence of takes on a small grid."""

from __future__ import annotations

import pytest

from orbit_core.flow import rate
from orbit_core.ir.definition import Rate


@pytest.mark.parametrize(
    "limit", [Rate(2, 60_000), Rate(1, 10_000, burst=3), Rate(3, 1_000, burst=5), Rate(7, 1)]
)
def test_available_counts_the_takes_that_would_succeed(limit: Rate) -> None:
    for now in (0, 1, 333, 5_000, 60_000):
        for tat in (0, now * 1000, now * 1000 + 7, now * 1000 + 59_999_999, 10**11):
            count, t = 0, tat
            while (t2 := rate.take(t, now, limit)) is not None:
                t, count = t2, count + 1
                assert count <= rate.capacity(limit)
            assert rate.available(tat, now, limit) == count


@pytest.mark.parametrize("limit", [Rate(2, 60_000), Rate(1, 10_000, burst=3), Rate(3, 1_000)])
def test_ready_for_is_the_first_millisecond_with_that_many_tokens(limit: Rate) -> None:
    tat = 123_456_789
    for promised in range(rate.capacity(limit) + 2):
        at = rate.ready_for(tat, limit, promised)
        if promised >= rate.capacity(limit):
            assert at is None
            continue
        assert at is not None
        assert rate.available(tat, at, limit) >= promised + 1
        assert rate.available(tat, at - 1, limit) < promised + 1
    assert rate.ready_for(tat, limit, 0) == rate.ready_ms(tat, limit)


def test_charge_spends_a_token_even_from_an_empty_bucket() -> None:
    limit = Rate(2, 60_000)  # one token every 30 s
    assert rate.charge(0, 1_000, limit) == 31_000_000
    assert rate.available(rate.charge(0, 1_000, limit), 1_000, limit) == 1
    empty = 1_000_000 + 60_000_000
    assert rate.available(empty, 1_000, limit) == 0
    assert rate.charge(empty, 1_000, limit) == empty + 30_000_000
