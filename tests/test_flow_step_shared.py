"""A step's `concurrency` across the servers of shared mode, on three real
`orbit server --cluster-mode shared` processes over PostgreSQL: the step
`work` declares `concurrency { max: 2, key: input.customer_id }` (the
workflow declares nothing, so each execution runs on the server it was
started through). Its slots are rows of the store (orbit_core/engine/
step_slots.py), so never more than two tasks of one customer are out at
once, whichever servers own the executions, and a server SIGKILLed while
it holds slots gives them up to the others once its executions are taken
over. The line of units waiting for a slot is the group's too (rows of
`orbit_step_waits`): a freed slot goes to the highest `priority` waiting on
any server, even one SIGKILLed (its unit keeps its place under the server
that takes it over)."""

from __future__ import annotations

import signal
import time
from typing import Any

import psycopg
import pytest
import test_flow_real_server as real
import test_flow_shared as fs
from fixtures_orbit import demo_definition
from server_harness import RawWorker, ServerProcess

from orbit_core import ir

pytestmark = [pytest.mark.timeout(240)]

WORKFLOW = "PerStepShared"


def _deploy(server: ServerProcess) -> None:
    definition = demo_definition(WORKFLOW, step="concurrency { max: 2, key: input.customer_id }")
    assert server.http().post("/v1/workflows", ir.to_json(definition)).status == 201


