"""The line of a step's `concurrency` in shared mode is the group's, not each
server's (issue 39; orbit_core/engine/step_slots.py): a unit refused a slot
leaves a waiting row, and a take is refused while another unit's row of the
scope is ahead of the taker (higher `priority`, then earlier, then execution
id and unit key). The rule at the port (`StepSlots`), on PostgreSQL
(`SharedTables`) and on the in-memory cluster of the shared simulation, then
through two engines of one group: a freed slot goes to the high-priority
unit waiting on one server, not to the lower ones asking from the other."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import psycopg
import pytest
from fixtures_orbit import demo_definition

from orbit_core.coordination import StepSlots
from orbit_core.engine import Engine
from orbit_core.engine.handoff import Sharing
from orbit_core.engine.step_slots import RETRY_MS
from orbit_core.jsontypes import JsonValue
from orbit_core.memory_cluster import MemoryCluster
from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow, StepSlot
from orbit_core.testing import SequentialIds, SimulatedClock
from orbit_store.shared import SharedStore, SharedTables

FLOW, KEY = "W/work", "c-1"


def _slot(eid: str, seq: int = 1) -> StepSlot:
    return StepSlot(FLOW, KEY, eid, "work", 1, seq)


def check_the_take_rule(a: StepSlots, b: StepSlots) -> None:
    """`a` and `b`: two servers' ports on one store; the scope has 1 slot."""
    assert a.take_step_slot(_slot("e-0"), 1, 0, 100)
    # Full: each refused unit leaves its row.
    assert not b.take_step_slot(_slot("e-1"), 1, 1, 110)
    assert not a.take_step_slot(_slot("e-2"), 1, 9, 120)
    assert not b.take_step_slot(_slot("e-3"), 1, 9, 130)
    assert sorted(w.offer.execution_id for w in a.step_waits_of(["e-1", "e-2", "e-3"])) == [
        "e-1",
        "e-2",
        "e-3",
    ]
    # Held already: yes, whatever waits.
    assert b.take_step_slot(_slot("e-0"), 1, 0, 100)
    a.free_step_slots([_slot("e-0")])
    # A free slot, but the priority-9 units wait ahead of e-1 (on main it
    # took the slot: whoever asked first did), and e-2 ahead of e-3.
    assert not b.take_step_slot(_slot("e-1"), 1, 1, 110)
    assert not b.take_step_slot(_slot("e-3"), 1, 9, 130)
    assert a.take_step_slot(_slot("e-2"), 1, 9, 120)
    # The taker's row went with its take; a second slot is not there.
    assert sorted(w.offer.execution_id for w in a.step_waits_of(["e-1", "e-2", "e-3"])) == [
        "e-1",
        "e-3",
    ]
    assert not b.take_step_slot(_slot("e-3"), 1, 9, 130)
    # The row of a unit that left the line without a slot goes (by offer:
    # another offer's row stays), and the line moves on.
    b.free_step_waits([_slot("e-3", seq=7)])
    assert len(a.step_waits_of(["e-3"])) == 1
    b.free_step_waits([_slot("e-3")])
    a.free_step_slots([_slot("e-2")])
    # Equal priorities: the earlier first (e-4 waited since 90, e-1 since
    # 110), then execution id order (e-1 before e-5, both since 110).
    assert not a.take_step_slot(_slot("e-5"), 1, 1, 110)
    assert a.take_step_slot(_slot("e-4"), 1, 1, 90)
    a.free_step_slots([_slot("e-4")])
    assert not a.take_step_slot(_slot("e-5"), 1, 1, 110)
    assert b.take_step_slot(_slot("e-1"), 1, 1, 110)
    assert [w.offer.execution_id for w in a.step_waits_of(["e-1", "e-4", "e-5"])] == ["e-5"]


def test_the_in_memory_take_orders_the_line_across_servers() -> None:
    cluster = MemoryCluster(SimulatedClock())
    check_the_take_rule(cluster.node("a"), cluster.node("b"))


@pytest.mark.postgres
def test_the_postgres_take_orders_the_line_across_servers(pg_url: str) -> None:
    stores = [SharedStore(pg_url, node_id=name) for name in ("a", "b")]
    tables = [SharedTables(store, store.node_id) for store in stores]
    try:
        check_the_take_rule(tables[0], tables[1])
    finally:
        for t in tables:
            t.close()
        for s in stores:
            s.close()


