"""Set-ups several cross-package tests share, so each states only what it
varies.

- `demo_source` / `demo_definition`: the `demo.work` task and a workflow
  with one step calling it (the flow-control tests vary the workflow's
  header and the step's clauses).
- `Scripted`: a `demo.work` worker on an in-process engine that takes the
  tasks offered when told to.
- `ORDERS_EXAMPLE`, `ORDERS_FILTER`, `ORDERS`, `start_orders`: issue 44's
  example (examples/visibility.orbit) and its three executions; the
  `orders_servers` fixture (tests/conftest.py) runs real servers for it on
  SQLite, PostgreSQL and two in shared mode.
- `shared_trio`: three real `orbit server --cluster-mode shared` processes
  on one PostgreSQL database (`a`, `b`, `c`; the `three_shared` fixture).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from server_harness import Http, ServerProcess

from orbit_core.engine import Engine
from orbit_core.ir import Definition
from orbit_lang.compiler import compile_source

REPO = Path(__file__).resolve().parents[1]

DEMO_TASK = """
task "demo.work" {
    version "1.0.0"
    input { customer_id: String }
    output {}
}
"""


def demo_source(
    workflow: str,
    *,
    version: str = "1.0.0",
    input: str = "customer_id: String",
    header: str = "",
    step: str = "",
) -> str:
    """`DEMO_TASK` and workflow `workflow` whose one step `work` calls it
    with the input's `customer_id`; `header`: clauses of the workflow
    (after its input), `step`: clauses of the step (after `with`)."""
    head = f"    {header}\n" if header else ""
    clauses = f"        {step}\n" if step else ""
    return (
        DEMO_TASK
        + f"""
workflow {workflow} {{
    version "{version}"
    input {{ {input} }}
{head}
    step work {{
        worker "demo.work"
        with {{ customer_id: input.customer_id }}
{clauses}    }}
}}
"""
    )


def compile_one(source: str, name: str = "w.orbit") -> Definition:
    """The one definition `source` declares (it must compile cleanly)."""
    result = compile_source(source, name)
    assert result.errors == 0, result.diagnostics
    (definition,) = result.definitions
    return definition


def demo_definition(workflow: str, **clauses: str) -> Definition:
    """`demo_source(workflow, **clauses)`, compiled."""
    return compile_one(demo_source(workflow, **clauses))


class Scripted:
    """A demo.work worker that takes tasks when told to."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        reply = engine.workers.register("w1", "python", [("demo.work", "1.0.0")])
        self.session = reply["worker_session_id"]

    def take_all(self) -> list[Any]:
        tasks = []
        while (task := self.engine.workers.poll(self.session, 0)) is not None:
            tasks.append(task)
        return tasks

    def ids(self) -> list[str]:
        return sorted(t["execution_id"] for t in self.take_all())

    def finish(self, tasks: list[Any]) -> None:
        """Completes each of `tasks` with an empty output."""
        for task in tasks:
            self.engine.workers.complete(task["token"], {})


ORDERS_EXAMPLE = REPO / "examples" / "visibility.orbit"
ORDERS_FILTER = 'customer == "c-1" and amount > 500'
# Issue 44's three executions: (id, customer, amount); the filter above
# selects the second alone.
ORDERS = (("o-1", "c-1", 100.0), ("o-2", "c-1", 600.0), ("o-3", "c-2", 700.0))
SHARED = ["--cluster", "--cluster-mode", "shared", "--session-timeout", "2", "--node-timeout", "2"]


def start_orders(api: Http) -> None:
    """Starts `ORDERS` (the example deployed already)."""
    for eid, customer, amount in ORDERS:
        reply = api.post(
            "/v1/executions",
            {
                "workflow": "Orders",
                "input": {"customer": customer, "amount": amount},
                "execution_id": eid,
            },
        )
        assert reply.status == 201, reply


def orders_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """One SQLite server, one PostgreSQL server, or two in shared mode on
    one database (`request.param`); the body of the `orders_servers`
    fixture."""
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            yield [stack.enter_context(ServerProcess(tmp_path / "orbit.db"))]
        elif request.param == "postgres":
            url = request.getfixturevalue("pg_url")
            yield [stack.enter_context(ServerProcess(url))]
        else:
            url = request.getfixturevalue("pg_url")
            env = {"ORBIT_CLUSTER_INTERVAL_MS": "200"}
            yield [
                stack.enter_context(ServerProcess(url, *SHARED, "--node-id", node, env=env))
                for node in ("a", "b")
            ]


SHARED_ENV = {"ORBIT_CLUSTER_INTERVAL_MS": "100"}


def shared_server(url: str, node: str) -> ServerProcess:
    """A shared-mode server with short session and node timeouts (a
    SIGKILLed one's executions are taken over within seconds)."""
    args = ["--cluster", "--cluster-mode", "shared", "--node-id", node]
    args += ["--session-timeout", "3", "--node-timeout", "2"]
    return ServerProcess(url, *args, env=SHARED_ENV)


def shared_trio(
    url: str, make: Callable[[str, str], ServerProcess] = shared_server
) -> Iterator[list[ServerProcess]]:
    """Three shared-mode servers (`make(url, node)`), started; SIGKILLed at
    the end."""
    servers = [make(url, name) for name in ("a", "b", "c")]
    try:
        for server in servers:
            server.start(timeout=90)
        yield servers
    finally:
        for server in servers:
            if server.proc is not None:
                server.stop(signal.SIGKILL)
