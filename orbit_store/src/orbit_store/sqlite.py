"""The SQLite store: one file in WAL mode with `synchronous=FULL`, so every
committed group survives power loss. One connection writes; another reads,
which WAL lets run while a commit is in progress. `:memory:` (a database that
lives in its connection) uses one connection for both."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.pool import QueuePool, StaticPool

from orbit_store.sql import SqlStore


class SqliteStore(SqlStore):
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        in_memory = self.path in ("", ":memory:") or "mode=memory" in self.path
        engine = create_engine(
            f"sqlite+pysqlite:///{self.path}",
            connect_args={"check_same_thread": False},
            poolclass=StaticPool if in_memory else QueuePool,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        super().__init__(engine, separate_reads=not in_memory)