def check_the_sweep(port: StepSlots, write_rows: Callable[[list[ExecutionRow]], None]) -> None:
    """A round's sweep deletes the rows of executions that have ended, and
    only those (issue 40: rows that outlived an end nobody freed them at)."""
    write_rows(
        [
            ExecutionRow(eid, "W", "1.0.0", "sha256:x", status, 1, 1, 1)
            for eid, status in (
                ("e-0", "RUNNING"),
                ("e-1", "COMPLETED"),
                ("e-2", "FAILED"),
                ("e-3", "CANCELLED"),
                ("e-4", "CONTINUED_AS_NEW"),
            )
        ]
    )
    for eid in ("e-0", "e-1", "e-4"):
        assert port.take_step_slot(StepSlot(FLOW, eid, eid, "work", 1, 1), 1, 0, 100)
    # A restart of e-1 took a slot for its run 2 before its commit: kept.
    assert port.take_step_slot(StepSlot(FLOW, "r", "e-1", "work", 2, 1), 1, 0, 100)
    for eid in ("e-2", "e-3", "e-5"):  # e-5: not created yet (its start is on the way)
        assert not port.take_step_slot(StepSlot(FLOW, "e-0", eid, "work", 1, 1), 1, 0, 100)
    assert port.sweep_step_rows() == 3
    everyone = ["e-0", "e-1", "e-2", "e-3", "e-4", "e-5"]
    held = sorted((s.execution_id, s.run) for s in port.step_slots_of(everyone))
    assert held == [("e-0", 1), ("e-1", 2), ("e-4", 1)]
    assert [w.offer.execution_id for w in port.step_waits_of(everyone)] == ["e-5"]
    assert port.sweep_step_rows() == 0


def test_the_in_memory_sweep_deletes_the_rows_of_ended_executions() -> None:
    cluster = MemoryCluster(SimulatedClock())
    node = cluster.node("a")

    def write_rows(rows: list[ExecutionRow]) -> None:
        changes = [ExecutionChange(r.execution_id, r, new=True) for r in rows]
        cluster.data.commit(CommitBatch(executions=changes))

    check_the_sweep(node, write_rows)


@pytest.mark.postgres
def test_the_postgres_sweep_deletes_the_rows_of_ended_executions(pg_url: str) -> None:
    store = SharedStore(pg_url, node_id="a")
    tables = SharedTables(store, store.node_id)

    def write_rows(rows: list[ExecutionRow]) -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for r in rows:
                conn.execute(
                    "INSERT INTO workflow_executions (execution_id, workflow, version, "
                    "definition_hash, status, created_at_ms, updated_at_ms, last_seq) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (r.execution_id, r.workflow, r.version, r.definition_hash, r.status, 1, 1, 1),
                )

    try:
        check_the_sweep(tables, write_rows)
    finally:
        tables.close()
        store.close()


# ---- two engines of one group

LINED = demo_definition(
    "Lined",
    input="customer_id: String, rank: Int = 0",
    step="priority: input.rank\n        concurrency { max: 1 }",
)


class Group:
    """Engines `a` and `b` of one group, the store's waiting rows and slots,
    and a way to let the engines look at their lines again."""

    def __init__(
        self,
        engines: dict[str, Engine],
        rows: Callable[[], tuple[list[str], list[str]]],
        retry: Callable[[list[str]], None],
    ) -> None:
        self.engines = engines
        self.rows = rows
        self.retry = retry

    def start(self, node: str, eid: str, rank: int) -> None:
        value: dict[str, JsonValue] = {"customer_id": "c-1", "rank": rank}
        self.engines[node].start("Lined", input=value, execution_id=eid)


def check_two_engines(group: Group) -> None:
    group.start("a", "e-1", 0)  # takes the one slot
    group.start("b", "e-2", 1)
    group.start("b", "e-3", 1)
    group.start("a", "e-4", 9)  # ahead of b's, though it came later
    group.start("b", "e-5", 1)
    # Only the first of each server's line asked (and a new one going ahead).
    assert group.rows() == (["e-1"], ["e-2", "e-4"])
    # A unit that leaves the line without a slot takes its row along.
    group.engines["b"].cancel("e-2")
    slots, waits = group.rows()
    # (e-3, first of `b`'s line now, may have asked already: its retry fell due.)
    assert (slots, [w for w in waits if w != "e-3"]) == (["e-1"], ["e-4"])
    group.engines["a"].cancel("e-1")
    # `b` asks first, over and over: the slot waits for `a`'s e-4.
    group.retry(["b", "b", "a"])
    assert group.rows()[0] == ["e-4"]
    assert group.engines["a"].get("e-4").get("waiting") is None
    group.retry(["b"])
    assert group.rows() == (["e-4"], ["e-3"])
    assert group.engines["b"].get("e-3").get("waiting") is not None


def _sharing(slots: StepSlots) -> Sharing:
    return Sharing(offer_tasks=True, local_first=True, shared_catalog=True, step_slots=slots)


