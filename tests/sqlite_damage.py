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


def corrupt_a_table_under_its_users(db: Path, table: str) -> None:
    """Overwrites every page of `table` in a database a store has open, so
    that the store's next statement on the table reads garbage: the WAL is
    checkpointed into the file first (so the file holds every page's latest
    version), and a harmless write afterwards makes every other connection
    drop the pages it had cached. Skips like `corrupt_an_event_page`."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        assert busy == 0, "the checkpoint was blocked by a reader"
        try:
            pages = conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (table,)).fetchall()
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table")
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        with db.open("r+b") as f:
            for (page,) in pages:
                f.seek((page - 1) * size)
                f.write(bytes(range(256)) * (size // 256))
        conn.execute("UPDATE schema_version SET version = version")
    finally:
        conn.close()
