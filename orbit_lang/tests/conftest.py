"""Each compiler test runs with the recursion limit `orbit` raises at
start-up (orbit_lang.process): sources nest up to 100 levels. It is put
back afterwards, so tests of other packages run in the same process keep
the interpreter's default."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from orbit_lang.process import allow_deep_sources


@pytest.fixture(autouse=True)
def _deep_sources() -> Iterator[None]:
    limit = sys.getrecursionlimit()
    allow_deep_sources()
    yield
    sys.setrecursionlimit(limit)
