"""Standby mode (`orbit server --cluster`, chapter 44) on a real PostgreSQL.

In-process: the fenced store and engine of a deposed leader have every
write refused by the database. With real processes: two or three servers
on one database, a real Python SDK worker behind a load balancer that
follows /v1/ready (tests/cluster_proxy.py), the leader killed with SIGKILL
mid-workflow (the workflow completes once, through the other server), and
a leader frozen with SIGSTOP past its lease (a standby takes over; resumed,
the old one cannot write and steps down), and the leader SIGKILLed again
and again under load. The election runs every 200 ms here
(ORBIT_CLUSTER_INTERVAL_MS), so failovers take a fraction of a second.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import falcon.testing
import grpc
import pytest
import server_ir
from cluster_proxy import Proxy, ready
from grpc_client import GrpcWorker, grpc_addr
from server_harness import Http, RawWorker, ServerProcess, _parent_of, _pids, run_orbit, wait_until

from orbit_core.engine import Engine
from orbit_core.errors import StorageError
from orbit_server.app import create_app
from orbit_server.cluster import ClusterNode
from orbit_server.config import ServerConfig
from orbit_store.cluster import Election
from orbit_store.postgres import Fenced, PostgresStore

pytestmark = pytest.mark.postgres

# Election rounds of 200 ms: a 600 ms lease, which a busy test machine keeps.
INTERVAL_MS = 200
# How many times the failover test kills the leader.
FAILOVERS = int(os.environ.get("ORBIT_TEST_FAILOVERS", "20"))
ENV = {"ORBIT_CLUSTER_INTERVAL_MS": str(INTERVAL_MS)}
HERE = Path(__file__).resolve().parent
CHAIN = [("bench.step", "1.0.0")]


def _wait(check: Callable[[], Any], timeout: float, what: str, *logs: ServerProcess) -> Any:
    return wait_until(check, timeout, what, *logs, every=0.02)


# ---- in process: fencing


def test_a_deposed_leaders_store_and_engine_cannot_write(pg_url: str) -> None:
    url = pg_url
    keep = PostgresStore(url)
    a_election = Election(keep, "a", "http://a", idle_timeout_ms=60_000)
    b_election = Election(keep, "b", "http://b", idle_timeout_ms=60_000)
    try:
        term = a_election.try_lead()
        assert term == 1
        assert b_election.try_lead() is None  # one leader at a time
        a_engine = Engine(PostgresStore(url, fence_term=term), auto_tick=False)
        a_engine.deploy(server_ir.chain(1))
        assert a_engine.start("Chain", execution_id="before")["created"]
        # A partition: the database ends a's election session (so its lock),
        # but a's engine and store know nothing of it yet.
        with keep.session("test-admin") as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'orbit-cluster:a'"
            )
        new_term = _wait(b_election.try_lead, 5, "b to be elected")
        assert new_term == 2
        with pytest.raises(StorageError) as refused:
            a_engine.start("Chain", execution_id="after")
        assert refused.value.message == (
            "fenced: this server led term 1, but the cluster is at term 2; "
            "another server is the leader"
        )
        # Memory did not run ahead of the store, and the store has nothing.
        assert [e["execution_id"] for e in a_engine.list_executions()["executions"]] == ["before"]
        assert a_engine.health()["active_executions"] == 1
        assert keep.execution_row("after") is None
        # The new leader's store writes; the old one's check says why it lost.
        b_store = PostgresStore(url, fence_term=new_term)
        b_engine = Engine(b_store, auto_tick=False)
        assert b_engine.recovered_executions == 1
        assert b_engine.start("Chain", execution_id="after")["created"]
        reason = a_election.check(term)
        assert reason is not None and "election session" in reason
        with pytest.raises(Fenced):
            PostgresStore(url, fence_term=term).probe_write()
        a_engine.close()
        b_engine.close()
    finally:
        a_election.close()
        b_election.close()
        keep.close()


def _node(url: str, name: str) -> ClusterNode:
    """A cluster server's app in this process; its election rounds are run
    by the test (`round()`), so the order of events is the test's."""
    config = ServerConfig(db=url, cluster=True, node_id=name)
    return ClusterNode(
        config,
        node_id=name,
        advertise_addr=f"http://{name}",
        build_engine=lambda store, sharing: Engine(store, auto_tick=False, sharing=sharing),
        make_app=lambda engine, view: create_app(engine, config, cluster=view),
        interval=60.0,  # a lease of 3 minutes: only the database can stop a
    )


