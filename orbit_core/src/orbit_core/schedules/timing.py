"""When a schedule's occurrences fall: a cron expression in a zone, or a
fixed interval aligned to `start_at` (or the Unix epoch), bounded by
`start_at` and `end_at`. Pure arithmetic on epoch milliseconds."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import attrs

from orbit_core.schedules.cron import Cron

# Counting missed cron occurrences stops here; what lies beyond is counted
# from the interval between the last two seen (a down time of years).
_MAX_COUNT = 1_000_000


@attrs.frozen(slots=True)
class Timing:
    cron: Cron | None
    interval_ms: int | None
    zone: ZoneInfo | None
    start_ms: int | None
    end_ms: int | None

    def next_after(self, after_ms: int) -> int | None:
        """The first occurrence strictly after `after_ms`, or None (ended)."""
        if self.start_ms is not None and after_ms < self.start_ms:
            after_ms = self.start_ms - 1
        if self.interval_ms is not None:
            anchor = self.start_ms if self.start_ms is not None else 0
            if after_ms < anchor:
                found: int | None = anchor
            else:
                found = anchor + ((after_ms - anchor) // self.interval_ms + 1) * self.interval_ms
        else:
            assert self.cron is not None
            found = self.cron.next_after(after_ms, self.zone)
        if found is None or (self.end_ms is not None and found > self.end_ms):
            return None
        return found

    def upcoming(self, first: int | None, count: int) -> list[int]:
        """`first` and the occurrences after it, `count` in all."""
        out: list[int] = []
        at = first
        while at is not None and len(out) < count:
            out.append(at)
            at = self.next_after(at)
        return out

    def due_between(self, pending: int, now: int) -> tuple[int, int, int | None]:
        """The occurrences from `pending` up to `now`: how many, the latest,
        and the one before it (`pending <= now`)."""
        if self.interval_ms is not None:
            anchor = self.start_ms if self.start_ms is not None else 0
            limit = now if self.end_ms is None else min(now, self.end_ms)
            last = max(pending, anchor + (limit - anchor) // self.interval_ms * self.interval_ms)
            count = (last - pending) // self.interval_ms + 1
            return count, last, (last - self.interval_ms if count > 1 else None)
        count, last, before = 1, pending, None
        while count < _MAX_COUNT:
            following = self.next_after(last)
            if following is None or following > now:
                return count, last, before
            count, last, before = count + 1, following, last
        # Beyond the cap: jump close to `now` and estimate the count in between.
        assert before is not None
        step = max(last - before, 1)
        final = last
        at = self.next_after(max(last, now - 2 * step))
        while at is not None and at <= now:
            final = at
            at = self.next_after(at)
        return count + max(0, (final - last) // step), final, None
