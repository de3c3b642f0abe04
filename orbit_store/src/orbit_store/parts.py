"""Schema parts a database gets only when a feature first needs them
(beside the book's tables, recorded in `orbit_schema_parts`): the search
index (docs/language/visibility.md) and idempotency keys (docs/language/
flow-control.md). A database whose workflows never use the feature keeps
only the book's tables, and a newer version of a part than this code knows
is refused rather than written to.

A part's tables change through its version: `steps` bring an older
version's tables to the current shape, run by `prepare` when a store opens
(in the transaction that prepares the base tables; on PostgreSQL under the
part's lock, so two servers opening together migrate once), and the first
commit that needs a part which is not there creates it at the current
shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from sqlalchemy import Connection, Table, inspect, select, text
from sqlalchemy.schema import CreateIndex, CreateTable

from orbit_core.errors import StorageError
from orbit_store import schema as s

# What brings a part's tables from the version before to its own, on the
# connection of the open's transaction.
PartStep = Callable[[Connection], None]


@attrs.frozen(slots=True)
class LazyPart:
    """One such part: its table, its version and its row in
    `orbit_schema_parts`; `lock_key` serialises its creation on PostgreSQL
    (`pg_advisory_xact_lock`), where two servers may create it at once."""

    name: str  # the part's row in orbit_schema_parts, and in messages
    label: str  # what its tables hold, for the refusal of a newer version
    table: Table
    version: int
    lock_key: int
    # (version, step): what brings the tables from version-1 to version.
    steps: tuple[tuple[int, PartStep], ...] = ()
    # Tables the part has beside `table`, created before it (whether the
    # part is there is whether `table` is).
    also: tuple[Table, ...] = ()

    def exists(self, conn: Connection) -> bool:
        """Whether the part is there; refuses a newer version of it."""
        if not inspect(conn).has_table(self.table.name):
            return False
        found = self._recorded(conn)
        if found > self.version:
            raise StorageError(
                f"the database has {self.label} tables at version {found}, newer than this "
                f"server knows ({self.version}); run a release of orbit server that knows it"
            )
        return True

    def prepare(self, conn: Connection) -> bool:
        """`exists`, when a store opens (in its transaction): a part an
        earlier build left at an older version is first brought to this
        one by its `steps`, and the version reached recorded."""
        if not self.exists(conn):
            return False
        if self._recorded(conn) == self.version:
            return True
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": self.lock_key})
            # Read again under the lock: another server may have just done it.
            self.exists(conn)
        found = self._recorded(conn)
        for version, step in self.steps:
            if found < version <= self.version:
                step(conn)
        if found != self.version:
            conn.execute(
                text(
                    "INSERT INTO orbit_schema_parts (part, version) VALUES (:part, :version) "
                    "ON CONFLICT (part) DO UPDATE SET version = excluded.version"
                ),
                {"part": self.name, "version": self.version},
            )
        return True

    def _recorded(self, conn: Connection) -> int:
        """The version `orbit_schema_parts` records for the part, whose
        table exists (1 without a row: the tables of a part are created
        with their row, so only a build before parts were versioned leaves
        none)."""
        parts = s.schema_parts
        found = conn.execute(select(parts.c.version).where(parts.c.part == self.name)).scalar()
        return 1 if found is None else int(found)

    def create_statements(self, dialect: Any) -> list[str]:
        """What creates the part (idempotent), then records its version."""
        out = [str(CreateTable(s.schema_parts, if_not_exists=True).compile(dialect=dialect))]
        for table in (*self.also, self.table):
            out.append(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
            out += [
                str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect))
                for index in sorted(table.indexes, key=lambda i: str(i.name))
            ]
        out.append(
            "INSERT INTO orbit_schema_parts (part, version) "
            f"VALUES ('{self.name}', {self.version}) ON CONFLICT (part) DO NOTHING"
        )
        if dialect.name == "postgresql":
            out.insert(0, f"SELECT pg_advisory_xact_lock({self.lock_key})")
        return out
