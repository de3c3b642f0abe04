"""A wall clock that can be shifted while the server runs: the fault
campaign's clock-offset fault (issue 40; docs/reliability.md).

`ORBIT_TEST_CLOCK_OFFSET_FILE` names a file holding a signed number of
milliseconds that is added to the host's time. The file is looked at (its
modification time) at most every 100 ms, so a campaign can move one
server's clock forward or back mid-run without restarting it, which
libfaketime cannot do for a process that is already running. A missing,
empty or unreadable file means no offset. It is a testing hook: without the
variable the server uses `SystemClock` and nothing here runs.

Only the engine's clock moves (timers, event times, schedules, retention's
"now"): leases and liveness are judged by PostgreSQL's clock and by
monotonic time, which is exactly what the fault is meant to show.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from orbit_core.ports import Clock, SystemClock

ENV = "ORBIT_TEST_CLOCK_OFFSET_FILE"
_RECHECK_NS = 100_000_000


class SkewedClock:
    """The host's time plus the offset in `path`."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._checked_ns = -_RECHECK_NS
        self._mtime_ns: int | None = None
        self._offset_ms = 0

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms()

    def subscribe(self, listener: Callable[[], None]) -> bool:
        return False

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        return None

    def offset_ms(self) -> int:
        now = time.monotonic_ns()
        with self._lock:
            if now - self._checked_ns >= _RECHECK_NS:
                self._checked_ns = now
                self._reload()
            return self._offset_ms

    def _reload(self) -> None:
        try:
            mtime = self._path.stat().st_mtime_ns
        except OSError:
            self._mtime_ns, self._offset_ms = None, 0
            return
        if mtime == self._mtime_ns:
            return
        self._mtime_ns = mtime
        try:
            self._offset_ms = int(self._path.read_text().strip() or "0")
        except (OSError, ValueError):
            self._offset_ms = 0


def clock_from_env(env: Mapping[str, str] = os.environ) -> Clock:
    path = env.get(ENV)
    return SkewedClock(Path(path)) if path else SystemClock()
