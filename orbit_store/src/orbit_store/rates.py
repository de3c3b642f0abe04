"""Start-rate buckets on SQL (orbit_core/engine/start_gates.py has the rules).

`orbit_flow_rates` (schema.py) holds a row per workflow and key, upserted
in the transaction of the group whose start took a token, so the bucket a
restarted server reads is the one its last commit left. A schema part of
its own, "flow_rates", created by the first commit that writes a bucket; a
database whose workflows declare no `rate` keeps the book's tables only.
Rows whose time has passed describe a full bucket, the same as no row:
the commit that writes buckets deletes them, at most once a minute (by the
engine's time, which the rows carry: a simulated clock sweeps right too).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from orbit_core.ports import RateRow
from orbit_store import schema as s
from orbit_store.parts import LazyPart

COLUMNS = ("workflow", "rate_key", "tat_us")
# pg_advisory_xact_lock's key for creating the part: "orbit" and a 7 (each part has its own; see test_store_lock_keys.py).
_LOCK_KEY = 0x6F72626974_07
SWEEP_EVERY_MS = 60_000

PART = LazyPart("flow_rates", "start-rate", s.orbit_flow_rates, s.FLOW_RATES_VERSION, _LOCK_KEY)
exists = PART.exists
create_statements = PART.create_statements


def upsert_sql(dialect: Any) -> Any:
    t = s.orbit_flow_rates
    values: dict[str, Any] = {c: bindparam(c) for c in COLUMNS}
    if dialect.name == "postgresql":
        pg = postgresql.insert(t).values(values)
        return pg.on_conflict_do_update(
            index_elements=["workflow", "rate_key"], set_={"tat_us": pg.excluded.tat_us}
        )
    lite = sqlite.insert(t).values(values)
    return lite.on_conflict_do_update(
        index_elements=["workflow", "rate_key"], set_={"tat_us": lite.excluded.tat_us}
    )


def sweep_sql() -> Any:
    t = s.orbit_flow_rates
    return t.delete().where(t.c.tat_us < bindparam("now_us"))


def load_sql() -> Any:
    t = s.orbit_flow_rates
    return select(t.c.workflow, t.c.rate_key, t.c.tat_us)


def row(r: RateRow) -> tuple[Any, ...]:
    return (r.workflow, r.key, r.tat_us)


def from_row(r: Any) -> RateRow:
    return RateRow(str(r[0]), str(r[1]), int(r[2]))