@contextlib.contextmanager
def memory_group() -> Iterator[Group]:
    clock, ids = SimulatedClock(), SequentialIds()
    cluster = MemoryCluster(clock)
    nodes = {name: cluster.node(name) for name in ("a", "b")}
    engines = {
        name: Engine(node, clock, ids, auto_tick=False, handler_threads=0, sharing=_sharing(node))
        for name, node in nodes.items()
    }

    def rows() -> tuple[list[str], list[str]]:
        return (
            sorted(s.execution_id for s in cluster.slots.values()),
            sorted(w.execution_id for w, _, _ in cluster.step_waits.values()),
        )

    def retry(order: list[str]) -> None:
        for name in order:
            clock.advance(RETRY_MS)
            engines[name].tick()

    try:
        engines["a"].deploy(LINED)
        engines["b"].reload_definitions()
        yield Group(engines, rows, retry)
    finally:
        for engine in engines.values():
            engine.close()


def test_a_freed_slot_goes_to_the_head_of_the_whole_line_in_memory() -> None:
    with memory_group() as group:
        check_two_engines(group)


@pytest.mark.postgres
def test_a_freed_slot_goes_to_the_head_of_the_whole_line_on_postgres(pg_url: str) -> None:
    stores = {name: SharedStore(pg_url, node_id=name) for name in ("a", "b")}
    tables = {name: SharedTables(store, name) for name, store in stores.items()}
    engines = {
        name: Engine(stores[name], auto_tick=False, sharing=_sharing(tables[name]))
        for name in stores
    }

    def rows() -> tuple[list[str], list[str]]:
        with psycopg.connect(pg_url) as conn:
            slots = conn.execute("SELECT execution_id FROM orbit_step_slots ORDER BY 1")
            found = [str(r[0]) for r in slots.fetchall()]
            waits = conn.execute("SELECT execution_id FROM orbit_step_waits ORDER BY 1")
            return found, [str(r[0]) for r in waits.fetchall()]

    def retry(order: list[str]) -> None:
        for name in order:
            # (The engines' clocks are the wall's: a retry falls due after
            # RETRY_MS; this makes it due now.)
            engine = engines[name]
            engine._executions.gate._retry_at = 0
            engine.tick()

    try:
        engines["a"].deploy(LINED)
        engines["b"].reload_definitions()
        check_two_engines(Group(engines, rows, retry))
    finally:
        for name, engine in engines.items():
            engine.close()
            tables[name].close()


# ---- a reconciliation never frees another server's slots


def check_a_copy_frees_no_slot_of_its_new_owner(
    a: StepSlots, b: StepSlots, own: Callable[[str, str], None]
) -> None:
    """Server `a` took a slot for x-1, then `b` took x-1 over: `a`, judging
    from a copy of x-1 (shared simulation seed 705782), must not free the
    row of an attempt `b` still has out; `b` may. A row whose execution has
    no owner (it ended, or never came to be) goes whoever asks."""
    assert a.take_step_slot(_slot("x-1"), 2, 0, 100)
    own("x-1", "b")
    a.free_step_slots([_slot("x-1")])
    assert a.step_slots_of(["x-1"]) == [_slot("x-1")]
    b.free_step_slots([_slot("x-1")])
    assert a.step_slots_of(["x-1"]) == []
    assert a.take_step_slot(_slot("x-2"), 2, 0, 100)
    b.free_step_slots([_slot("x-2")])
    assert a.step_slots_of(["x-2"]) == []


def test_an_in_memory_copy_frees_no_slot_of_its_new_owner() -> None:
    from orbit_core.memory_cluster import _Owner

    cluster = MemoryCluster(SimulatedClock())

    def own(eid: str, node: str) -> None:
        cluster.owners[eid] = _Owner(node, 2, eid)

    check_a_copy_frees_no_slot_of_its_new_owner(cluster.node("a"), cluster.node("b"), own)


@pytest.mark.postgres
def test_a_postgres_copy_frees_no_slot_of_its_new_owner(pg_url: str) -> None:
    stores = [SharedStore(pg_url, node_id=name) for name in ("a", "b")]
    tables = [SharedTables(store, store.node_id) for store in stores]

    def own(eid: str, node: str) -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO orbit_owners (execution_id, root_id, node_id, epoch, since_ms) "
                "VALUES (%s, %s, %s, 2, 0)",
                (eid, eid, node),
            )

    try:
        check_a_copy_frees_no_slot_of_its_new_owner(tables[0], tables[1], own)
    finally:
        for t in tables:
            t.close()
        for s in stores:
            s.close()
