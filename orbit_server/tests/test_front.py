"""The front process's pieces that need no server: the channel's frames,
and what the front imports (tests/test_server_worker_loop.py runs the
front itself, behind a real server)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from orbit_server.front import Channel


@pytest.fixture
def pair() -> Iterator[tuple[Channel, Channel]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        yield Channel(a), Channel(b)


def test_frames_arrive_whole_and_in_order_across_partial_reads(
    pair: tuple[Channel, Channel],
) -> None:
    left, right = pair
    big = b"x" * (3 * 1024 * 1024)
    left.put([(1, "a", None)])
    left.put([(2, big), (3, b"")])
    received: list[tuple[object, ...]] = []
    # Write and read in turns, as two loops would: the big frame cannot
    # be written in one go.
    for _ in range(1000):
        done = left.flush()
        received.extend(right.read())
        if done and len(received) == 3:
            break
    assert received == [(1, "a", None), (2, big), (3, b"")]
    assert not right.eof


def test_a_closed_peer_reads_as_the_end_of_the_channel(pair: tuple[Channel, Channel]) -> None:
    left, right = pair
    left.put([(1,)])
    assert left.flush()
    left.sock.close()
    assert right.read() == [(1,)]
    assert right.eof


def test_the_front_imports_neither_the_engine_nor_the_web_framework() -> None:
    """The front is its own process; what it imports is its start-up time
    and its memory."""
    code = (
        "import sys, orbit_server.front; "
        "print(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'orbit_core', 'orbit_store', 'falcon', 'gunicorn', 'sqlalchemy', 'structlog'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.strip() == "[]"
