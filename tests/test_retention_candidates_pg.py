"""Retention's candidates on PostgreSQL (docs/retention.md, "What it
costs"): a batch read past the sweep's cursor walks the end-time index from
the cursor, whatever the size of the table. With every row eligible the
planner guessed that few pass the filters and read the whole table, then
sorted it, for each batch: a sweep's cost grew with the square of the
backlog."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event

from orbit_store.postgres import PostgresStore


def _fill(store: PostgresStore, count: int) -> None:
    """`count` finished executions ending 1 ms apart (rows only: the plan
    under test reads no history)."""

    def statements(cursor: Any) -> None:
        cursor.execute(
            "INSERT INTO workflow_executions SELECT 'm-' || lpad(i::text, 6, '0'), 'Wf', "
            "'1.0.0', 'sha256:x', 'COMPLETED', i, i, 3 FROM generate_series(0, %s) AS i",
            (count - 1,),
        )
        cursor.execute("ANALYZE")  # as autovacuum would have

    store._write(statements, None)


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


def test_a_later_batch_walks_the_index_from_the_cursor(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    plans: list[dict[str, Any]] = []

    # The plan of the candidates' statement, as the store's own read
    # transaction runs it (before the statement itself, on its connection).
    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "FROM workflow_executions" in statement and "orbit_schedules" in statement:
            with cursor.connection.cursor() as c:
                c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
                raw = c.fetchone()[0]
                plans.append((raw if isinstance(raw, list) else json.loads(raw))[0])

    try:
        store.prepare_retention()
        _fill(store, 50_000)
        event.listen(store.engine, "before_cursor_execute", explain)
        rows = store.retention_candidates(10**6, 1, 500, (20_000, "m-020000"), None)
        assert [r.execution_id for r in rows] == [f"m-{i:06d}" for i in range(20_001, 20_501)]
    finally:
        event.remove(store.engine, "before_cursor_execute", explain)
        store.close()
    (plan,) = plans
    nodes = _nodes(plan["Plan"])
    kinds = [n["Node Type"] for n in nodes]
    assert "Sort" not in kinds, kinds
    scans = [n for n in nodes if n.get("Relation Name") == "workflow_executions"]
    assert [n["Node Type"] for n in scans] == ["Index Scan"], kinds
    # It stopped after the batch: it did not read the rows after it.
    assert scans[0]["Actual Rows"] <= 500, scans[0]
