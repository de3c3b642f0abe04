"""PostgreSQL advisory locks are one namespace for the whole database: two
parts of the store that took the same key would wait on each other for no
reason (a search table's creation behind a retention sweep, say)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import orbit_store

KEY = re.compile(r"^\s*[A-Z_]*LOCK_KEY\s*=\s*(0x[0-9A-Fa-f_]+)", re.MULTILINE)


def test_every_advisory_lock_key_is_used_by_one_part_only() -> None:
    found: list[tuple[int, str]] = []
    for path in Path(orbit_store.__file__).parent.rglob("*.py"):
        for match in KEY.finditer(path.read_text()):
            found.append((int(match.group(1), 16), path.name))
    assert len(found) >= 7, found
    counts = Counter(key for key, _ in found)
    assert [f for f in found if counts[f[0]] > 1] == []