def test_a_deposed_leader_that_still_believes_it_leads_gets_fenced(pg_url: str) -> None:
    a, b = _node(pg_url, "a"), _node(pg_url, "b")
    to_a, to_b = falcon.testing.TestClient(a), falcon.testing.TestClient(b)
    try:
        a.round()
        b.round()
        assert (a.role, a.term, b.role, b.term) == ("leader", 1, "standby", 1)
        assert to_a.simulate_post("/v1/workflows", json=server_ir.chain(1)).status_code == 201
        refused = to_b.simulate_post("/v1/executions", json={"workflow": "Chain"})
        assert refused.status_code == 503
        assert refused.json["error"]["leader_node"] == "a"
        # A partition: the database ends a's election session; b is elected
        # at once, while a has not run a round since and is within its lease.
        with a.election._store.session("test-admin") as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'orbit-cluster:a'"
            )
            # pg_terminate_backend only signals: the lock goes when the backend has exited.
            ended = "SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = %s"
            _wait(
                lambda: admin.execute(ended, ["orbit-cluster:a"]).fetchone() == (True,),
                10,
                "a's election session to end",
            )
        b.round()
        assert (b.role, b.term) == ("leader", 2)
        assert a.serving()
        late = to_a.simulate_post("/v1/executions", json={"workflow": "Chain", "execution_id": "x"})
        assert late.status_code == 500
        assert late.json["error"] == {
            "code": "STORAGE_ERROR",
            "message": "fenced: this server led term 1, but the cluster is at term 2; "
            "another server is the leader",
        }
        assert to_b.simulate_get("/v1/executions/x").status_code == 404
        # Its next round notices, and it steps down and follows b.
        a.round()
        assert a.role == "standby"
        a.round()
        assert (a.term, a.fields()["leader"]) == (2, {"node_id": "b", "addr": "http://b"})
        moved = to_a.simulate_post("/v1/executions", json={"workflow": "Chain"})
        assert moved.status_code == 503
        assert moved.headers["x-orbit-leader"] == "http://b"
        started = to_b.simulate_post(
            "/v1/executions", json={"workflow": "Chain", "execution_id": "x"}
        )
        assert started.status_code == 201
        assert to_a.simulate_get("/v1/executions/x").json["status"] == "RUNNING"
    finally:
        a.close()
        b.close()


# ---- real processes


def _server(url: str, node: str, *args: str) -> ServerProcess:
    return ServerProcess(url, "--cluster", "--node-id", node, *args, env=ENV)


def _role(proc: ServerProcess) -> str:
    return str(proc.http().get("/v1/health").body["role"])


@pytest.fixture
def pair(pg_url: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    a = _server(pg_url, "a", "--session-timeout", "2").start(timeout=90)
    _wait(lambda: _role(a) == "leader", 30, "a to lead", a)
    b = _server(pg_url, "b", "--session-timeout", "2").start(timeout=90)
    _wait(lambda: "following the leader" in b.log(), 30, "b to follow a", b)
    try:
        yield a, b
    finally:
        for proc in (a, b):
            if proc.proc is not None:
                proc.stop(signal.SIGKILL)


def test_one_leader_serves_and_the_standby_refuses_writes(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = pair
    log = a.log()
    assert re.search(
        r'cluster mode: standby until elected node_id=a advertise_addr="http://127\.0\.0\.1:\d+"',
        log,
    ), log
    assert "cluster: elected leader; recovering executions from history node_id=a term=1" in log
    assert re.search(r"cluster: leader is serving node_id=a term=1 active_executions=0", log)
    assert 'cluster: standby; following the leader term=1 leader="a"' in b.log(), a.log()
    leader = {"node_id": "a", "addr": f"http://{a.addr}"}
    health = b.http().get("/v1/health").body
    assert {k: health[k] for k in ("role", "node_id", "term", "leader")} == {
        "role": "standby",
        "node_id": "b",
        "term": 1,
        "leader": leader,
    }
    ready = b.http().get("/v1/ready")
    assert ready.status == 503
    assert ready.body == {
        "role": "standby",
        "node_id": "b",
        "term": 1,
        "leader": leader,
        "ready": False,
    }
    assert a.http().get("/v1/ready").body == {
        "role": "leader",
        "node_id": "a",
        "term": 1,
        "leader": leader,
        "ready": True,
    }
    refused = b.http().post("/v1/executions", {"workflow": "x"})
    assert refused.status == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["x-orbit-leader"] == leader["addr"]
    assert refused.body == {
        "error": {
            "code": "NOT_LEADER",
            "message": f"this server is a standby; the leader is `a` at {leader['addr']}",
            "leader_node": "a",
            "leader_addr": leader["addr"],
        }
    }
    # Writes through the leader are read back through the standby (its
    # definitions are read again once they change).
    api = a.http()
    assert api.post("/v1/workflows", server_ir.chain(1)).status == 201
    assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "c-1"}).status == 201
    assert b.http().get("/v1/executions/c-1").body["status"] == "RUNNING"
    _wait(lambda: b.http().get("/v1/workflows/Chain").status == 200, 5, "the standby to see Chain")
    # A wait on the standby sees the end the leader commits (it re-reads).
    waited: list[Any] = []
    waiting = Http(b.addr)
    waiter = threading.Thread(
        target=lambda: waited.append(waiting.get("/v1/executions/c-1/wait?timeout_ms=20000").body)
    )
    waiter.start()
    # The CLI repeats a refused request once at the leader it names.
    cli = run_orbit("cancel", "c-1", "--server", f"http://{b.addr}")
    assert cli.returncode == 0, cli.stderr
    assert a.http().get("/v1/executions/c-1").body["status"] == "CANCELLED"
    waiter.join(10)
    waiting.close()
    assert waited and waited[0]["status"] == "CANCELLED", waited


