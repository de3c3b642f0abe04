"""The order of the shared task board (issue 39; orbit_store/shared.py,
"The board's order"): a step's `priority` first, then weighted fair
queueing of its `fairness` keys by virtual time, then arrival; of two tasks
equal in all that, the claiming node's own. The same scenario on
PostgreSQL (`SharedTables.claim_for`) and on the in-memory board of the
shared simulation (`MemoryNode.claim_for`): two nodes offer every task to
the board (no engine keeps one), and node `a` claims them one by one."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fixtures_orbit import demo_definition
from server_harness import RawWorker, ServerProcess, wait_until
from test_cluster_shared import Node

from orbit_core import ir
from orbit_core.coordination import TaskBoard
from orbit_core.engine import Engine
from orbit_core.engine.handoff import Sharing
from orbit_core.jsontypes import JsonValue
from orbit_core.memory_cluster import MemoryCluster
from orbit_core.testing import SequentialIds, SimulatedClock
from orbit_store.shared import SharedTables

DEMO = [("demo.work", "1.0.0")]
ORDERED = demo_definition(
    "Ordered",
    input="customer_id: String, rank: Int = 0, share: Int = 1",
    step="priority: input.rank\n        fairness { key: input.customer_id, weight: input.share }",
)


class Board:
    """Two nodes' engines (`a`, `b`) offering to one board, and `a`'s claims."""

    def __init__(self, a: Engine, b: Engine, claims: TaskBoard) -> None:
        self.engines = {"a": a, "b": b}
        self.claims = claims
        self.count = 0

    def start(self, node: str, customer: str, n: int = 1, rank: int = 0, share: int = 1) -> None:
        for _ in range(n):
            self.count += 1
            value: dict[str, JsonValue] = {"customer_id": customer, "rank": rank, "share": share}
            self.engines[node].start("Ordered", input=value, execution_id=f"e-{self.count}")

    def claim(self, n: int) -> list[str]:
        """The customers of the next `n` tasks `a` claims, one claim each."""
        got = []
        for _ in range(n):
            (claim,) = self.claims.claim_for(DEMO, "python", [("s", "w")], lambda e: f"{e}/t")
            value = claim.assignment["input"]
            assert isinstance(value, dict)
            got.append(str(value["customer_id"]))
        return got


def check_the_order(board: Board) -> None:
    # `a` owns six of `big`'s; `b` two of `small`'s and one urgent task.
    board.start("a", "big", 6)
    board.start("b", "small", 2)
    board.start("b", "urgent", rank=5)
    # The higher priority first; then the keys take turns (the first tasks
    # of both keys have the same virtual time: a's own goes first).
    assert board.claim(4) == ["urgent", "big", "small", "big"]
    # A key that arrives now starts from the board's clock (the time of the
    # last task claimed), not from the beginning: it waits behind the tasks
    # of the next time, then takes its turn.
    board.start("a", "late")
    assert board.claim(6) == ["small", "big", "late", "big", "big", "big"]


def check_the_weights(board: Board) -> None:
    # A key of weight 2 gets two tasks for the other's one, as one server's
    # round robin gives them (tests/test_flow_dispatch_order.py).
    board.start("a", "two", 4, share=2)
    board.start("b", "one", 3)
    assert board.claim(7) == ["two", "two", "one", "two", "two", "one", "one"]


@contextlib.contextmanager
def memory_board() -> Iterator[Board]:
    clock, ids = SimulatedClock(), SequentialIds()
    cluster = MemoryCluster(clock)
    nodes = {name: cluster.node(name) for name in ("a", "b")}
    sharing = Sharing(offer_tasks=True, local_first=False, shared_catalog=True)
    engines = {
        name: Engine(node, clock, ids, handler_threads=0, sharing=sharing)
        for name, node in nodes.items()
    }
    try:
        engines["a"].deploy(ORDERED)
        engines["b"].reload_definitions()
        yield Board(engines["a"], engines["b"], nodes["a"])
    finally:
        for engine in engines.values():
            engine.close()


def test_the_in_memory_board_orders_by_priority_then_fairness() -> None:
    with memory_board() as board:
        check_the_order(board)


def test_the_in_memory_board_gives_a_key_its_weight() -> None:
    with memory_board() as board:
        check_the_weights(board)


@pytest.fixture
def pg_nodes(pg_url: str) -> Iterator[dict[str, Node]]:
    nodes = {name: Node(pg_url, name) for name in ("a", "b")}
    try:
        nodes["a"].engine.deploy(ORDERED)
        nodes["b"].engine.reload_definitions()
        yield nodes
    finally:
        for node in nodes.values():
            node.close()


@pytest.mark.postgres
def test_the_postgres_board_orders_by_priority_then_fairness(pg_nodes: dict[str, Node]) -> None:
    a, b = pg_nodes["a"], pg_nodes["b"]
    check_the_order(Board(a.engine, b.engine, a.tables))


@pytest.mark.postgres
def test_the_postgres_board_gives_a_key_its_weight(pg_nodes: dict[str, Node]) -> None:
    a, b = pg_nodes["a"], pg_nodes["b"]
    check_the_weights(Board(a.engine, b.engine, a.tables))


class Explained:
    """A connection of `SharedTables` that explains each claim's select
    before running it."""

    def __init__(self, conn: Any, plans: list[dict[str, Any]]) -> None:
        self._conn = conn
        self._plans = plans

    def execute(self, statement: str, params: Any = None) -> Any:
        if "SKIP LOCKED" in statement:
            raw = self._conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()[0]
            self._plans.append((raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"])
        return self._conn.execute(statement, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


@pytest.mark.postgres
def test_a_claim_reads_the_queue_index_in_the_boards_order(
    pg_nodes: dict[str, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pg_nodes["a"], pg_nodes["b"]
    board = Board(a.engine, b.engine, a.tables)
    board.start("a", "one")
    board.start("b", "two")
    with a.tables._conn() as conn:
        # Many queued rows of both nodes, as a backlog leaves them.
        conn.execute(
            "INSERT INTO orbit_tasks (execution_id, unit_key, offer_seq, task_name, "
            "contract_version, assignment, node_id, state, enqueued_ms, priority, vt) "
            "SELECT 'x-' || i, 'work', 1, 'demo.work', '1.0.0', '{}', "
            "'b', 'queued', i, i % 3, i / 7.0 "
            "FROM generate_series(1, 20000) AS i"
        )
        conn.execute("ANALYZE orbit_tasks")
    plans: list[dict[str, Any]] = []
    plain = SharedTables._conn

    def explained(tables: SharedTables) -> Any:
        @contextlib.contextmanager
        def wrap() -> Iterator[Any]:
            with plain(tables) as conn:
                yield Explained(conn, plans)

        return wrap()

    monkeypatch.setattr(SharedTables, "_conn", explained)
    # (The rows it finds first have no owner: it deletes them, unclaimed.)
    a.tables.claim_for(DEMO, "python", [("s", "w")] * 2, lambda e: f"{e}/t")
    assert len(plans) == 2  # this node's, then the others'
    for plan, index in zip(plans, ["orbit_tasks_node_queued", "orbit_tasks_queued"], strict=True):
        # Each contract's tasks read in order from the index, up to the
        # limit: nothing sorts the queue (only the few rows found).
        (scan,) = [n for n in _nodes(plan) if n.get("Relation Name") == "orbit_tasks"]
        assert scan["Node Type"] == "Index Scan" and scan["Index Name"] == index, plan
        for sort in [n for n in _nodes(plan) if "Sort" in n["Node Type"]]:
            assert sort["Plans"][0]["Plan Rows"] <= 2 * len(DEMO), plan


def _queued(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM orbit_tasks WHERE state = 'queued'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.timeout(240)
def test_three_servers_hand_out_the_boards_tasks_in_its_order(
    three_shared: list[ServerProcess], pg_url: str
) -> None:
    """Executions started through `b` and `c` with no poll there: their
    tasks reach the board, and a worker polling `a` alone gets the urgent
    one first, then the two customers in turns (on main: in the order they
    were queued, the big customer's eight first)."""
    a, b, c = three_shared
    assert a.http().post("/v1/workflows", ir.to_json(ORDERED)).status == 201
    plan = [("big", 0)] * 8 + [("small", 0)] * 2 + [("urgent", 5)]
    for n, (customer, rank) in enumerate(plan):
        body = {
            "workflow": "Ordered",
            "input": {"customer_id": customer, "rank": rank},
            "execution_id": f"e-{n}",
        }
        reply = (b, c)[n % 2].http().post("/v1/executions", body)
        assert reply.status == 201, reply
    wait_until(lambda: _queued(pg_url) == len(plan), 30, "every task to reach the board")
    worker = RawWorker(a.http(), "w-1", DEMO)
    assert worker.register().status == 200
    got = []
    for _ in range(6):
        task = worker.task(wait_ms=5_000)
        got.append(task["input"]["customer_id"])
    assert got == ["urgent", "big", "small", "big", "small", "big"]
