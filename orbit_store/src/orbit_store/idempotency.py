"""Idempotency keys on SQL (orbit_core/engine/idempotency.py has the rules).

`orbit_idempotency_keys` (schema.py) holds a row per key, upserted in the
transaction of the group whose start created its execution. Like the search
index it is a schema part of its own, "idempotency", recorded in
`orbit_schema_parts` and created by the first commit that writes a key, so a
database never given one keeps the book's tables only.

The upsert replaces a row only when it has expired: an unexpired key keeps
the execution it names. (One server never writes such a row, its engine
having answered the start with the existing execution; two servers of a
shared group racing with one key in the same instant both create an
execution and the first commit keeps the key, which
docs/language/flow-control.md states.) Expired rows are deleted by the
commit that writes a key, at most once a minute.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from orbit_core.ports import IdempotencyRow
from orbit_store import schema as s
from orbit_store.parts import LazyPart

COLUMNS = ("idem_key", "execution_id", "workflow", "input_digest", "created_ms", "expires_ms")
# pg_advisory_xact_lock's key for creating the part: "orbit" and a 4.
_LOCK_KEY = 0x6F72626974_04
SWEEP_EVERY_MS = 60_000


PART = LazyPart(
    "idempotency", "idempotency", s.orbit_idempotency_keys, s.IDEMPOTENCY_VERSION, _LOCK_KEY
)
exists = PART.exists
create_statements = PART.create_statements


def upsert_sql(dialect: Any) -> Any:
    t = s.orbit_idempotency_keys
    values: dict[str, Any] = {c: bindparam(c) for c in COLUMNS}
    kept = COLUMNS[1:]
    if dialect.name == "postgresql":
        pg = postgresql.insert(t).values(values)
        return pg.on_conflict_do_update(
            index_elements=["idem_key"],
            set_={c: pg.excluded[c] for c in kept},
            where=t.c.expires_ms < pg.excluded.created_ms,
        )
    lite = sqlite.insert(t).values(values)
    return lite.on_conflict_do_update(
        index_elements=["idem_key"],
        set_={c: lite.excluded[c] for c in kept},
        where=t.c.expires_ms < lite.excluded.created_ms,
    )


def sweep_sql() -> Any:
    t = s.orbit_idempotency_keys
    return t.delete().where(t.c.expires_ms < bindparam("now"))


def find_sql() -> Any:
    t = s.orbit_idempotency_keys
    return select(*[t.c[c] for c in COLUMNS]).where(
        t.c.idem_key == bindparam("k"), t.c.expires_ms >= bindparam("now")
    )


def row(r: IdempotencyRow) -> tuple[Any, ...]:
    return (r.key, r.execution_id, r.workflow, r.input_digest, r.created_ms, r.expires_ms)


def from_row(r: Any) -> IdempotencyRow:
    return IdempotencyRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), int(r[5]))
