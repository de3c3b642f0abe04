"""The search index on SQL: written in the group's transaction, queried in SQL.

`orbit_search_values` (schema.py) holds one row per execution and declared
search field, the field named by its id in `orbit_search_fields` (one per
workflow and field name). A group commit that carries rows
(`ExecutionChange.search`) upserts them with the group's events, in the
same transaction, so a filter reads its own writes: no second store, no
lag; a field's first value gives it its id in that transaction too
(`name_fields`). The two tables are the "search" schema part: the first
commit that has a row creates them (with the part's version in
`orbit_schema_parts`), so a database whose workflows never declare a field
keeps the book's tables only. Version 2 made the two value indexes partial
(`_to_2`), version 3 replaced the rows' workflow and field names by the id
(`_to_3`); a store that opens on an older version brings it up to date.

`select_page` turns a typed filter (orbit_core.visibility.check) into one
SELECT on `workflow_executions`: a built-in field is a column of it, a
declared field an `execution_id IN (SELECT ... FROM orbit_search_values
WHERE field_id IN (<the ids of the field in its workflows>) AND <column>
<op> ..)` that the (field_id, value) indexes answer. Nothing is filtered in
Python.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    bindparam,
    false,
    not_,
    or_,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from orbit_core.state import TERMINAL
from orbit_core.visibility.check import AllOf, AnyOf, Condition, Filter, NoneOf
from orbit_core.visibility.page import SearchQuery
from orbit_store import schema as s
from orbit_store.parts import LazyPart

_COLUMNS = ("execution_id", "field_id", "str_value", "num_value")
_BUILTIN_COLUMNS = {
    "status": "status",
    "workflow": "workflow",
    "version": "version",
    "started": "created_at_ms",
    "ended": "updated_at_ms",
}
# pg_advisory_xact_lock's key for creating the part: "orbit" and a 6.
_LOCK_KEY = 0x6F72626974_06


# Version 2's value indexes, the shape `_to_2` makes (the same text on both
# dialects): keyed by the workflow's and field's names.
_V2_INDEXES = (
    "CREATE INDEX orbit_search_num ON orbit_search_values (workflow, field, num_value) "
    "WHERE num_value IS NOT NULL",
    "CREATE INDEX orbit_search_str ON orbit_search_values (workflow, field, str_value) "
    "WHERE str_value IS NOT NULL",
)


def _to_2(conn: Connection) -> None:
    """Version 2: the two value indexes are partial (`IS NOT NULL`, see
    schema.py). Builds of version 1 made them whole, an entry for every
    row's null in the column it does not fill, and later ones made them
    partial at the same version, so either kind may be there: both are
    made again as version 2 has them."""
    for statement in _V2_INDEXES:
        conn.execute(text(f"DROP INDEX IF EXISTS {statement.split()[2]}"))
        conn.execute(text(statement))


def _to_3(conn: Connection) -> None:
    """Version 3: a row names its field by `orbit_search_fields`' id instead
    of the workflow's and field's names. Every (workflow, field) of the rows
    gets its id, and the rows are copied into the new table, in the open's
    transaction (the old table, renamed, is dropped after)."""
    fields = s.orbit_search_fields
    conn.execute(CreateTable(fields))
    conn.execute(
        text(
            "INSERT INTO orbit_search_fields (workflow, field) "
            "SELECT DISTINCT workflow, field FROM orbit_search_values ORDER BY workflow, field"
        )
    )
    # An index keeps its name when its table is renamed: the old ones go first.
    for statement in _V2_INDEXES:
        conn.execute(text(f"DROP INDEX IF EXISTS {statement.split()[2]}"))
    if conn.dialect.name == "postgresql":
        # The primary key's constraint and index keep theirs too.
        conn.execute(
            text(
                "ALTER TABLE orbit_search_values "
                "RENAME CONSTRAINT orbit_search_values_pkey TO orbit_search_values_v2_pkey"
            )
        )
    conn.execute(text("ALTER TABLE orbit_search_values RENAME TO orbit_search_values_v2"))
    values = s.orbit_search_values
    conn.execute(CreateTable(values))
    for index in sorted(values.indexes, key=lambda i: str(i.name)):
        conn.execute(CreateIndex(index))
    conn.execute(
        text(
            "INSERT INTO orbit_search_values (execution_id, field_id, str_value, num_value) "
            "SELECT v.execution_id, f.field_id, v.str_value, v.num_value "
            "FROM orbit_search_values_v2 v JOIN orbit_search_fields f "
            "ON f.workflow = v.workflow AND f.field = v.field"
        )
    )
    conn.execute(text("DROP TABLE orbit_search_values_v2"))


PART = LazyPart(
    "search",
    "search",
    s.orbit_search_values,
    s.SEARCH_VERSION,
    _LOCK_KEY,
    ((2, _to_2), (3, _to_3)),
    also=(s.orbit_search_fields,),
)
exists = PART.exists
prepare = PART.prepare
create_statements = PART.create_statements


def upsert_sql(dialect: Any) -> Any:
    """INSERT ... ON CONFLICT (execution_id, field_id) DO UPDATE: a later
    value (a new run's input, a step run again) replaces the earlier one."""
    t = s.orbit_search_values
    values: dict[str, Any] = {c: bindparam(c) for c in _COLUMNS}
    if dialect.name == "postgresql":
        pg = postgresql.insert(t).values(values)
        return pg.on_conflict_do_update(
            index_elements=["execution_id", "field_id"],
            set_={c: pg.excluded[c] for c in ("str_value", "num_value")},
        )
    lite = sqlite.insert(t).values(values)
    return lite.on_conflict_do_update(
        index_elements=["execution_id", "field_id"],
        set_={c: lite.excluded[c] for c in ("str_value", "num_value")},
    )


# SQLite's upsert of one row; `sqlite_upsert(n)` repeats its VALUES for n
# rows in one statement. Rows come as `upsert_sql`'s, but for a missing
# value: a text as 0 and a number as NaN, both stored as NULL (SQLite binds
# NaN as NULL), as a None costs the sqlite3 module an adapter lookup per
# parameter.
#
# A group's rows go in statements of 64, 16, 4 and 1 rows (SQLITE_CHUNKS:
# few distinct texts, so the sqlite3 module's statement cache keeps them
# all). Row by row, each row paid for a statement's step and reset and a
# release of the GIL: the chunks take about 4,500 instructions off a row
# (`bench_visibility.py --counted`: 56,000 added a start, now 47,000). A
# statement of several rows into an indexed table keeps a
# statement journal (a copy of each page it changes, so that it can undo
# its earlier rows if a later one fails), which past 64 KiB spilt to a
# temporary file: `bench_visibility.py --commit` timed that at 13 us an
# execution against 10 us row by row. The writing connection therefore
# keeps its journals in memory (`SqliteStore.transaction_scope`), and the
# copy is a memcpy.
SQLITE_UPSERT = (
    f"INSERT INTO orbit_search_values ({', '.join(_COLUMNS)}) VALUES (?, ?, NULLIF(?, 0), ?)"
    " ON CONFLICT (execution_id, field_id) DO UPDATE SET "
    "str_value = excluded.str_value, num_value = excluded.num_value"
)

SQLITE_CHUNKS = (64, 16, 4, 1)


@functools.cache
def sqlite_upsert(rows: int) -> str:
    """`SQLITE_UPSERT` for `rows` rows in one statement."""
    if rows == 1:
        return SQLITE_UPSERT
    head, tail = SQLITE_UPSERT.split(" ON CONFLICT ")
    values = head[head.index("(?") :]
    return f"{head}{(', ' + values) * (rows - 1)} ON CONFLICT {tail}"


# Gives a (workflow, field) its id, unless it has one (`name_fields`).
NAME_FIELD = (
    "INSERT INTO orbit_search_fields (workflow, field) VALUES ({0}, {0}) "
    "ON CONFLICT (workflow, field) DO NOTHING"
)
FIELD_IDS = "SELECT workflow, field, field_id FROM orbit_search_fields"

# What `name_fields` returns: workflow -> field -> id.
FieldIds = dict[str, dict[str, int]]


def name_fields(cursor: Any, paramstyle: str, names: set[tuple[str, str]]) -> FieldIds:
    """Gives each (workflow, field) of `names` an id, in the caller's
    transaction, and returns every field's. Another server may name the
    same field at the same time (shared mode): its row is then taken, after
    its transaction ends (the unique key waits for it)."""
    marker = "%s" if paramstyle in ("format", "pyformat") else "?"
    cursor.executemany(NAME_FIELD.format(marker), sorted(names))
    cursor.execute(FIELD_IDS)
    out: FieldIds = {}
    for workflow, field, field_id in cursor.fetchall():
        out.setdefault(workflow, {})[field] = int(field_id)
    return out


def delete_sql() -> Any:
    t = s.orbit_search_values
    return t.delete().where(t.c.execution_id == bindparam("eid"))


def latest(found: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """One row per (execution, field), the later kept: what one upsert
    statement of several rows needs (it may touch a row only once)."""
    if len(found) > 1 and len({r[:2] for r in found}) < len(found):
        return list({r[:2]: r for r in found}.values())
    return found


def _compare(column: Any, op: str, values: tuple[Any, ...]) -> ColumnElement[bool]:
    value = values[0]
    if op == "==":
        return column == value  # type: ignore[no-any-return]
    if op == "!=":
        return column != value  # type: ignore[no-any-return]
    if op == "<":
        return column < value  # type: ignore[no-any-return]
    if op == "<=":
        return column <= value  # type: ignore[no-any-return]
    if op == ">":
        return column > value  # type: ignore[no-any-return]
    if op == ">=":
        return column >= value  # type: ignore[no-any-return]
    if op == "contains":  # `waiting_for` (orbit_core.visibility.waiting)
        # The value indexes are partial (`IS NOT NULL`): SQLite's planner
        # reads a comparison as implying that, but not a LIKE, and scanned
        # the whole table without the term spelt out (test_visibility_plans).
        return and_(column.is_not(None), column.contains(value, autoescape=True))
    if op == "in":
        return column.in_(values)  # type: ignore[no-any-return]
    return column.not_in(values)  # type: ignore[no-any-return]


def _condition(c: Condition, indexed: bool) -> ColumnElement[bool]:
    x = s.workflow_executions
    if c.builtin:
        column = x.c[_BUILTIN_COLUMNS[c.column]]
        values = c.values
        if c.column in ("started", "ended"):
            values = tuple(int(v) for v in values)
        test = _compare(column, c.op, values)
        if c.column == "ended":
            return and_(x.c.status.in_(sorted(TERMINAL)), test)
        return test
    if not indexed:
        # No execution has a row yet.
        return x.c.definition_hash.in_(c.absent) if c.absent else false()
    t = s.orbit_search_values
    column = t.c.str_value if c.column == "str" else t.c.num_value
    inner = select(t.c.execution_id).where(_field_ids(c), _compare(column, c.op, c.values))
    found = x.c.execution_id.in_(inner)
    if not c.absent:
        return found
    # `waiting_for == task`: a new execution's `|task|` is implied, not written.
    f = s.orbit_search_fields
    named = select(f.c.field_id).where(f.c.field == c.field)
    row = select(t.c.execution_id).where(
        t.c.execution_id == x.c.execution_id, t.c.field_id.in_(named)
    )
    return or_(found, and_(x.c.definition_hash.in_(c.absent), ~row.exists()))


def _rank(group: list[Condition]) -> int:
    """How few rows a group of comparisons on one field is likely to keep:
    an equality on text first, then one on a number, then a bounded range."""
    ops = {c.op for c in group}
    if ops & {"==", "in"}:
        return 0 if group[0].column == "str" else 1
    if ops & {"<", "<="} and ops & {">", ">="}:
        return 2
    return 3


def _all_of(parts: tuple[Filter, ...], indexed: bool) -> ColumnElement[bool]:
    """A conjunction, shaped for the index: the comparisons on one declared
    field are merged (a range is one index scan), the most selective field
    drives (`execution_id IN (...)`), and every other field is checked per
    candidate through the (execution_id, field) key with EXISTS, so a broad
    comparison such as `amount > 500` never enumerates its half of the table."""
    groups: dict[str, list[Condition]] = {}
    rest: list[ColumnElement[bool]] = []
    for part in parts:
        if isinstance(part, Condition) and not part.builtin and not part.absent and indexed:
            groups.setdefault(part.field, []).append(part)
        else:
            rest.append(where(part, indexed))
    if not groups:
        return and_(*rest)
    ordered = sorted(groups.values(), key=_rank)
    x, t = s.workflow_executions, s.orbit_search_values
    driver = ordered[0]
    first = driver[0]
    column = t.c.str_value if first.column == "str" else t.c.num_value
    inner = select(t.c.execution_id).where(
        _field_ids(first), *(_compare(column, c.op, c.values) for c in driver)
    )
    tests: list[ColumnElement[bool]] = [x.c.execution_id.in_(inner)]
    for group in ordered[1:]:
        other = t.alias()
        column = other.c.str_value if group[0].column == "str" else other.c.num_value
        tests.append(
            select(other.c.execution_id)
            .where(
                other.c.execution_id == x.c.execution_id,
                _field_ids(group[0], other),
                *(_compare(column, c.op, c.values) for c in group),
            )
            # OFFSET 0 keeps the check a look-up per candidate on PostgreSQL,
            # whose planner otherwise turns the EXISTS into a semi-join. It
            # cannot tell at planning time which ids `field_id IN (SELECT
            # ..)` stands for, so it guessed a few thousand rows for `amount
            # > 500` and hashed all of them (half a million at 1,000,000
            # executions: 660 ms where the look-ups take 3 ms). An OFFSET
            # is one of the things that stop that rewrite; SQLite runs an
            # EXISTS per candidate anyway.
            .offset(0)
            .exists()
        )
    return and_(*tests, *rest)


def _field_ids(c: Condition, t: Any = None) -> ColumnElement[bool]:
    """`field_id` is one of the ids of the condition's field in its workflows
    (read from `orbit_search_fields` by the statement itself)."""
    t = s.orbit_search_values if t is None else t
    f = s.orbit_search_fields
    workflow: ColumnElement[bool]
    if len(c.workflows) > 1:
        workflow = f.c.workflow.in_(c.workflows)
    else:
        workflow = f.c.workflow == c.workflows[0]
    named = select(f.c.field_id).where(workflow, f.c.field == c.field)
    found: ColumnElement[bool] = t.c.field_id.in_(named)
    return found


def where(f: Filter, indexed: bool) -> ColumnElement[bool]:
    """The filter as a condition on `workflow_executions` (`indexed`: the
    search part exists)."""
    if isinstance(f, AllOf):
        return _all_of(f.parts, indexed)
    if isinstance(f, AnyOf):
        return or_(*(where(p, indexed) for p in f.parts))
    if isinstance(f, NoneOf):
        return not_(where(f.part, indexed))
    return _condition(f, indexed)


def select_page(query: SearchQuery, indexed: bool) -> Select[Any]:
    x = s.workflow_executions
    statement = select(x)
    if query.filter is not None:
        statement = statement.where(where(query.filter, indexed))
    if query.status is not None:
        statement = statement.where(x.c.status == query.status)
    if query.workflow is not None:
        statement = statement.where(x.c.workflow == query.workflow)
    if query.after is not None:
        created, execution_id = query.after
        statement = statement.where(
            or_(
                x.c.created_at_ms < created,
                and_(x.c.created_at_ms == created, x.c.execution_id < execution_id),
            )
        )
    return statement.order_by(x.c.created_at_ms.desc(), x.c.execution_id.desc()).limit(query.limit)