def _start_worker(tmp_path: Path, proxy: Proxy, hold: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
    env.update(
        ORBIT_SERVER=proxy.url,
        CLUSTER_RUNS=str(tmp_path / "runs.txt"),
        CLUSTER_RELEASE=str(tmp_path / "release"),
        CLUSTER_HOLD_STEP=hold or "",
        PYTHONUNBUFFERED="1",
    )
    with open(tmp_path / "worker.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, str(HERE / "cluster_worker.py")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _more_runs(tmp_path: Path, before: int) -> bool:
    return len(_runs(tmp_path)) > before


def _any_ready(servers: list[ServerProcess]) -> bool:
    return any(ready(s.addr) for s in servers)


def _finished(api: Http, eid: str) -> Any:
    """The execution's document once it is no longer running, else False."""
    document = api.get(f"/v1/executions/{eid}").body
    return document["status"] != "RUNNING" and document


def _runs(tmp_path: Path) -> list[str]:
    path = tmp_path / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def _succeeded(api: Any, eid: str) -> list[str]:
    events = api.get(f"/v1/executions/{eid}/history").body["events"]
    return [e["step"] for e in events if e["type"] == "StepSucceeded"]


def test_the_leader_killed_mid_workflow_the_standby_finishes_it_once(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    proxy = Proxy(lambda: [a.addr if a.proc else "", b.addr if b.proc else ""])
    worker = _start_worker(tmp_path, proxy, hold="s1")
    try:
        api = a.http()
        assert api.post("/v1/workflows", server_ir.chain(3)).status == 201
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "k-1"}).status
        # The worker holds s1 (dispatched by a) when a is killed.
        _wait(lambda: any(" s1 " in r for r in _runs(tmp_path)), 10, "s1 to be running")
        killed = time.monotonic()
        a.stop(signal.SIGKILL)
        _wait(lambda: _role(b) == "leader", 10, "b to lead")
        failover_s = time.monotonic() - killed
        assert "cluster: elected leader; recovering executions from history node_id=b term=2" in (
            b.log()
        )
        assert "recovered active executions from history executions=1 in_flight=1" in b.log()
        (tmp_path / "release").touch()  # the late result reaches b through the proxy
        done = _wait(
            lambda: (d := b.http().get("/v1/executions/k-1").body)["status"] != "RUNNING" and d,
            20,
            "k-1 to finish",
        )
        assert done["status"] == "COMPLETED", done
        assert done["output"] == {} or done["status"] == "COMPLETED"
        api = b.http()
        assert _succeeded(api, "k-1") == ["s0", "s1", "s2"]
        # s1's result, reported after the failover, was accepted: no step ran twice.
        steps = [r.split()[1] for r in _runs(tmp_path)]
        assert steps == ["s0", "s1", "s2"], _runs(tmp_path)
        assert failover_s < 5, failover_s
    finally:
        worker.terminate()
        worker.wait(10)
        proxy.close()


def _processes(proc: ServerProcess) -> list[int]:
    """The arbiter and its worker (which holds the engine)."""
    assert proc.proc is not None
    root = proc.proc.pid
    return [root, *(p for p in _pids() if _parent_of(p) == root)]


def test_a_leader_paused_past_its_lease_cannot_write_when_it_resumes(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = pair
    api = a.http()
    assert api.post("/v1/workflows", server_ir.chain(2)).status == 201
    assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "f-1"}).status == 201
    held = RawWorker(api, "w-held", [("bench.step", "1.0.0")])
    assert held.register().status == 200
    token = held.task()["token"]  # s0, dispatched by a in term 1
    frozen = _processes(a)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        # a's election session goes silent; PostgreSQL ends it, b is elected.
        _wait(lambda: _role(b) == "leader", 20, "b to take over", b)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    assert "cluster: elected leader; recovering executions from history node_id=b term=2" in (
        b.log()
    )
    # Resumed, a may still believe it leads for a moment: whatever it does,
    # the result is refused (by its lease, or by the database's fence).
    late = held.complete(token, {"i": 1})
    assert late.status in (500, 503), late
    if late.status == 500:
        assert late.body["error"]["code"] == "STORAGE_ERROR"
        assert late.body["error"]["message"].startswith("fenced: this server led term 1")
    else:
        assert late.body["error"]["code"] == "NOT_LEADER"
    _wait(lambda: "cluster: lost leadership; stepped down to standby" in a.log(), 10, "a", a)
    _wait(lambda: a.http().get("/v1/health").body["term"] == 2, 10, "a to follow b", a)
    assert a.http().get("/v1/health").body["leader"]["node_id"] == "b"
    # Nothing a did after b's election reached the history; b finishes it.
    now = b.http()
    assert RawWorker(now, "w-held", []).complete(token, {"i": 1}).body["accepted"] is True
    worker = RawWorker(now, "w-new", [("bench.step", "1.0.0")])
    assert worker.register().status == 200
    task = worker.task()
    assert task["step_id"] == "s1"
    assert worker.complete(task["token"], {"i": 2}).status == 200
    done = now.get("/v1/executions/f-1/wait?timeout_ms=5000").body
    assert done["status"] == "COMPLETED", done
    assert _succeeded(now, "f-1") == ["s0", "s1"]


