"""Issue 39's limits across the servers of shared mode, on three real
`orbit server --cluster-mode shared` processes over PostgreSQL: the
example's `concurrency { max: 2, key: input.customer_id }` holds for the
whole group (a key's gate is held by one server, which decides every start
of the key; docs/design/cluster.md), with the starts spread over the three
servers, and across a SIGKILL of the gate's holder while starts wait: no
waiting start is lost, every execution ends, and the histories never show
more than two running executions of a key at once."""

from __future__ import annotations

import signal
import time
from typing import Any

import psycopg
import pytest
import test_flow_real_server as real
from server_harness import Http, RawWorker, ServerProcess

pytestmark = [pytest.mark.timeout(240)]

LIMIT = 2
TERMINAL = ("WorkflowCompleted", "WorkflowFailed", "WorkflowCancelled", "WorkflowTimedOut")


def _start_spread(
    servers: list[ServerProcess],
    plan: list[tuple[str, str]],
    workflow: str = "PerCustomer",
    more: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Starts (execution id, customer) through each server in turn, with the
    input fields `more` has for the id; a start refused for a moment while a
    gate moves is sent again (same id)."""
    for n, (eid, customer) in enumerate(plan):
        api = servers[n % len(servers)].http()
        value = {"customer_id": customer, **(more or {}).get(eid, {})}
        body = {"workflow": workflow, "input": value, "execution_id": eid}
        deadline = time.monotonic() + 60
        while True:
            reply = api.post("/v1/executions", body)
            if reply.status in (200, 201):
                break
            assert reply.status == 503 and time.monotonic() < deadline, reply
            time.sleep(0.2)


class Held:
    """Tasks taken and not completed yet, per customer, polled through every
    live server; the counts are checked after every poll."""

    def __init__(self, workers: list[RawWorker]) -> None:
        self.workers = workers
        self.tasks: dict[str, dict[str, Any]] = {}  # token -> task
        self.most: dict[str, int] = {}

    def per_key(self) -> dict[str, int]:
        """Executions with a task out, per key (an attempt handed out again
        after its worker's session was lost replaces the one held here)."""
        counts: dict[str, int] = {}
        for eid in {task["execution_id"] for task in self.tasks.values()}:
            key = eid.split("-")[0]
            counts[key] = counts.get(key, 0) + 1
        return counts

    def take(self, wait_ms: int = 300) -> int:
        got = 0
        for worker in self.workers:
            while True:
                reply = worker.poll(wait_ms=wait_ms)
                assert reply.status in (200, 204), reply
                if reply.status == 204 or not reply.body:
                    break
                task = dict(reply.body)
                self.tasks[task["token"]] = task
                got += 1
                for key, count in self.per_key().items():
                    self.most[key] = max(self.most.get(key, 0), count)
                    assert count <= LIMIT, (
                        key,
                        sorted(t["execution_id"] for t in self.tasks.values()),
                    )
        return got

    def complete_one_each(self, api: Http) -> int:
        done: set[str] = set()
        for token, task in sorted(self.tasks.items(), key=lambda kv: kv[1]["execution_id"]):
            key = task["execution_id"].split("-")[0]
            if key in done:
                continue
            reply = api.post("/v1/tasks/complete", {"token": token, "output": {}})
            if reply.status == 200 and reply.body.get("accepted"):
                del self.tasks[token]
                done.add(key)
            elif reply.status == 200:
                del self.tasks[token]  # an attempt that was lost and handed out again
        return len(done)


def _history(api: Http, eid: str) -> list[dict[str, Any]]:
    reply = api.get(f"/v1/executions/{eid}/history")
    assert reply.status == 200, reply
    return list(reply.body["events"])


def _finished(api: Http, eid: str) -> bool:
    return str(api.get(f"/v1/executions/{eid}").body.get("status")) == "COMPLETED"


def _overlap(api: Http, ids: list[str]) -> dict[str, int]:
    """The most executions of each customer running at one time, from the
    histories (running: from WorkflowStarted to the end, half open)."""
    edges: dict[str, list[tuple[int, int]]] = {}
    for eid in ids:
        events = _history(api, eid)
        started = [e for e in events if e["type"] == "WorkflowStarted"]
        ended = [e for e in events if e["type"] in TERMINAL]
        assert len(started) == 1 and len(ended) == 1, [e["type"] for e in events]
        key = eid.split("-")[0]
        edges.setdefault(key, []).extend(
            [(int(ended[0]["timestamp_ms"]), -1), (int(started[0]["timestamp_ms"]), 1)]
        )
    most: dict[str, int] = {}
    for key, points in edges.items():
        running = 0
        for _, step in sorted(points):  # an end before a start at the same ms
            running += step
            most[key] = max(most.get(key, 0), running)
    return most


def _run_all(held: Held, servers: list[ServerProcess], ids: list[str]) -> None:
    deadline = time.monotonic() + 120
    api = servers[0].http()
    while not all(_finished(api, eid) for eid in ids):
        assert time.monotonic() < deadline, sorted(
            (eid, api.get(f"/v1/executions/{eid}").body.get("status")) for eid in ids
        )
        held.take()
        held.complete_one_each(servers[len(held.tasks) % len(servers)].http())


def _owner(url: str, execution_id: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT node_id FROM orbit_owners WHERE execution_id = %s", (execution_id,)
        ).fetchone()
    assert row is not None
    return str(row[0])


def _gate_holder(url: str) -> str:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT node_id FROM orbit_owners WHERE execution_id LIKE '@flow/%%'"
        ).fetchall()
    assert rows, "no flow gate is held"
    return str(rows[0][0])


def _workers(servers: list[ServerProcess]) -> list[RawWorker]:
    workers: list[RawWorker] = []
    for server in servers:
        worker = RawWorker(server.http(), f"w-{len(workers)}", [("demo.work", "1.0.0")])
        assert worker.register().status == 200
        workers.append(worker)
    return workers


def test_a_concurrency_limit_holds_across_three_servers(three_shared: list[ServerProcess]) -> None:
    """Six starts of `c1` and three of `c2`, spread over the three servers:
    at no moment are more than two tasks of a key out (on main each server
    let two of each key run: six `c1` tasks were out at once), every
    execution completes, and the histories agree."""
    three = three_shared
    a, _b, _c = three
    real.deploy(a.http())
    plan = [(f"c1-{i}", "c-1") for i in range(6)] + [(f"c2-{i}", "c-2") for i in range(3)]
    _start_spread(three, plan)
    held = Held(_workers(three))
    held.take()
    assert held.per_key() == {"c1": 2, "c2": 2}
    ids = [eid for eid, _ in plan]
    _run_all(held, three, ids)
    assert held.most == {"c1": 2, "c2": 2}
    assert _overlap(a.http(), ids) == {"c1": 2, "c2": 2}


def test_waiting_starts_survive_a_sigkill_of_the_gates_holder(
    three_shared: list[ServerProcess], pg_url: str
) -> None:
    """Starts of one key spread over the servers; the server holding the
    key's gate is SIGKILLed while four of them wait. Another server takes
    the gate over with its executions: the two tasks out are completed
    through the survivors, the waiting starts run two at a time, and all
    end."""
    three = three_shared
    a, _b, _c = three
    real.deploy(a.http())
    plan = [(f"c1-{i}", "c-1") for i in range(6)]
    _start_spread(three, plan)
    holder = _owner(pg_url, "c1-0")  # (the gate's holder, which owns them all)
    by_node = dict(zip("abc", three, strict=True))
    survivors = [by_node[n] for n in "abc" if n != holder]
    held = Held(_workers(survivors))
    held.take()
    assert held.per_key() == {"c1": 2}
    by_node[holder].stop(signal.SIGKILL)
    ids = [eid for eid, _ in plan]
    _run_all(held, survivors, ids)
    assert held.most == {"c1": 2}
    assert _overlap(survivors[0].http(), ids) == {"c1": 2}
    assert _gate_holder(pg_url) != holder
