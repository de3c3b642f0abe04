"""The fault campaign's clock hook: an offset read from a file, changed at run time."""

from __future__ import annotations

import os
import time
from pathlib import Path

from orbit_core.ports import SystemClock
from orbit_server.skewed_clock import ENV, SkewedClock, clock_from_env


def _touch(path: Path, text: str, bump_ns: int) -> None:
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump_ns))


def test_without_the_variable_the_host_clock_is_used() -> None:
    assert isinstance(clock_from_env({}), SystemClock)


def test_the_offset_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "offset"
    clock = clock_from_env({ENV: str(path)})
    assert isinstance(clock, SkewedClock)
    assert clock.offset_ms() == 0  # no file yet
    _touch(path, "-30000\n", 1)
    clock._checked_ns = -(10**12)  # the next read looks at the file
    assert clock.offset_ms() == -30000
    assert abs(clock.now_ms() - (time.time_ns() // 1_000_000 - 30000)) < 1000
    _touch(path, "not a number", 2)
    clock._checked_ns = -(10**12)
    assert clock.offset_ms() == 0
    path.unlink()
    clock._checked_ns = -(10**12)
    assert clock.offset_ms() == 0


def test_the_file_is_not_read_on_every_call(tmp_path: Path) -> None:
    path = tmp_path / "offset"
    path.write_text("5000")
    clock = SkewedClock(path)
    assert clock.offset_ms() == 5000
    _touch(path, "7000", 10**9)
    assert clock.offset_ms() == 5000  # within 100 ms of the last look
