"""Schema parts a database gets only when a feature first needs them
(beside the book's tables, recorded in `orbit_schema_parts`): the search
index (docs/language/visibility.md) and idempotency keys (docs/language/
flow-control.md). A database whose workflows never use the feature keeps
only the book's tables, and a newer version of a part than this code knows
is refused rather than written to."""

from __future__ import annotations

from typing import Any

import attrs
from sqlalchemy import Connection, Table, inspect, select
from sqlalchemy.schema import CreateIndex, CreateTable

from orbit_core.errors import StorageError
from orbit_store import schema as s


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

    def exists(self, conn: Connection) -> bool:
        """Whether the part is there; refuses a newer version of it."""
        if not inspect(conn).has_table(self.table.name):
            return False
        parts = s.schema_parts
        found = conn.execute(select(parts.c.version).where(parts.c.part == self.name)).scalar()
        if found is not None and int(found) > self.version:
            raise StorageError(
                f"the database has {self.label} tables at version {found}, newer than this "
                f"server knows ({self.version}); run a release of orbit server that knows it"
            )
        return True

    def create_statements(self, dialect: Any) -> list[str]:
        """What creates the part (idempotent), then records its version."""
        out = [
            str(CreateTable(s.schema_parts, if_not_exists=True).compile(dialect=dialect)),
            str(CreateTable(self.table, if_not_exists=True).compile(dialect=dialect)),
        ]
        out += [
            str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect))
            for index in sorted(self.table.indexes, key=lambda i: str(i.name))
        ]
        out.append(
            "INSERT INTO orbit_schema_parts (part, version) "
            f"VALUES ('{self.name}', {self.version}) ON CONFLICT (part) DO NOTHING"
        )
        if dialect.name == "postgresql":
            out.insert(0, f"SELECT pg_advisory_xact_lock({self.lock_key})")
        return out
