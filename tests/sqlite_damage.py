"""Damage done to a SQLite file on purpose, for the tests that check a
corrupt database is refused (the store's own tests and a real server's).
Only the standard library and pytest: orbit_store's tests reach this module
through sys.path, as they reach pgkit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


def corrupt_an_event_page(db: Path) -> None:
    """Overwrites one leaf page of `execution_events` with garbage; skips the
    test where SQLite was built without the `dbstat` table that finds it."""
    conn = sqlite3.connect(db)
    try:
        pages = conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'execution_events' AND pagetype = 'leaf'"
        ).fetchall()
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        conn.close()
    page = pages[len(pages) // 2][0]
    with db.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(bytes(range(256)) * (size // 256))