def _start_through(proxy: Proxy, eid: str) -> None:
    """Starts Chain as `eid` through the load balancer, retrying until a
    leader took it (the execution id makes a repeated start harmless)."""

    def started() -> bool:
        client = Http(proxy.addr, timeout=5)
        try:
            reply = client.post("/v1/executions", {"workflow": "Chain", "execution_id": eid})
            return reply.status in (200, 201)
        except OSError:
            return False
        finally:
            client.close()

    _wait(started, 30, f"{eid} to start")


class _Restart:
    """Starts a killed server again on a thread of its own, so the test goes
    on with the others meanwhile; `up` once it follows the leader."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.seen = len(server.lines)
        self.thread = threading.Thread(target=server.start, args=(90,), daemon=True)
        self.thread.start()

    def up(self) -> bool:
        return not self.thread.is_alive() and any(
            "following the leader" in line for line in self.server.lines[self.seen :]
        )


def _leader_and_standby(servers: list[ServerProcess]) -> tuple[ServerProcess, ServerProcess]:
    def found() -> tuple[ServerProcess, ServerProcess] | None:
        up = [s for s in servers if s.proc is not None and s.addr]
        roles = {id(s): _role(s) for s in up}
        leaders = [s for s in up if roles[id(s)] == "leader"]
        standbys = [s for s in up if roles[id(s)] == "standby"]
        return (leaders[0], standbys[0]) if leaders and standbys else None

    return _wait(found, 30, "a leader and a standby", *servers)  # type: ignore[no-any-return]


@pytest.fixture
def trio(pair: tuple[ServerProcess, ServerProcess], pg_url: str) -> Iterator[list[ServerProcess]]:
    c = _server(pg_url, "c", "--session-timeout", "2").start(timeout=90)
    try:
        _wait(lambda: "following the leader" in c.log(), 30, "c to follow", c)
        yield [*pair, c]
    finally:
        if c.proc is not None:
            c.stop(signal.SIGKILL)


@pytest.mark.timeout(180 + 20 * FAILOVERS)
def test_repeated_leader_kills_under_load_lose_and_fork_nothing(
    trio: list[ServerProcess], tmp_path: Path
) -> None:
    """Three servers; the leader is SIGKILLed FAILOVERS times
    (ORBIT_TEST_FAILOVERS, 20 by default) while a Python worker runs
    executions through the load balancer. Each time a standby takes over,
    and the killed server is started again (as a standby) while the test
    goes on. Every execution completes with each step succeeding exactly
    once and an unbroken history."""
    rounds = FAILOVERS
    servers = trio
    proxy = Proxy(lambda: [s.addr if s.proc else "" for s in servers])
    worker = _start_worker(tmp_path, proxy)
    started: list[str] = []
    failovers: list[float] = []
    restarts: list[_Restart] = []
    try:
        assert servers[0].http().post("/v1/workflows", server_ir.chain(3)).status == 201
        for i in range(rounds):
            # A server killed in an earlier round follows the leader again
            # before this round's leader dies: a takeover is timed from a
            # standby that is up, not from one still starting on a busy machine.
            for restart in restarts:
                _wait(restart.up, 30, "a restarted server to stand by", restart.server)
            leader, _ = _leader_and_standby(servers)
            for j in range(2):
                _start_through(proxy, f"r{i}-{j}")
                started.append(f"r{i}-{j}")
            before = len(_runs(tmp_path))
            _wait(functools.partial(_more_runs, tmp_path, before), 10, "a step to run")
            killed = time.monotonic()
            leader.stop(signal.SIGKILL)
            others = [s for s in servers if s is not leader and s.proc is not None and s.addr]
            _wait(functools.partial(_any_ready, others), 10, "a takeover")
            failovers.append(time.monotonic() - killed)
            restarts.append(_Restart(leader))
        for restart in restarts:
            _wait(restart.up, 30, "a restarted server to stand by", restart.server)
        current = next(s for s in servers if _role(s) == "leader")
        api = current.http()
        for eid in started:
            done = _wait(
                functools.partial(_finished, api, eid),
                30,
                f"{eid} to finish",
            )
            assert done["status"] == "COMPLETED", done
            events = api.get(f"/v1/executions/{eid}/history").body["events"]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert _succeeded(api, eid) == ["s0", "s1", "s2"], events
    finally:
        worker.terminate()
        worker.wait(10)
        proxy.close()
    ordered = sorted(failovers)
    print(
        f"\n{rounds} failovers: p50 {ordered[len(ordered) // 2] * 1000:.0f} ms, "
        f"max {ordered[-1] * 1000:.0f} ms"
    )
    assert ordered[-1] < 5


def _fired(proc: ServerProcess) -> float:
    text = proc.http().get("/v1/metrics").text
    match = re.search(r"^orbit_schedules_fired_total (\S+)$", text, re.M)
    assert match, text
    return float(match[1])


def test_only_the_leader_fires_schedules_and_a_new_leader_carries_on(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = pair
    api = a.http()
    assert api.post("/v1/workflows", server_ir.chain(1)).status == 201
    # Chain's task never runs here: overlap "allow" starts every occurrence.
    body = {"schedule_id": "tick", "workflow": "Chain", "interval": "1s", "overlap": "allow"}
    assert api.post("/v1/schedules", body).status == 201
    _wait(lambda: _fired(a) >= 2, 20, "a to fire twice", a)
    assert _fired(b) == 0
    _wait(lambda: b.http().get("/v1/schedules/tick").status == 200, 10, "b to see it", b)
    a.stop()  # graceful: its session ends, b takes over at once
    _wait(lambda: _role(b) == "leader", 20, "b to lead", b)
    _wait(lambda: _fired(b) >= 2, 20, "b to fire", b)
    runs = b.http().get("/v1/executions?workflow=Chain&limit=1000").body["executions"]
    schedule = b.http().get("/v1/schedules/tick").body
    ids = [e["execution_id"] for e in runs]
    assert len(ids) == len(set(ids))
    # Every fire started one execution (the latest may not be counted yet).
    assert schedule["fired"] <= len(ids) <= schedule["fired"] + 1, (schedule, ids)


def test_a_standby_reads_changed_schedules_and_definitions_without_a_new_engine(
    pg_url: str,
) -> None:
    """A schedule that changes (or fires, every second) is read again into
    the standby's engine, and new definitions are added to it: a new engine
    would end the waits parked on the old one."""
    a, b = _node(pg_url, "a"), _node(pg_url, "b")
    to_a, to_b = falcon.testing.TestClient(a), falcon.testing.TestClient(b)
    try:
        a.round()
        b.round()
        assert (a.role, b.role) == ("leader", "standby")
        assert to_a.simulate_post("/v1/workflows", json=server_ir.chain(1)).status_code == 201
        body = {"schedule_id": "hourly", "workflow": "Chain", "interval": "1h"}
        assert to_a.simulate_post("/v1/schedules", json=body).status_code == 201
        b.round()
        assert to_b.simulate_get("/v1/schedules/hourly").json["paused"] is False
        engine = b.engine
        assert to_a.simulate_post("/v1/schedules/hourly/pause").status_code == 200
        b.round()
        assert to_b.simulate_get("/v1/schedules/hourly").json["paused"] is True
        assert b.engine is engine  # the schedules' rows were read again, no rebuild
        assert to_a.simulate_post("/v1/workflows", json=server_ir.countdown()).status_code == 201
        b.round()
        assert b.engine is engine
        assert b.engine.definition("Countdown").name == "Countdown"
        assert to_b.simulate_get("/v1/workflows").json["workflows"]
        assert to_b.simulate_get("/v1/schedules/hourly").json["paused"] is True
    finally:
        b.close()
        a.close()


def test_a_standby_reads_workflow_definitions_from_the_database_on_each_request(
    pg_url: str,
) -> None:
    """A workflow the leader registers is served by the standby at once,
    without waiting for an election round (chapter 44: workflow definitions
    are read from the database on each request)."""
    a, b = _node(pg_url, "a"), _node(pg_url, "b")
    to_a, to_b = falcon.testing.TestClient(a), falcon.testing.TestClient(b)
    try:
        a.round()
        b.round()
        assert (a.role, b.role) == ("leader", "standby")
        assert to_b.simulate_get("/v1/workflows/Chain").status_code == 404
        assert to_b.simulate_get("/v1/workflows").json == {"workflows": []}
        assert to_a.simulate_post("/v1/workflows", json=server_ir.chain(1)).status_code == 201
        # No round has run on b since the deploy.
        got = to_b.simulate_get("/v1/workflows/Chain")
        assert got.status_code == 200, got.json
        assert got.json == to_a.simulate_get("/v1/workflows/Chain").json
        assert to_b.simulate_get("/v1/workflows/Chain/1.0.0").status_code == 200
        assert to_b.simulate_get("/v1/workflows").json == to_a.simulate_get("/v1/workflows").json
        assert to_a.simulate_post("/v1/workflows", json=server_ir.countdown()).status_code == 201
        names = [w["name"] for w in to_b.simulate_get("/v1/workflows").json["workflows"]]
        assert names == ["Chain", "Countdown"]
        missing = to_b.simulate_get("/v1/workflows/Nope")
        assert missing.status_code == 404
        assert missing.json["error"]["code"] == "WORKFLOW_NOT_FOUND"
    finally:
        b.close()
        a.close()


# ---- the gRPC binding on a cluster


def _grpc_code(error: grpc.RpcError, key: str) -> str | None:
    return next((str(v) for k, v in error.trailing_metadata() or () if k == key), None)


def _grpc_refusal(worker: GrpcWorker) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        worker.register()
    error: grpc.RpcError = caught.value
    return error


def test_grpc_workers_run_on_the_leader_and_a_standby_names_it(pg_url: str) -> None:
    """gRPC with --cluster (refused at start before): a standby fails every
    call with UNAVAILABLE and NOT_LEADER naming the leader, even without
    credentials; a gRPC worker runs a workflow on the leader, and after the
    leader is killed, registers again on the new one and finishes it."""
    args = ("--session-timeout", "2", "--grpc-addr", "127.0.0.1:0", "--token", "admin-0123456789")
    a = _server(pg_url, "a", *args).start(timeout=90)
    b: ServerProcess | None = None
    try:
        _wait(lambda: _role(a) == "leader", 30, "a to lead", a)
        b = _server(pg_url, "b", *args).start(timeout=90)
        _wait(lambda: "following the leader" in b.log(), 30, "b to follow a", b)
        leader = f"http://{a.addr}"
        with grpc.insecure_channel(grpc_addr(b)) as channel:
            for token in (None, "admin-0123456789"):
                error = _grpc_refusal(GrpcWorker(channel, token, "g-1", CHAIN, "python"))
                assert error.code() is grpc.StatusCode.UNAVAILABLE
                assert error.details() == (
                    f"NOT_LEADER: this server is a standby; the leader is `a` at {leader}"
                )
                assert _grpc_code(error, "orbit-error-code") == "NOT_LEADER"
                assert _grpc_code(error, "x-orbit-leader") == leader
        api = a.http("admin-0123456789")
        assert api.post("/v1/workflows", server_ir.chain(3)).status == 201
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "g-1"}).status
        with grpc.insecure_channel(grpc_addr(a)) as channel:
            worker = GrpcWorker(channel, "admin-0123456789", "g-1", CHAIN, "python")
            assert worker.register().accepted
            task = worker.task()
            assert (task.execution_id, task.step_id) == ("g-1", "s0")
            assert worker.complete(task.token, {"i": 1}).accepted
            held = worker.task()  # s1, dispatched by a: a dies before its result
            assert held.step_id == "s1"
        a.stop(signal.SIGKILL)
        _wait(lambda: _role(b) == "leader", 10, "b to lead", b)
        with grpc.insecure_channel(grpc_addr(b)) as channel:
            worker = GrpcWorker(channel, "admin-0123456789", "g-1", CHAIN, "python")
            assert worker.register().accepted
            assert worker.complete(held.token, {"i": 2}).accepted  # the late result
            last = worker.task()
            assert last.step_id == "s2"
            assert worker.complete(last.token, {"i": 3}).accepted
        api = b.http("admin-0123456789")
        done = _wait(lambda: _finished(api, "g-1"), 10, "g-1 to finish", b)
        assert done["status"] == "COMPLETED", done
        assert _succeeded(api, "g-1") == ["s0", "s1", "s2"]
    finally:
        for proc in (a, b):
            if proc is not None and proc.proc is not None:
                proc.stop(signal.SIGKILL)


def test_operator_actions_go_through_the_leader_and_a_pause_survives_failover(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    """docs/operating-executions.md: a standby refuses pause, resume and
    restart with NOT_LEADER as any write (the CLI repeats them at the
    leader); the pause is in the history, so the next leader keeps it."""
    a, b = pair
    api = a.http()
    assert api.post("/v1/workflows", server_ir.chain(2)).status == 201
    assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "held"}).status == 201
    standby = b.http()
    for action, body in (
        ("pause", {"reason": "x"}),
        ("resume", {}),
        ("restart", {"from": "s0", "force": True}),
        ("fork", {"from": "s0", "force": True}),
    ):
        refused = standby.post(f"/v1/executions/held/{action}", body)
        assert refused.status == 503, (action, refused)
        assert refused.body["error"]["code"] == "NOT_LEADER", (action, refused)
    cli = run_orbit("pause", "held", "--reason", "audit", "--server", f"http://{b.addr}")
    assert cli.returncode == 0, cli.stderr
    assert api.get("/v1/executions/held").body["pause_reason"] == "audit"

    a.stop(signal.SIGKILL)
    _wait(lambda: _role(b) == "leader", 30, "b to take over", b)
    doc = standby.get("/v1/executions/held").body
    assert doc["status"] == "RUNNING" and doc["paused"] is True and doc["pause_reason"] == "audit"
    worker = RawWorker(standby, "w-1", [("bench.step", "1.0.0")])
    assert worker.register().status == 200
    idle = worker.poll(300)
    assert idle.status in (200, 204) and "token" not in (idle.body or {}), idle
    assert standby.post("/v1/executions/held/resume", {}).status == 200
    task = worker.task(10_000)
    assert task["execution_id"] == "held", task
    assert worker.complete(task["token"], {"i": 1}).status == 200
    restarted = standby.post("/v1/executions/held/restart", {"from": "s0", "force": True})
    assert restarted.status == 201, restarted
    assert restarted.body["run"] == 2 and restarted.body["kept"] == []
    assert standby.get("/v1/executions/held").body["run"] == 2
    forked = standby.post(
        "/v1/executions/held/fork", {"from": "s1", "execution_id": "held-fork", "force": True}
    )
    assert forked.status == 201, forked
    assert standby.get("/v1/executions/held-fork").body["status"] == "RUNNING"