def _owners(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT execution_id, node_id FROM orbit_owners").fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _slots(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT execution_id, key FROM orbit_step_slots ORDER BY execution_id"
        ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def _run_all(held: fs.Held, servers: list[ServerProcess], ids: list[str]) -> None:
    deadline = time.monotonic() + 120
    api = servers[0].http()
    while not all(fs._finished(api, eid) for eid in ids):
        assert time.monotonic() < deadline, sorted(
            (eid, api.get(f"/v1/executions/{eid}").body.get("status")) for eid in ids
        )
        held.take()
        held.complete_one_each(servers[len(held.tasks) % len(servers)].http())


def test_a_step_concurrency_holds_across_three_servers(
    three_shared: list[ServerProcess], pg_url: str
) -> None:
    """Six executions of `c-1` and three of `c-2`, started through the three
    servers in turn (so each server owns some of each key): at no moment
    are more than two tasks of a key out (on main each server let two of
    each key out, six `c-1` tasks at once), a waiting execution says why,
    and all complete with no slot left behind."""
    three = three_shared
    _deploy(three[0])
    plan = [(f"c1-{i}", "c-1") for i in range(6)] + [(f"c2-{i}", "c-2") for i in range(3)]
    fs._start_spread(three, plan, WORKFLOW)
    assert len(set(_owners(pg_url).values())) == 3
    held = fs.Held(fs._workers(three))
    held.take()
    assert held.per_key() == {"c1": 2, "c2": 2}
    # Asked of its owner, and of a server that does not own it: `waiting` is
    # what the owner's engine holds, and the other server asks the owner
    # (before, it answered the store's document, which has no `waiting`).
    by_node = dict(zip("abc", three, strict=True))
    owners = _owners(pg_url)
    for other in (0, 1):
        waiting = [
            by_node["abc"[("abc".index(owners[eid]) + other) % 3]]
            .http()
            .get(f"/v1/executions/{eid}")
            .body.get("waiting")
            for eid, _ in plan
        ]
        assert sum(1 for w in waiting if w and w["reason"] == "concurrency") == 5, other
    ids = [eid for eid, _ in plan]
    _run_all(held, three, ids)
    assert held.most == {"c1": 2, "c2": 2}
    assert _slots(pg_url) == []


def test_slots_of_a_sigkilled_server_go_to_the_others_after_the_take_over(
    three_shared: list[ServerProcess], pg_url: str
) -> None:
    """Six executions of `c-1` spread over the servers, two tasks out; the
    owner of one of them is SIGKILLed. Its slot stays held (its task is out
    at a worker) until the survivor that takes its executions over hears of
    the task's end; the waiting ones, its own among them, then run two at
    a time, all end, and no slot row is left."""
    three = three_shared
    _deploy(three[0])
    plan = [(f"c1-{i}", "c-1") for i in range(6)]
    fs._start_spread(three, plan, WORKFLOW)
    # The first two started took the two slots: c1-0 (owned by `a`) and
    # c1-1 (by `b`); the workers poll through the servers that live on.
    assert sorted(e for e, _ in _slots(pg_url)) == ["c1-0", "c1-1"]
    victim = _owners(pg_url)["c1-0"]
    by_node = dict(zip("abc", three, strict=True))
    survivors = [by_node[n] for n in "abc" if n != victim]
    held = fs.Held(fs._workers(survivors))
    held.take()
    assert sorted(t["execution_id"] for t in held.tasks.values()) == ["c1-0", "c1-1"]
    by_node[victim].stop(signal.SIGKILL)
    ids = [eid for eid, _ in plan]
    _run_all(held, survivors, ids)
    assert held.most == {"c1": 2}
    assert victim not in _owners(pg_url).values()
    assert _slots(pg_url) == []


PERIOD_MS = 8_000


def test_a_step_rate_holds_across_two_servers(three_shared: list[ServerProcess]) -> None:
    """`rate { max: 1, per: 8s, key: input.customer_id }` on the step, one
    execution of `c-1` started through each of two servers (each owns its
    own): one bucket for both, in the store, so the second task is handed
    out a period after the first (on main each server had a bucket of its
    own and both went out at once); another customer's is not held back.
    The second waits (its owner's document says so) and goes out a period
    after the first was queued."""
    a, b, _c = three_shared
    definition = demo_definition(
        "RatedShared", step="rate { max: 1, per: 8s, key: input.customer_id }"
    )
    assert a.http().post("/v1/workflows", ir.to_json(definition)).status == 201
    fs._start_spread([a, b], [("r1", "c-1"), ("r2", "c-1"), ("r3", "c-2")], "RatedShared")
    workers = fs._workers([a, b])
    found = sorted(t["execution_id"] for w in workers for t in real.take_all(w))
    assert found[:2] == ["r1", "r3"] or found == ["r2", "r3"], found
    assert len(found) == 2, found
    first, second = ("r1", "r2") if "r1" in found else ("r2", "r1")
    owner = b if second == "r2" else a
    assert real.doc(owner.http(), second)["waiting"]["reason"] == "rate"
    deadline = time.monotonic() + 30
    later: list[str] = []
    while not later and time.monotonic() < deadline:
        later = [t["execution_id"] for w in workers for t in real.take_all(w)]
    assert later == [second]
    # In shared mode the token is spent when the task is queued (for the
    # first: in the group that scheduled it), not at its dispatch.
    gap = real.event_ms(owner.http(), second, "StepDispatched") - real.event_ms(
        (a if owner is b else b).http(), first, "StepScheduled"
    )
    assert gap >= PERIOD_MS, gap  # (the servers' clocks are one machine's)


LINED = "LinedShared"


def _deploy_lined(server: ServerProcess) -> None:
    definition = demo_definition(
        LINED,
        input="customer_id: String, rank: Int = 0",
        step="priority: input.rank\n        concurrency { max: 1 }",
    )
    assert server.http().post("/v1/workflows", ir.to_json(definition)).status == 201


def _next_task(workers: list[RawWorker]) -> dict[str, Any]:
    """The next task any of `workers` is handed (each polls in turn)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for worker in workers:
            reply = worker.poll(wait_ms=200)
            assert reply.status in (200, 204), reply
            if reply.status == 200 and reply.body:
                return dict(reply.body)
    raise AssertionError("no task was handed out")


def _complete(server: ServerProcess, task: dict[str, Any]) -> None:
    reply = server.http().post("/v1/tasks/complete", {"token": task["token"], "output": {}})
    assert reply.status == 200 and reply.body.get("accepted"), reply


def _waits(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT execution_id FROM orbit_step_waits ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]


def _start_lined(servers: list[ServerProcess], ranks: dict[str, int]) -> None:
    """Starts each id through the server of the same place, with its rank."""
    plan = [(eid, "c-1") for eid in ranks]
    more = {eid: {"rank": rank} for eid, rank in ranks.items()}
    fs._start_spread(servers, plan, LINED, more)


def test_a_freed_slot_goes_to_the_highest_priority_unit_on_any_server(
    three_shared: list[ServerProcess], pg_url: str
) -> None:
    """`concurrency { max: 1 }` with `priority: input.rank`: the first
    attempt (`first`, through `a`) holds the slot while priority-1 units
    wait on `a` and `b` and a priority-9 one on `c`. When `first` completes
    through `a`, its owner, the freed slot goes to `c`'s unit, then to the
    others in arrival order (on main `a` let its own waiting unit in at
    once, in the commit of the end: each server ordered only its own line)."""
    a, b, c = three_shared
    _deploy_lined(a)
    workers = fs._workers(three_shared)
    _start_lined([a], {"first": 0})
    first = _next_task(workers)
    assert first["execution_id"] == "first"
    _start_lined([a, b], {"low-a": 1, "low-b": 1})
    _start_lined([c], {"high": 9})
    assert real.doc(c.http(), "high")["waiting"]["reason"] == "concurrency"
    order = []
    task = first
    for _ in range(3):
        _complete(a, task)
        task = _next_task(workers)
        order.append(task["execution_id"])
    assert order == ["high", "low-a", "low-b"]
    _complete(a, task)
    assert _slots(pg_url) == [] and _waits(pg_url) == []


def test_a_sigkilled_server_s_waiting_unit_keeps_its_place(
    three_shared: list[ServerProcess], pg_url: str
) -> None:
    """As above, and `c`, where the priority-9 unit waits, is SIGKILLed
    before the slot frees. Its waiting row holds the line (the others are
    refused the free slot) until a survivor takes `c`'s executions over; the
    unit keeps its place there and goes first, then the others; every
    execution ends, and no slot or waiting row is left."""
    a, b, c = three_shared
    _deploy_lined(a)
    survivors = [a, b]
    workers = fs._workers(survivors)
    _start_lined([a], {"first": 0})
    first = _next_task(workers)
    _start_lined([a, b], {"low-a": 1, "low-b": 1})
    _start_lined([c], {"high": 9})
    assert "high" in _waits(pg_url)
    c.stop(signal.SIGKILL)
    _complete(a, first)
    task = _next_task(workers)
    assert task["execution_id"] == "high"
    assert "c" not in _owners(pg_url).values()
    order = [task["execution_id"]]
    for _ in range(2):
        _complete(a, task)
        task = _next_task(workers)
        order.append(task["execution_id"])
    _complete(a, task)
    assert order == ["high", "low-a", "low-b"]
    deadline = time.monotonic() + 30
    while not all(fs._finished(a.http(), eid) for eid in ("first", "high", "low-a", "low-b")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert _slots(pg_url) == [] and _waits(pg_url) == []
