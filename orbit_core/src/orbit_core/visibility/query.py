"""A page of executions selected by a typed filter, and its cursor.

Pages run newest first, by (`created_at_ms`, `execution_id`) descending: a
total order that new executions never disturb, so a cursor (the position of
the last row of a page) stays valid while executions start and end.
`matches` is the filter's meaning on one row, what the in-memory store runs
and what the SQL store's statement must agree with.

`type_filter` is the one place a filter's text is typed against the
deployed definitions (the engine's `typed_filter`, which the live listing,
the archive's listing and batches all call). With several servers on one
store a definition deployed through another one reaches this server's
catalog on its next round, so a filter the known definitions refuse is
typed once more after the store's definitions were loaded: only a refusal
pays for that read, and the usual filter none.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping

from orbit_core.api import ExecutionPage
from orbit_core.ir import Definition
from orbit_core.ports import ExecutionRow, Store
from orbit_core.state import TERMINAL
from orbit_core.visibility.check import (
    AllOf,
    AnyOf,
    Condition,
    FieldCatalog,
    Filter,
    NoneOf,
    check_filter,
)
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.filter import FilterError, parse_filter
from orbit_core.visibility.page import SearchQuery

__all__ = [
    "SearchQuery",
    "decode_cursor",
    "encode_cursor",
    "encode_position",
    "in_page",
    "matches",
    "search",
    "type_filter",
]


def encode_cursor(row: ExecutionRow) -> str:
    return encode_position(row.created_at_ms, row.execution_id)


def encode_position(created_at_ms: int, execution_id: str) -> str:
    """The cursor that resumes after the execution at this position."""
    raw = f"{created_at_ms}:{execution_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, _, execution_id = raw.partition(":")
        if not execution_id:
            raise ValueError
        return int(created), execution_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise FilterError("the cursor is not one a previous page gave") from None


def _compare(op: str, have: str | float, values: tuple[str | float, ...]) -> bool:
    want = values[0]
    if op == "contains":
        return isinstance(have, str) and isinstance(want, str) and want in have
    if op == "in":
        return have in values
    if op == "not in":
        return have not in values
    if op == "==":
        return have == want
    if op == "!=":
        return have != want
    if type(have) is not type(want):
        return False
    if op == "<":
        return have < want  # type: ignore[operator]
    if op == "<=":
        return have <= want  # type: ignore[operator]
    if op == ">":
        return have > want  # type: ignore[operator]
    return have >= want  # type: ignore[operator]


def _builtin(c: Condition, row: ExecutionRow) -> str | float | None:
    if c.column == "status":
        return row.status
    if c.column == "workflow":
        return row.workflow
    if c.column == "version":
        return row.version
    if c.column == "started":
        return float(row.created_at_ms)
    return float(row.updated_at_ms) if row.status in TERMINAL else None


def matches(f: Filter, row: ExecutionRow, values: Mapping[str, SearchValue]) -> bool:
    """Whether `row`, with its index rows `values` (by field), passes `f`.
    A comparison on a field the execution has no value for is false."""
    if isinstance(f, AllOf):
        return all(matches(p, row, values) for p in f.parts)
    if isinstance(f, AnyOf):
        return any(matches(p, row, values) for p in f.parts)
    if isinstance(f, NoneOf):
        return not matches(f.part, row, values)
    have: str | float | None
    if f.builtin:
        have = _builtin(f, row)
    else:
        if row.workflow not in f.workflows:
            return False
        found = values.get(f.field)
        if found is None and row.definition_hash in f.absent:
            return True  # no `@waiting` row: it holds `|task|` (waiting.py)
        have = None if found is None else found.str_value if f.column == "str" else found.num_value
    return have is not None and _compare(f.op, have, f.values)


def in_page(query: SearchQuery, row: ExecutionRow) -> bool:
    """The status, workflow and cursor conditions of `query` on `row`."""
    if query.status is not None and row.status != query.status:
        return False
    if query.workflow is not None and row.workflow != query.workflow:
        return False
    after = query.after
    return after is None or (row.created_at_ms, row.execution_id) < after


def type_filter(
    text: str,
    workflow: str | None,
    definitions: Callable[[], Iterable[Definition]],
    reload: Callable[[], int],
) -> Filter:
    """`text` typed against the search fields of `definitions()` (those of
    `workflow` when named); raises FilterError. When they refuse it,
    `reload` adds the store's definitions this server lacks (it returns
    how many) and, if it found any, the filter is typed again."""
    node = parse_filter(text)  # a syntax error is refused without a reload
    try:
        return check_filter(node, FieldCatalog.of(definitions()), workflow)
    except FilterError:
        if not reload():
            raise
    return check_filter(node, FieldCatalog.of(definitions()), workflow)


def search(
    store: Store,
    typed: Filter | None,
    *,
    status: str | None,
    workflow: str | None,
    limit: int,
    cursor: str | None,
) -> ExecutionPage:
    """One page of `GET /v1/executions?where=...` given its typed filter
    (`type_filter`), run by the store; `next_cursor` is None on the last
    page."""
    limit = min(max(limit, 1), 1000)
    after = decode_cursor(cursor) if cursor else None
    query = SearchQuery(typed, status.upper() if status else None, workflow, limit + 1, after)
    rows = store.search_executions(query)
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "executions": [r.to_json() for r in rows],
        "next_cursor": encode_cursor(rows[-1]) if more and rows else None,
    }
