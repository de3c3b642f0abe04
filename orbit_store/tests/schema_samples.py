"""The rows every schema fixture holds (`fixtures/make_schema_fixtures.py`
writes them in each earlier schema; `test_store_schema_upgrades.py` reads
them back after the upgrade). Plain values only: what an INSERT of the time
wrote, so no later change to the store's code changes a fixture."""

from __future__ import annotations

from typing import Any

from orbit_core import events as ev

Row = tuple[Any, ...]

CREATED = ev.WorkflowCreated(1, 1000, "Wf", "1.0.0", "sha256:x", {"order": "o-1"}, None, None)
STARTED = ev.WorkflowStarted(2, 1000)
EVENTS: list[ev.Event] = [CREATED, STARTED]


def _event_rows(eid: str, run: int | None = None) -> list[Row]:
    head = (eid,) if run is None else (eid, run)
    return [
        (*head, e.seq, type(e).TYPE, None, ev.dumps(e).decode(), e.timestamp_ms) for e in EVENTS
    ]


# (table, columns, rows): the base tables, in every dialect and era.
BASE: list[tuple[str, tuple[str, ...], list[Row]]] = [
    ("schema_version", ("version",), [(1,)]),
    (
        "workflow_definitions",
        ("name", "version", "definition_hash", "ir", "created_at_ms"),
        [("Wf", "1.0.0", "sha256:x", '{"name":"Wf","version":"1.0.0"}', 1000)],
    ),
    (
        "workflow_executions",
        (
            "execution_id",
            "workflow",
            "version",
            "definition_hash",
            "status",
            "created_at_ms",
            "updated_at_ms",
            "last_seq",
        ),
        [
            ("e-1", "Wf", "1.0.0", "sha256:x", "RUNNING", 1000, 1000, 2),
            ("e-2", "Wf", "1.0.0", "sha256:x", "COMPLETED", 1000, 3000, 2),
        ],
    ),
    (
        "execution_events",
        ("execution_id", "seq", "event_type", "step", "payload", "timestamp_ms"),
        _event_rows("e-1") + _event_rows("e-2"),
    ),
    (
        "execution_run_events",
        ("execution_id", "run", "seq", "event_type", "step", "payload", "timestamp_ms"),
        _event_rows("e-2", 1),
    ),
    (
        "orbit_schedules",
        (
            "schedule_id",
            "spec",
            "paused",
            "next_fire_ms",
            "due_ms",
            "fired_count",
            "skipped_count",
            "created_at_ms",
            "updated_at_ms",
        ),
        [("hourly", '{"workflow":"Wf","interval":"1h"}', 0, 5000, 5000, 2, 1, 1000, 4000)],
    ),
    (
        "worker_registry",
        ("worker_id", "runtime", "sdk", "contracts", "registered_at_ms", "last_seen_ms"),
        [("w-1", "python", None, '[{"name":"demo.work","version":"1.0.0"}]', 1000, 2000)],
    ),
]

# The cluster and shared tables (PostgreSQL), with the columns every era had.
CLUSTER: list[tuple[str, tuple[str, ...], list[Row]]] = [
    (
        "orbit_cluster",
        ("id", "term", "leader_node", "leader_addr", "since_ms"),
        [(1, 3, "n1", "http://n1:7233", 1000)],
    ),
]
SHARED: list[tuple[str, tuple[str, ...], list[Row]]] = [
    (
        "orbit_nodes",
        ("node_id", "addr", "instance", "heartbeat_ms", "started_ms"),
        [("n1", "http://n1:7233", "i-1", 5000, 1000)],
    ),
    (
        "orbit_owners",
        ("execution_id", "root_id", "node_id", "epoch", "since_ms"),
        [("e-1", "e-1", "n1", 4, 1000)],
    ),
    (
        "orbit_tasks",
        (
            "execution_id",
            "unit_key",
            "offer_seq",
            "task_name",
            "contract_version",
            "timeout_ms",
            "assignment",
            "state",
            "enqueued_ms",
        ),
        [("e-1", "step[0]", 1, "demo.work", "1.0.0", 30000, "{}", "queued", 1000)],
    ),
    (
        "orbit_inbox",
        ("execution_id", "kind", "payload", "sender", "state", "created_ms"),
        [("e-1", "signal", '{"name":"go"}', "n2", "pending", 1000)],
    ),
    (
        "orbit_sessions",
        (
            "session_id",
            "worker_id",
            "runtime",
            "contracts",
            "registered_ms",
            "last_seen_ms",
        ),
        [("s-1", "w-1", "python", "[]", 1000, 2000)],
    ),
    ("orbit_cancels", ("session_id", "token"), [("s-1", "tok-1")]),
    ("orbit_waits", ("execution_id", "node_id", "since_ms"), [("e-1", "n2", 1000)]),
]


def literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def inserts(tables: list[tuple[str, tuple[str, ...], list[Row]]], present: set[str]) -> list[str]:
    """INSERT statements for the tables of `tables` that are in `present`."""
    out = []
    for name, columns, rows in tables:
        if name in present:
            for row in rows:
                values = ", ".join(literal(v) for v in row)
                out.append(f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({values})")
    return out
